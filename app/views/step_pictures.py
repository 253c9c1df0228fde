"""Drawn pictures of one speculative step, one per stage (app/views/stepthrough.py's STAGES), and the figure of
plain decoding beside that step, for lesson 0 ("One speculative step").

Stage pictures are HTML strings of token boxes, read only from the recorded step: the draft tokens proposed,
the verify pass's k + 1 inputs with the causal mask as a small triangle grid, the accepted prefix, the
correction or bonus token, the KV cache after the roll-back. Token texts are model output: every one is
escaped here, and colour is never the only signal (each box also carries a word or a mark). The figure is a
plotly timeline from a lesson-0 measurement (app/common/measurement.py "one_step"). No streamlit.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from app.views.bars import frame
from app.views.charts import AR_COLOR, DRAFT_COLOR, OVERHEAD_COLOR, VERIFY_COLOR

STYLE = """<style>
.sp-row{display:flex;flex-wrap:wrap;align-items:flex-end;gap:4px;font-family:sans-serif;margin:4px 0 8px 0}
.sp-tok{display:inline-flex;flex-direction:column;align-items:center;min-width:3.2rem;padding:3px 5px;border-radius:5px;
 border:1.5px solid rgba(128,128,128,.5);font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.86rem}
.sp-tok small{font-family:sans-serif;font-size:.68rem;opacity:.8}
.sp-ctx{opacity:.55;border-style:dotted}
.sp-last{border-color:#555;font-weight:600}
.sp-draft{border:1.5px dashed #c77800;background:rgba(242,169,59,.12)}
.sp-acc{border-color:#0a7d32;background:rgba(16,160,70,.14);color:#0a7d32}
.sp-rej{border-color:#c62828;background:rgba(220,40,40,.10);color:#c62828;text-decoration:line-through}
.sp-gone{opacity:.45;text-decoration:line-through}
.sp-own{border-color:#1f4fd1;background:rgba(40,90,230,.12);color:#1f4fd1;font-weight:600}
.sp-hole{border-style:dashed;opacity:.5;background:repeating-linear-gradient(45deg,transparent 0 4px,rgba(128,128,128,.25) 4px 6px)}
.sp-label{font-family:sans-serif;font-size:.78rem;opacity:.8;margin:6px 0 0 0}
.sp-arrow{font-size:1.1rem;opacity:.6;padding:0 2px 8px 2px}
table.sp-mask{border-collapse:collapse;font-family:ui-monospace,Menlo,monospace;font-size:.7rem;margin:2px 0 6px 0}
table.sp-mask td,table.sp-mask th{width:1.35rem;height:1.35rem;text-align:center;border:1px solid rgba(128,128,128,.35);padding:0}
table.sp-mask th{font-weight:400;opacity:.75;border:none}
td.sp-see{background:rgba(40,90,230,.55)}
</style>"""
MAX_SHOWN = 14  # characters of a token's text shown in its box (the full text is in the table beside it)


def token_text(text: str) -> str:
    """A token's text for a box: escaped, spaces shown as '␣', newlines as '⏎', cut at MAX_SHOWN characters."""
    shown = text.replace(" ", "␣").replace("\n", "⏎") or "∅"
    shown = shown if len(shown) <= MAX_SHOWN else shown[: MAX_SHOWN - 1] + "…"
    return html.escape(shown)


def box(text: str, css: str, note: str = "") -> str:
    """One token box: its text, and a short note under it (never colour alone)."""
    small = f"<small>{html.escape(note)}</small>" if note else ""
    return f'<span class="sp-tok {css}">{token_text(text)}{small}</span>'


def _row(label: str, boxes: list[str]) -> str:
    return f'<div class="sp-label">{html.escape(label)}</div><div class="sp-row">{"".join(boxes)}</div>'


def _last_text(trace, index: int, seq: int) -> str:
    """The text of the row's last token before step `index` (the target's own token of the step before)."""
    for step in reversed(trace.steps[:index]):
        for q in step.seqs:
            if q.seq == seq:
                return q.next_text
    return ""


def _context(trace, index: int, seq: int, shown: int = 3) -> list[str]:
    """Up to `shown` token texts written before the row's last token (accepted drafts and own tokens, in order)."""
    texts: list[str] = []
    for step in trace.steps[:index]:
        for q in step.seqs:
            if q.seq == seq:
                texts += [d.text for d in q.drafted[: q.num_accepted]] + [q.next_text]
    return texts[:-1][-shown:]


def mask_grid(n: int) -> str:
    """The causal mask of a pass over n new tokens as an n × n triangle: row i (a query) sees columns 0..i."""
    names = ["last"] + [f"d{i}" for i in range(1, n)]
    head = "<tr><th></th>" + "".join(f"<th>{h}</th>" for h in names) + "</tr>"
    body = "".join(
        f"<tr><th>{names[i]}</th>" + "".join(f'<td class="{"sp-see" if j <= i else ""}">{"●" if j <= i else ""}</td>' for j in range(n))
        for i in range(n)
    )
    return f'<table class="sp-mask" aria-label="causal mask">{head}{body}</table>'


def _chain(trace, index: int, seq_pos: int):
    q = trace.steps[index].seqs[seq_pos]
    if q.tree is not None:
        raise ValueError("a draft-tree step is drawn by app/views/tree.py, not as a chain")
    return q, len(q.drafted), q.num_accepted


def draft_picture(trace, index: int, seq_pos: int = 0) -> str:
    q, k, _ = _chain(trace, index, seq_pos)
    ctx = [box(t, "sp-ctx", "text") for t in _context(trace, index, q.seq)]
    last = box(_last_text(trace, index, q.seq), "sp-last", "last token")
    drafts = [box(d.text, "sp-draft", f"d{i + 1} · q {d.draft_prob:.2f}") for i, d in enumerate(q.drafted)]
    arrow = '<span class="sp-arrow">→</span>'
    return STYLE + _row(f"The drafter guesses k = {k} tokens after the last one (dashed: not yet checked)", [*ctx, last, arrow, *drafts])


def verify_picture(trace, index: int, seq_pos: int = 0) -> str:
    q, k, _ = _chain(trace, index, seq_pos)
    inputs = [box(_last_text(trace, index, q.seq), "sp-last", "input 0")] + [
        box(d.text, "sp-draft", f"input {i + 1}") for i, d in enumerate(q.drafted)
    ]
    scores = [box(d.text, "sp-draft", f"p {d.target_prob:.2f}") for d in q.drafted] + [box("?", "sp-own", "after d" + str(k))]
    return (
        STYLE
        + _row(f"ONE target pass reads these k + 1 = {k + 1} tokens together", inputs)
        + _row("…and at each position scores the next token: p of each guess, and its own next token after the last", scores)
        + '<div class="sp-label">The causal mask (● = may attend): each position sees only itself and what came before, '
        "so position i is scored as if d1..d(i−1) were already written text.</div>" + mask_grid(k + 1)
    )


def accept_picture(trace, index: int, seq_pos: int = 0) -> str:
    q, k, a = _chain(trace, index, seq_pos)
    boxes = []
    for i, d in enumerate(q.drafted):
        if i < a:
            boxes.append(box(d.text, "sp-acc", "✓ kept"))
        elif i == a:
            boxes.append(box(d.text, "sp-rej", "✗ rejected"))
        else:
            boxes.append(box(d.text, "sp-gone", "after a ✗"))
    return STYLE + _row(f"Kept from the left while the target agrees: {a} of {k}", boxes)


def own_token_picture(trace, index: int, seq_pos: int = 0) -> str:
    q, k, a = _chain(trace, index, seq_pos)
    kept = [box(d.text, "sp-acc", "✓ kept") for d in q.drafted[:a]]
    kind = "+ bonus" if q.next_kind == "bonus" else "↺ correction"
    own = box(q.next_text, "sp-own", f"{kind} · p {q.next_prob:.2f}")
    return STYLE + _row(f"The step adds {a} kept + 1 of the target's own = {a + 1} tokens from one pass", [*kept, own])


def rollback_picture(trace, index: int, seq_pos: int = 0) -> str:
    q, k, a = _chain(trace, index, seq_pos)
    before = box("…", "sp-ctx", "earlier")
    last = box(_last_text(trace, index, q.seq), "sp-last", "cached")
    cells = [box(d.text, "sp-acc" if i < a else "sp-hole", "cached" if i < a else "hole") for i, d in enumerate(q.drafted)]
    pending = box(q.next_text, "sp-own", "next step's last")
    arrow = '<span class="sp-arrow">|</span>'
    return STYLE + _row(
        f"The KV cache after the roll-back: {a} guess(es) stay, {k - a} position(s) become holes (no copy)",
        [before, last, *cells, arrow, pending],
    )


PICTURES = (draft_picture, verify_picture, accept_picture, own_token_picture, rollback_picture)


def stage_pictures(trace, index: int, seq_pos: int = 0) -> list[str]:
    """The five stage pictures of a chain step (an empty list for a draft-tree step: app/views/tree.py draws it)."""
    if trace.steps[index].seqs[seq_pos].tree is not None:
        return []
    return [draw(trace, index, seq_pos) for draw in PICTURES]


# --- plain decoding beside the step --------------------------------------------------------------------------
def plain_vs_step_figure(m: dict) -> go.Figure:
    """Two timelines writing the same tokens: plain decoding (one pass per token, each the measured plain step) and
    the one speculative step (draft, then one verify pass, then the engine's overhead). Without a measured plain
    step, the plain lane is left out and the caption says so."""
    fig = go.Figure()
    gained, plain = m["gained"], m.get("plain_step_ms")
    if plain is not None:
        for i in range(gained):
            fig.add_bar(
                y=["plain decoding"],
                x=[plain],
                base=[i * plain],
                orientation="h",
                marker_color=AR_COLOR,
                marker_line_color="white",
                marker_line_width=2,
                name="one plain pass (one token)",
                showlegend=i == 0,
                hovertemplate=f"plain pass {i + 1}: %{{x:.1f}} ms, 1 token<extra></extra>",
            )
    t = 0.0
    for label, ms, color, hatch in (  # hatched apart too: never told apart by colour alone
        (f"draft {m['k']}", m["draft_ms"], DRAFT_COLOR, "/"),
        (f"verify {m['k'] + 1} tokens in one pass", m["verify_ms"], VERIFY_COLOR, "x"),
        ("overhead", m["step_ms"] - m["draft_ms"] - m["verify_ms"], OVERHEAD_COLOR, "."),
    ):
        fig.add_bar(
            y=["one speculative step"],
            x=[max(ms, 0.0)],
            base=[t],
            orientation="h",
            marker={"color": color, "pattern": {"shape": hatch}},
            name=label,
            hovertemplate=f"{label}: %{{x:.1f}} ms<extra></extra>",
        )
        t += max(ms, 0.0)
    fig.update_layout(xaxis_title="time (ms)")
    frame(fig, f"The same {gained} token(s): plain decoding vs one speculative step", "", height=200)
    fig.update_layout(barmode="overlay", margin={"l": 10})  # the bars' names sit on the y-axis, the title under the toolbar
    return fig


def plain_vs_step_rows(m: dict) -> list[dict]:
    """The numbers under the figure: passes, time and tokens of each way of writing the step's tokens."""
    plain = m.get("plain_step_ms")
    return [
        {
            "how": "plain decoding",
            "target passes": m["gained"],
            "time (ms)": round(plain * m["gained"], 1) if plain is not None else None,
            "tokens": m["gained"],
        },
        {"how": "one speculative step", "target passes": 1, "time (ms)": round(m["step_ms"], 1), "tokens": m["gained"]},
    ]
