"""Race replay: both lanes replayed on one clock at their true relative speed, in a small HTML/JS view.

Every token carries the measured time (seconds since its lane started) of the step that produced it,
so playing both lanes against the same clock shows exactly how much sooner the speculative lane
finishes, and where it stalls on rejected drafts. Play / pause / step / speed / restart run entirely
in the browser: a replay never reruns the model. Accessible: the controls are buttons (Tab, Enter; space,
right arrow and R as shortcuts), the scrolling token boxes take focus, every token's state is a hidden word
for screen readers (as in the token view), play state changes are announced, and with prefers-reduced-motion
the race does not move by itself: it is shown finished until the visitor presses Play.

The view runs a script inside an iframe, and its data may come from an uploaded trace, so the data is
untrusted: it travels as JSON in which `<`, `>`, `&`, U+2028 and U+2029 are written as `\\u003c`-style
escapes (the OWASP rule for JSON inside a <script>; nothing in it can close the script, open a comment
or end a JavaScript line), token text is set with textContent, never as HTML, and every number is made
finite and in range here (a lane's total is at least its last token's time) so the script cannot stall.
At most MAX_TOKENS tokens per lane are replayed (the first ones in time), so a huge trace stays a small page.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math

from .tokens import SR_LABEL, SR_ONLY_CSS, TOKEN_COLORS, TokenRecord

SPEEDS = (0.1, 0.25, 0.5, 1.0, 2.0)
MAX_TOKENS = 4000  # per lane, the first in time; the token view below the race shows more
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def script_json(data) -> str:
    """`data` as JSON that is safe inside an HTML <script> element (and still the same JSON value)."""
    return json.dumps(data, ensure_ascii=True, allow_nan=False).translate(_SCRIPT_SAFE)


def _seconds(value) -> float:
    """A time as a finite number of seconds >= 0 (0 for anything else)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 0.0
    return round(value, 5) if math.isfinite(value) and value > 0 else 0.0


def _timed(seq: int, records: list[TokenRecord]):
    """(seconds, seq, record) for one sequence's records. A function, so each sequence keeps its own index: a
    generator written inline in the loop over sequences reads the loop's index when it is consumed (the last one),
    which once drew every sequence's tokens in the last sequence's box."""
    return ((_seconds(r.t_s), seq, r) for r in records)


def _lane_payload(name: str, records: list[list[TokenRecord]], total_s: float, max_seqs: int, max_tokens: int = MAX_TOKENS) -> dict:
    shown = records[:max_seqs]
    # A sequence's records come in step order, so merging the sequences yields the first tokens in time without
    # sorting them all (a huge trace costs max_tokens here); the pick is then sorted, which the script relies on
    # even if a hostile trace's steps are out of time order.
    timed = heapq.merge(*(_timed(i, recs) for i, recs in enumerate(shown)), key=lambda x: x[0])
    picked = sorted(itertools.islice(timed, max_tokens), key=lambda x: x[0])
    cut = max(0, sum(map(len, shown)) - max_tokens)
    tokens = [[i, t, str(r.text), str(r.kind), str(r.tooltip())] for t, i, r in picked]
    n_out = sum(1 for recs in records for r in recs if r.out_index is not None)
    last = tokens[-1][1] if tokens else 0.0
    return {
        "name": str(name),
        "total_s": max(_seconds(total_s), last) if not cut else last,
        "n_seqs": len(shown),
        "hidden_seqs": max(0, len(records) - max_seqs),
        "cut_tokens": cut,
        "n_out": n_out,
        "tokens": tokens,
    }


def race_height(n_seqs: int, max_seqs: int = 3) -> int:
    """Pixel height of the component for `n_seqs` sequences (st.iframe needs a fixed height)."""
    shown = min(n_seqs, max_seqs)
    return 56 + 2 * (36 + shown * 80)


def race_html(
    ar_records: list[list[TokenRecord]],
    spec_records: list[list[TokenRecord]],
    ar_total_s: float,
    spec_total_s: float,
    max_seqs: int = 3,
    spec_label: str = "Speculative",
    max_tokens: int = MAX_TOKENS,
) -> str:
    data = {
        "lanes": [
            _lane_payload("Autoregressive", ar_records, ar_total_s, max_seqs, max_tokens),
            _lane_payload(spec_label, spec_records, spec_total_s, max_seqs, max_tokens),
        ],
        "speeds": list(SPEEDS),
    }
    return _page().replace("__DATA__", script_json(data))


def _page() -> str:
    """The template with the token view's colours and screen-reader words (one palette for both views)."""
    out = _TEMPLATE.replace("__SR_ONLY__", SR_ONLY_CSS).replace("__SR_LABELS__", script_json(SR_LABEL))
    for kind, (fg, bg) in TOKEN_COLORS.items():
        out = out.replace(f"__{kind.upper()}_FG__", fg).replace(f"__{kind.upper()}_BG__", f"rgba({bg[0]},{bg[1]},{bg[2]},{bg[3]})")
    return out


_TEMPLATE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Race replay</title>
<style>
body{margin:0;font-family:"Source Sans Pro",system-ui,sans-serif;color:#262730;background:transparent}
#race{padding:4px 2px}
.bar{display:flex;gap:6px;align-items:center;flex-wrap:wrap;margin-bottom:6px}
button,select{font:inherit;font-size:13px;padding:3px 10px;border:1px solid #c9cbd3;border-radius:6px;
 background:#fff;cursor:pointer}
button:hover{border-color:#1f4fd1;color:#1f4fd1}
button:focus-visible,select:focus-visible,.seq:focus-visible{outline:2px solid #1f4fd1;outline-offset:2px}
.sr{__SR_ONLY__}
#clock{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px;margin-left:8px}
.lane{margin:6px 0 8px 0}
.lanehead{display:flex;justify-content:space-between;font-size:13px;font-weight:600;margin-bottom:2px}
.lanehead .st{font-weight:400;font-family:ui-monospace,Menlo,Consolas,monospace}
.track{height:6px;background:#eceef3;border-radius:3px;margin-bottom:4px;position:relative}
.fill{height:6px;border-radius:3px;width:0}
.ar .fill{background:#8a8d99}.spec .fill{background:#1f4fd1}
.seq{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px;line-height:1.75;white-space:pre-wrap;
 word-break:break-word;border:1px solid #dcdde3;border-radius:6px;padding:3px 6px;height:70px;overflow-y:auto;margin-bottom:6px}
.t{border-radius:2px;display:none}
.t.on{display:inline}
.accepted{color:__ACCEPTED_FG__;background:__ACCEPTED_BG__;text-decoration:underline;text-decoration-thickness:2px;text-underline-offset:3px}
.rejected{color:__REJECTED_FG__;background:__REJECTED_BG__;text-decoration:line-through;text-decoration-thickness:2px}
.correction,.bonus{color:__CORRECTION_FG__;background:__CORRECTION_BG__;outline:1.5px solid rgba(40,90,230,.6);font-weight:600}
.correction::after{content:"↺";font-size:.65em;vertical-align:super}
.bonus::after{content:"+";font-size:.65em;vertical-align:super}
.more{font-size:12px;opacity:.7}
@media (prefers-color-scheme: dark){body{color:#fafafa}button,select{background:#262730;color:#fafafa;border-color:#555}
 .seq{border-color:#444}.track{background:#333}}
</style></head>
<body><div id="race" data-state="ready">
<div class="bar" role="toolbar" aria-label="Race replay controls (keys: space play or pause, right arrow step, R restart)">
 <button type="button" id="play" title="play / pause (space)" aria-keyshortcuts="Space">Pause</button>
 <button type="button" id="step" title="next step of either lane (right arrow)" aria-keyshortcuts="ArrowRight">Step ›</button>
 <button type="button" id="restart" title="replay from the start (R)" aria-keyshortcuts="R">Restart</button>
 <label style="font-size:13px">speed <select id="speed"></select></label>
 <span id="clock" aria-hidden="true">t = 0.00 s</span>
 <span id="announce" class="sr" role="status"></span>
</div>
<div id="motion" class="more" hidden>Reduced motion is on: the race is shown finished. Press Play to replay it.</div>
<div id="lanes"></div>
</div>
<script>
const DATA = __DATA__;
const KINDS = new Set(['plain', 'accepted', 'rejected', 'correction', 'bonus']);
const SR = __SR_LABELS__;  // what a screen reader hears after a token of each state
const TAG = {accepted: 'ins', rejected: 'del'};
// prefers-reduced-motion: nothing moves by itself; the race is shown finished and plays only when asked
const REDUCED = !!(window.matchMedia && window.matchMedia('(prefers-reduced-motion: reduce)').matches);
const finite = x => (Number.isFinite(x) && x > 0 ? x : 0);
for (const l of DATA.lanes) l.total_s = finite(l.total_s);
const maxT = Math.max(1e-6, ...DATA.lanes.map(l => l.total_s));
const times = [...new Set(DATA.lanes.flatMap(l => l.tokens.map(t => finite(t[1]))))].sort((a,b)=>a-b);
let now = 0, playing = true, speed = 1.0, last = null;
const root = document.getElementById('race');
const lanesDiv = document.getElementById('lanes');
const lanes = DATA.lanes.map((lane, li) => {
  const div = document.createElement('div');
  div.className = 'lane ' + (li === 0 ? 'ar' : 'spec');
  const head = document.createElement('div'); head.className = 'lanehead';
  const nm = document.createElement('span'); nm.textContent = lane.name;
  const st = document.createElement('span'); st.className = 'st';
  head.append(nm, st); div.append(head);
  const track = document.createElement('div'); track.className = 'track';
  const fill = document.createElement('div'); fill.className = 'fill'; track.append(fill); div.append(track);
  const boxes = [];
  for (let s = 0; s < lane.n_seqs; s++) {
    const b = document.createElement('div'); b.className = 'seq';
    b.tabIndex = 0; b.setAttribute('role', 'region');  // a scrolling box a keyboard can reach
    b.setAttribute('aria-label', lane.name + (lane.n_seqs > 1 ? ', sequence ' + (s + 1) : ''));
    div.append(b); boxes.push(b);
  }
  if (lane.hidden_seqs > 0) { const m = document.createElement('div'); m.className = 'more';
    m.textContent = '… and ' + lane.hidden_seqs + ' more sequences (same clock)'; div.append(m); }
  if (lane.cut_tokens > 0) { const m = document.createElement('div'); m.className = 'more';
    m.textContent = 'The replay stops after the first ' + lane.tokens.length + ' tokens (' + lane.cut_tokens
      + ' more are in the token view below).'; div.append(m); }
  const spans = [];
  for (const [seq, t, text, kind, tip] of lane.tokens) {
    const box = boxes[seq];
    if (box === undefined || !Number.isFinite(t)) continue;
    const k = KINDS.has(kind) ? kind : 'plain';
    const sp = document.createElement(TAG[k] || 'span'); sp.className = 't ' + k;
    sp.title = String(tip); const s = String(text);
    sp.textContent = s.length ? s.replace(/\n/g, '↵\n') : '∅';
    if (SR[k]) { const w = document.createElement('span'); w.className = 'sr'; w.textContent = ' (' + SR[k] + ')'; sp.append(w); }
    box.append(sp); spans.push({t, sp, kind});
  }
  lanesDiv.append(div);
  return {lane, st, fill, boxes, spans, shown: 0, out: 0};
});
function render() {
  document.getElementById('clock').textContent = 't = ' + now.toFixed(2) + ' s   (×' + speed + ')';
  for (const L of lanes) {
    // the spans are in time order: move the "shown" boundary forward or back (work per frame = tokens changed)
    const before = L.shown;
    while (L.shown < L.spans.length && L.spans[L.shown].t <= now + 1e-9) {
      const s = L.spans[L.shown++]; s.sp.classList.add('on'); if (s.kind !== 'rejected') L.out++; }
    while (L.shown > 0 && L.spans[L.shown - 1].t > now + 1e-9) {
      const s = L.spans[--L.shown]; s.sp.classList.remove('on'); if (s.kind !== 'rejected') L.out--; }
    if (L.shown !== before) { for (const b of L.boxes) b.scrollTop = b.scrollHeight; }
    const out = L.out;
    const done = now >= L.lane.total_s - 1e-9;
    L.fill.style.width = (100 * Math.min(now, L.lane.total_s) / maxT) + '%';
    L.st.textContent = (done ? '✓ finished in ' + L.lane.total_s.toFixed(2) + ' s' : 'decoding…')
      + '  ·  ' + out + ' tokens shown';
  }
  const state = now >= maxT - 1e-9 ? 'done' : (playing ? 'playing' : 'paused');
  if (state !== root.dataset.state) {  // announced once per change, not every frame
    document.getElementById('announce').textContent = state === 'done'
      ? 'Replay finished. ' + lanes.map(L => L.lane.name + ': ' + L.lane.total_s.toFixed(2) + ' s').join('; ') + '.'
      : (state === 'paused' ? 'Replay paused at ' + now.toFixed(2) + ' s.' : 'Replay playing.');
  }
  root.dataset.state = state;
}
function setPlaying(p) {
  playing = p; document.getElementById('play').textContent = p ? 'Pause' : 'Play'; last = null; render();
}
function tick(ts) {
  if (playing) { if (last !== null) { now = Math.min(maxT, now + speed * (ts - last) / 1000); }
    last = ts; if (now >= maxT) { setPlaying(false); } render(); }
  requestAnimationFrame(tick);
}
const sel = document.getElementById('speed');
for (const s of DATA.speeds) {
  const o = document.createElement('option'); o.value = s; o.textContent = s + '×'; if (s === 1) o.selected = true;
  sel.append(o);
}
sel.onchange = () => { speed = parseFloat(sel.value); render(); };
document.getElementById('play').onclick = () => { if (!playing && now >= maxT) now = 0; setPlaying(!playing); };
document.getElementById('step').onclick = () => {
  setPlaying(false); const nxt = times.find(t => t > now + 1e-9); now = nxt === undefined ? maxT : nxt; render();
};
document.getElementById('restart').onclick = () => { now = 0; setPlaying(true); };
root.addEventListener('keydown', e => {  // keyboard: the buttons work with Tab + Enter too; these are shortcuts
  if (e.target.tagName === 'SELECT' || e.altKey || e.ctrlKey || e.metaKey) return;
  const id = e.key === ' ' ? 'play' : e.key === 'ArrowRight' ? 'step' : (e.key === 'r' || e.key === 'R') ? 'restart' : null;
  if (id === null || (e.key === ' ' && e.target.tagName === 'BUTTON')) return;  // space on a button clicks it already
  e.preventDefault(); document.getElementById(id).click();
});
if (REDUCED) { now = maxT; playing = false; document.getElementById('play').textContent = 'Play';
  document.getElementById('motion').hidden = false; }
render(); requestAnimationFrame(tick);
</script></body></html>"""
