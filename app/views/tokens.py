"""Token view: what each lane wrote, token by token, coloured by where the token came from.

- AR lane: every token is the target's own (neutral).
- Speculative lane: accepted draft tokens (green, underlined), rejected draft tokens (red, struck
  through: computed, then thrown away), and the target's own token of each step: a correction after
  a rejection or a bonus after full acceptance (blue, boxed, with a ↺ / + marker). Colour is never
  the only signal, so the view stays readable for colour-blind users; accepted and rejected drafts are
  <ins> / <del> and every state is also a visually hidden word, so a screen reader says it too; every
  state's colours keep WCAG AA contrast (4.5:1).
- Hovering a draft token shows its draft probability q and target probability p, and what decided it:
  in a sampling run min(1, p/q), the chance that verification keeps it (Leviathan et al. 2023, Alg. 1);
  in a greedy run (temperature 0) only whether it was the target's argmax at that position.

`token_records` works on a plain list of Steps, so the page can redraw a lane live while it decodes.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

KINDS = ("plain", "accepted", "rejected", "correction", "bonus")
CSS_CLASS = {
    "plain": "tok tok-plain",
    "accepted": "tok tok-acc",
    "rejected": "tok tok-rej",
    "correction": "tok tok-fix",
    "bonus": "tok tok-bonus",
}
MARKER = {"correction": "↺", "bonus": "+"}
MAX_LANE_TOKENS = 12_000  # tokens one lane's HTML draws (about 3 MB); the rest is counted in a closing line

# Token colours: (text, background) per state. Every text colour keeps at least 4.5:1 (WCAG AA) against its
# background composited on white and on Streamlit's light grey (tests/app/test_accessibility_views.py checks it),
# and no state is told by colour alone: accepted is underlined (<ins>), rejected struck through (<del>), the
# target's own tokens boxed and marked, and a visually hidden word names each state for screen readers.
TOKEN_COLORS = {
    "accepted": ("#08692a", (16, 160, 70, 0.13)),
    "rejected": ("#a51d1d", (220, 40, 40, 0.10)),
    "correction": ("#1f4fd1", (40, 90, 230, 0.12)),
    "bonus": ("#1f4fd1", (40, 90, 230, 0.12)),
}
FLAG_COLOR = "#8a5200"  # the first-difference flag: 6.4:1 on white
SR_LABEL = {  # what a screen reader hears after a token (visually hidden)
    "accepted": "accepted draft",
    "rejected": "rejected draft",
    "correction": "target's correction",
    "bonus": "target's bonus token",
}
# Inside a screen reader's reading of a lane: "Paris (accepted draft) London (rejected draft) …"
TAG = {"accepted": "ins", "rejected": "del"}


def _rgba(bg: tuple) -> str:
    return f"rgba({bg[0]},{bg[1]},{bg[2]},{bg[3]})"


SR_ONLY_CSS = (
    "position:absolute!important;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;clip:rect(0,0,0,0);white-space:nowrap;border:0"
)

STYLE = f"""<style>
.sl-lane{{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:0.86rem;line-height:1.9;
 white-space:pre-wrap;word-break:break-word;border:1px solid rgba(128,128,128,.35);border-radius:6px;
 padding:6px 8px;margin:0 0 6px 0;max-height:24rem;overflow-y:auto}}
.sl-lane:focus-visible{{outline:2px solid #1f4fd1;outline-offset:2px}}
.sl-seqhead{{font-size:0.75rem;opacity:.7;margin:2px 0 0 0;font-family:sans-serif}}
.sl-sr{{{SR_ONLY_CSS}}}
.tok{{border-radius:2px}}
ins.tok,del.tok{{text-decoration-thickness:2px}}
.tok-plain{{}}
.tok-acc{{color:{TOKEN_COLORS["accepted"][0]};background:{_rgba(TOKEN_COLORS["accepted"][1])};text-decoration:underline;text-decoration-thickness:2px;text-underline-offset:3px}}
.tok-rej{{color:{TOKEN_COLORS["rejected"][0]};background:{_rgba(TOKEN_COLORS["rejected"][1])};text-decoration:line-through;text-decoration-thickness:2px}}
.tok-fix,.tok-bonus{{color:{TOKEN_COLORS["correction"][0]};background:{_rgba(TOKEN_COLORS["correction"][1])};
 outline:1.5px solid rgba(40,90,230,.6);font-weight:600}}
.tok-mark{{font-size:.65em;vertical-align:super;margin-left:1px}}
.tok-diff{{box-shadow:0 0 0 2px #e69f00;border-radius:3px}}
.tok-flag{{color:{FLAG_COLOR};font-weight:700;font-size:.8em}}
.sl-legend{{font-family:sans-serif;font-size:0.8rem;margin:2px 0 8px 0}}
.sl-legend .tok{{margin-right:12px;padding:0 3px}}
</style>"""


@dataclass
class TokenRecord:
    seq: int
    text: str
    kind: str  # one of KINDS
    step: int
    t_s: float  # end of the step that produced it, seconds since the run started
    out_index: int | None  # position in the sequence's output (None for a rejected draft token)
    draft_prob: float | None = None
    target_prob: float | None = None
    greedy: bool = False  # temperature 0: a draft is kept iff it is the target's argmax (no p/q test)

    @property
    def accept_prob(self) -> float | None:
        if self.draft_prob is None or self.target_prob is None:
            return None
        return 1.0 if self.draft_prob <= 0 else min(1.0, self.target_prob / self.draft_prob)

    def tooltip(self) -> str:
        if self.kind in ("accepted", "rejected"):
            verdict = "accepted" if self.kind == "accepted" else "rejected"
            head = f"draft token, {verdict} (step {self.step})\ndraft q = {self.draft_prob:.3f}   target p = {self.target_prob:.3f}\n"
            if self.greedy:
                why = "it is the target's argmax here" if self.kind == "accepted" else "the target's argmax here is another token"
                return head + f"greedy: kept only if it is the target's argmax; {why}"
            return head + f"min(1, p/q) = {self.accept_prob:.3f}"
        if self.kind == "correction":
            return f"target's correction after a rejection (step {self.step})\ntarget p = {self.target_prob:.3f}"
        if self.kind == "bonus":
            return f"target's bonus token: all drafts accepted (step {self.step})\ntarget p = {self.target_prob:.3f}"
        prob = f"\ntarget p = {self.target_prob:.3f}" if self.target_prob is not None else ""
        return f"target token (step {self.step}){prob}"


def token_records(steps, n_seqs: int, greedy: bool = False) -> list[list[TokenRecord]]:
    """Per sequence, every token in the order it appeared (rejected draft tokens included).

    greedy: the run used temperature 0, so draft tooltips say the argmax decided, not min(1, p/q).
    One pass over the steps: each step's work is its own draft tokens (a running output count per sequence,
    not a recount of the records so far), so a 100,000-step trace costs 100,000 steps' work."""
    out: list[list[TokenRecord]] = [[] for _ in range(n_seqs)]
    n_outs = [0] * n_seqs  # per sequence: output tokens so far (a running count keeps this linear in the steps)
    for step in steps:
        for s in step.seqs:
            seq_tokens = out[s.seq]
            n_out = n_outs[s.seq]
            n_emitted = len(s.emitted)
            for j, d in enumerate(s.drafted):
                if d.accepted and j >= n_emitted:  # accepted, but cut by EOS / max_new_tokens
                    continue
                seq_tokens.append(
                    TokenRecord(
                        seq=s.seq,
                        text=d.text,
                        kind="accepted" if d.accepted else "rejected",
                        step=step.index,
                        t_s=step.t_end_s,
                        out_index=n_out + j if d.accepted else None,
                        draft_prob=d.draft_prob,
                        target_prob=d.target_prob,
                        greedy=greedy,
                    )
                )
            if n_emitted > s.num_accepted:  # the target's own token made it into the output
                kind = s.next_kind if s.drafted else "plain"
                seq_tokens.append(
                    TokenRecord(
                        seq=s.seq,
                        text=s.next_text,
                        kind=kind,
                        step=step.index,
                        t_s=step.t_end_s,
                        out_index=n_out + s.num_accepted,
                        target_prob=s.next_prob,
                    )
                )
            n_outs[s.seq] = n_out + min(n_emitted, s.num_accepted) + (1 if n_emitted > s.num_accepted else 0)
    return out


def first_differences(ar_ids: list[list[int]], spec_ids: list[list[int]]) -> dict[int, int]:
    """seq -> index of the first output token where the two lanes differ (only sequences that differ)."""
    diffs = {}
    for i, (a, b) in enumerate(zip(ar_ids, spec_ids)):
        for j, (x, y) in enumerate(zip(a, b)):
            if x != y:
                diffs[i] = j
                break
        else:
            if len(a) != len(b):
                diffs[i] = min(len(a), len(b))
    return diffs


def _display_text(text: str) -> str:
    if text == "":
        return "∅"
    shown = text.replace("\n", "↵\n").replace("\t", "⇥")
    return html.escape(shown)


def token_span(rec: TokenRecord, diff: bool = False) -> str:
    """One token: <ins> (accepted draft), <del> (rejected draft) or <span>, its state also in a visually hidden
    word for screen readers (the ↺ / + / ⚑ glyphs are decoration, hidden from them)."""
    cls = CSS_CLASS[rec.kind] + (" tok-diff" if diff else "")
    tag = TAG.get(rec.kind, "span")
    marker = f'<span class="tok-mark" aria-hidden="true">{MARKER[rec.kind]}</span>' if rec.kind in MARKER else ""
    said = SR_LABEL.get(rec.kind)
    sr = f'<span class="sl-sr"> ({said})</span>' if said else ""
    flag = (
        (
            '<span class="tok-flag" title="first token where the lanes differ"><span aria-hidden="true">⚑</span>'
            '<span class="sl-sr">first difference: </span></span>'
        )
        if diff
        else ""
    )
    tip = html.escape(rec.tooltip() + ("\nfirst token where the two lanes differ" if diff else ""), quote=True)
    return f'{flag}<{tag} class="{cls}" data-kind="{rec.kind}" title="{tip}">{_display_text(rec.text)}{marker}{sr}</{tag}>'


def sequence_html(records: list[TokenRecord], first_diff: int | None = None) -> str:
    return "".join(token_span(r, diff=first_diff is not None and r.out_index == first_diff) for r in records)


def legend_html(speculative: bool = True) -> str:
    if not speculative:
        return '<div class="sl-legend"><span class="tok tok-plain">plain</span> every token is one target pass</div>'
    return (
        '<div class="sl-legend">'
        '<ins class="tok tok-acc">accepted draft</ins>'
        '<del class="tok tok-rej">rejected draft</del>'
        '<span class="tok tok-fix">correction<span class="tok-mark" aria-hidden="true">↺</span></span>'
        '<span class="tok tok-bonus">bonus<span class="tok-mark" aria-hidden="true">+</span></span>'
        '<span class="tok tok-plain">target only (no draft)</span>'
        '<span><span class="tok-flag" aria-hidden="true">⚑</span><span class="tok tok-diff">first difference</span></span>'
        "</div>"
    )


def lane_html(
    records: list[list[TokenRecord]],
    first_diff: dict[int, int] | None = None,
    max_seqs: int | None = None,
    status: str = "",
    speculative: bool = True,
    max_tokens: int = MAX_LANE_TOKENS,
) -> str:
    """One lane (all its sequences, or the first `max_seqs`) as a self-contained HTML snippet.

    At most `max_tokens` tokens are drawn in all (a huge uploaded trace stays a page a browser can
    show); a closing line says how many were left out."""
    first_diff = first_diff or {}
    shown = records if max_seqs is None else records[:max_seqs]
    parts = [STYLE, legend_html(speculative)]
    if status:
        parts.append(f'<div class="sl-seqhead">{html.escape(status)}</div>')
    budget = max_tokens
    for i, recs in enumerate(shown):
        if budget <= 0:
            break
        if len(records) > 1:
            parts.append(f'<div class="sl-seqhead">sequence {i + 1}</div>')
        name = f"{'speculative' if speculative else 'autoregressive'} lane" + (f", sequence {i + 1}" if len(records) > 1 else "")
        # a scrolling box: focusable, so a keyboard can scroll it (WCAG 2.1.1), and named for screen readers
        parts.append(
            f'<div class="sl-lane" tabindex="0" role="region" aria-label="{name}">{sequence_html(recs[:budget], first_diff.get(i))}</div>'
        )
        budget -= len(recs)
    left_out = sum(len(recs) for recs in shown) - max_tokens
    if left_out > 0:
        parts.append(f'<div class="sl-seqhead">… {left_out:,} more tokens not drawn (at most {max_tokens:,} per lane)</div>')
    if max_seqs is not None and len(records) > max_seqs:
        parts.append(f'<div class="sl-seqhead">… and {len(records) - max_seqs} more sequences</div>')
    return "".join(parts)


def kind_counts(records: list[list[TokenRecord]]) -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    for recs in records:
        for r in recs:
            counts[r.kind] += 1
    return counts
