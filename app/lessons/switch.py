"""Lesson 4 ("Serving stacks make speculation load-aware"): the switch, seen step by step (no streamlit, no torch).

The lesson decodes one batch of prompts whose answers end at different lengths (RAGGED_PROMPTS: short questions
that end after a few tokens, and one open question that runs to the token limit), so the live batch shrinks during
the run, as it does in this engine, which never refills a finished row. Three lanes: plain decoding, speculation
always on, and off above batch N. A run splits into two phases by its live batch: while more than N rows decode
("full": the switch is off) and once N or fewer remain ("shrunk": the switch is back on). Each phase's rate is its
decode steps' tokens over their time, per interleaved run, so every verdict is the one rule's over those rounds
(app/common/verdict.py, through app/lessons/noise.py). Every sentence is computed from the measurement.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.common.lane_stats import spread
from app.lessons import knee, noise
from engine.bench.prompts import EXTRACTIVE_PROMPTS

# The first prompt asks for a long copy (engine/bench/prompts.py, the case where drafts are accepted often), which
# runs to the token limit; the others ask for a word, a number or a sentence, so their rows end after a few to a few
# dozen tokens (the run records how many rows were still decoding at each step: `steps`).
RAGGED_PROMPTS = (
    EXTRACTIVE_PROMPTS[0],
    "Reply with only yes or no: is water wet?",
    "Name one fruit. Answer in one word.",
    "What is 2 + 2? Reply with the number only.",
    "Name a primary colour. One word only.",
    "Give a synonym for happy. One word only.",
    "Answer with one word: what colour is the sky on a clear day?",
    "In one sentence, what does a baker do?",
    "What is 10 minus 3? Reply with the number only.",
    "Reply with only yes or no: is fire cold?",
    "In one sentence, what is a cat?",
    "Say hello.",
    "Say goodbye in French.",
    "Translate 'thank you' into Spanish. Reply with the translation only.",
    "In two sentences, why do leaves change colour in autumn?",
    "Describe a rainbow in two short sentences.",
)
DRAFTER = "ngram"  # the lookup drafts from the text so far at almost no cost: the long copy is its best case
SWITCH_BATCHES = (4, 8, 16)  # the batch knob's options (0: chosen from this machine's pass curve)
CHOSEN_BATCHES = (4, 8)  # the batches setting 0 chooses from: at 16 rows some short answers run to the token budget
# beside the long copy, so the batch never shrinks to N and the switch never comes back on
SWITCH_PAST = 8.0  # the full batch's verify pass carries at least this many times the room: far enough past it that
# every guess costs real time even with the n-gram lookup's free drafts (at 4x the room, 16 tokens on the 2-core EPYC,
# a pass cost 1.75x a one-token pass and the lookup's accepted guesses still paid for it)
LANES = (("ar", "plain"), ("on", "always on"), ("off", "switch"))  # measurement key, name in a sentence
PHASES = ("full", "shrunk")
MAX_STEPS = 512  # steps kept per lane (the schema's list cap, engine/checks.py SPEC_MAX_LIST)


def ragged_prompts(batch: int) -> list[str]:
    if not 1 <= batch <= len(RAGGED_PROMPTS):
        raise ValueError(f"lesson 4 has {len(RAGGED_PROMPTS)} prompts of different lengths; asked for {batch}")
    return list(RAGGED_PROMPTS[:batch])


def choose(room: int, s: dict) -> dict:
    """The lesson's settings from the room (knee.py), a knob's 0 meaning "from this machine's curve": speculation's
    depth k, the deepest draft a one-row verify pass fits inside the room (at most knee.MOST_DEPTH); the batch, the
    smallest of CHOSEN_BATCHES whose verify pass carries SWITCH_PAST x the room's tokens (else the largest); the
    switch's N, the most rows whose verify pass still fits the room (at least 1)."""
    depth = int(s.get("depth", 0)) or knee.inside_depth(room, 1, most=knee.MOST_DEPTH)
    batch = int(s.get("batch", 0)) or knee.past_batch(room, depth, CHOSEN_BATCHES, SWITCH_PAST)
    n = int(s.get("n", 0)) or max(1, room // (depth + 1))
    return {"room": int(room), "depth": depth, "batch": batch, "n": n, "tokens": int(s["tokens"])}


def decode_steps(traces: list) -> list:
    return [st for t in traces for st in t.steps if st.kind == "decode"]


def step_rows(trace) -> list[list[float]]:
    """[live batch, draft depth, step ms] of each decode step of one run."""
    return [[st.batch, st.depth, round(st.step_ms, 3)] for st in decode_steps([trace])][:MAX_STEPS]


def phase_rate(trace, n: int, phase: str) -> float | None:
    """Decode tokens per second over the steps of one phase: "full" (more than n rows decoding), "shrunk" (n or
    fewer); None where the run had no such step."""
    steps = [st for st in decode_steps([trace]) if (st.batch > n) == (phase == "full")]
    ms = sum(st.step_ms for st in steps)
    tokens = sum(len(q.emitted) for st in steps for q in st.seqs)
    return 1000.0 * tokens / ms if steps and ms > 0 else None


def phases(runs: list, n: int) -> dict:
    """Per phase, the spread of one lane's rates over its runs (a phase missing from any run is left out)."""
    out = {}
    for phase in PHASES:
        rates = [phase_rate(t, n, phase) for t in runs]
        if rates and all(r is not None for r in rates):
            out[phase] = spread(rates)
    return out


# --- reading the measurement --------------------------------------------------------------------------
def settings_of(m: dict, s: dict) -> dict:
    """The settings the run resolved to (newer measurements record them), else the knobs (older recordings)."""
    return m.get("chosen") or {"depth": 4, "batch": int(s["batch"]), "n": int(s["n"]), "tokens": int(s.get("tokens", 0))}


def decode_spread(lane: dict) -> dict | None:
    """A lane's decoding-alone rates over its runs; an older lane's whole-run rates (it has no other)."""
    return lane.get("decode_tokens_per_s_runs") or lane.get("tokens_per_s_runs")


def rate(lane: dict) -> float:
    sp = decode_spread(lane)
    return sp["median"] if sp else lane["summary"]["tokens_per_s"]


def verdict(a: dict | None, b: dict | None, name: str = "plain") -> str:
    """'faster than plain: 1.36× (95% range 1.15–1.60×, 3 rounds)' and the like, by the one rule."""
    v = noise.judge(a, b)
    return v.words(b=name) if v else f"not told apart from {name} (no rounds)"


def always_on_speedup(m: dict, s: dict) -> float | None:
    """Lesson 4's measured answer: always-on's speed over plain decoding's, decoding alone over the whole run, as the
    one rule's ratio over the interleaved rounds (the number its verdict sentence states)."""
    v = noise.judge(decode_spread(m["on"]), decode_spread(m["ar"]))
    return v.ratio if v else None


def _phase_line(m: dict, c: dict) -> str | None:
    ph = m.get("phases")
    if not ph or not all(p in ph.get(k, {}) for k, _ in LANES for p in PHASES):
        return None
    n, k = c["n"], c["depth"]
    full = {key: ph[key]["full"] for key, _ in LANES}
    shrunk = {key: ph[key]["shrunk"] for key, _ in LANES}
    return (
        f"While more than {n} row{'s' if n != 1 else ''} decoded (a verify pass of up to {c['batch'] * (k + 1)} tokens), "
        f"always-on ran {full['on']['median']:.1f} tokens/s against plain's {full['ar']['median']:.1f}: "
        f"{verdict(full['on'], full['ar'])}; the switch, off in that phase, ran "
        f"{full['off']['median']:.1f}: {verdict(full['off'], full['ar'])}. Once {n} or fewer remained, the switch "
        f"speculated and ran {shrunk['off']['median']:.1f} tokens/s against plain's {shrunk['ar']['median']:.1f}: "
        f"{verdict(shrunk['off'], shrunk['ar'])} (always-on {shrunk['on']['median']:.1f})."
    )


def room_line(m: dict) -> str | None:
    curve = m.get("curve")
    if not curve:
        return None
    c = m["chosen"]
    k, b = c["depth"], c["batch"]
    return (
        knee.room_words(c["room"], curve["tokens"], curve["ms"])
        + f" So speculation drafts k = {k} (a one-row verify pass of {k + 1} tokens fits the room), the batch is {b} "
        f"(its verify pass carries {b * (k + 1)} tokens, {knee.cost_at(curve['tokens'], curve['ms'], b * (k + 1)):.2f}× a "
        f"one-token pass, against {knee.cost_at(curve['tokens'], curve['ms'], b):.2f}× for plain decoding's {b}), and the "
        f"switch speculates at {c['n']} row{'s' if c['n'] != 1 else ''} or fewer ({c['n'] * (k + 1)} tokens per pass)."
    )


def conclusion(m: dict, s: dict) -> list[str]:
    """Lesson 4 in words: the room and the settings it chose, each lane's decoding rate against plain's beyond the
    spread, the two phases, and when the switch speculated."""
    c = settings_of(m, s)
    lines = [line for line in (room_line(m),) if line]
    whole = [f"{name} {rate(m[key]):.1f}" for key, name in LANES]
    lines.append(
        f"Decoding alone at batch {c['batch']} over the whole run (tokens/s, median of the runs): " + ", ".join(whole) + ". "
        f"Always-on was {verdict(decode_spread(m['on']), decode_spread(m['ar']))}; the switch "
        f"{verdict(decode_spread(m['off']), decode_spread(m['ar']))}, and "
        f"{verdict(decode_spread(m['off']), decode_spread(m['on']), 'always-on')}."
    )
    phase = _phase_line(m, c)
    if phase:
        lines.append(phase)
    off, n = m["off"], c["n"]
    rows = m.get("steps", {}).get("off") or []
    on_at = sorted({int(b) for b, d, _ in rows if d > 0})
    lines.append(
        f"The switch speculated on {off['speculated_steps']} of {off['decode_steps']} decode steps"
        + (
            f", at a live batch of {', '.join(map(str, on_at))}: it came back on as rows finished and the batch shrank to {n} or fewer."
            if off["speculated_steps"] and on_at
            else ", once the batch had shrunk."
            if off["speculated_steps"]
            else f": more than {n} rows decoded at every step, so it never came back on."
        )
    )
    return lines


# --- the per-step picture ----------------------------------------------------------------------------
def steps_figure(m: dict, label: str = "") -> go.Figure | None:
    """One strip per lane (always-on, the switch): the live batch at each decode step (a line) and the draft depth
    chosen there (bars), with the switch's N dotted. None for an older recording without steps."""
    from app.lessons.figures import COLORS, PLAIN_COLOR, esc, frame

    steps = m.get("steps")
    if not steps:
        return None
    c = m["chosen"]
    lanes = [(key, name) for key, name in LANES[1:] if steps.get(key)]
    fig = make_subplots(rows=len(lanes), cols=1, subplot_titles=[esc(name) for _, name in lanes], vertical_spacing=0.2)
    for i, (key, _name) in enumerate(lanes, start=1):
        rows = steps[key]
        xs = list(range(1, len(rows) + 1))
        fig.add_bar(x=xs, y=[d for _, d, _ in rows], name="draft depth k", marker_color=COLORS[1], showlegend=i == 1, row=i, col=1)
        line = {"color": PLAIN_COLOR, "width": 3}
        batch = [b for b, _, _ in rows]
        fig.add_scatter(x=xs, y=batch, mode="lines", name="rows decoding (live batch)", line=line, showlegend=i == 1, row=i, col=1)
        switch_line = {"dash": "dot", "color": COLORS[0], "width": 2}  # named in the legend: a label on the plot sat on the bars
        edges, name = [xs[0] - 0.5, xs[-1] + 0.5], f"switch: N = {c['n']} (speculates at N rows or fewer)"
        fig.add_scatter(x=edges, y=[c["n"]] * 2, mode="lines", name=name, line=switch_line, showlegend=i == 1, row=i, col=1)
        fig.update_yaxes(title_text="rows / k", rangemode="tozero", row=i, col=1)
    fig.update_xaxes(title_text="decode step", row=len(lanes), col=1)
    return frame(fig, "Step by step: rows still decoding, and the draft depth each step used", label, height=200 + 170 * len(lanes))
