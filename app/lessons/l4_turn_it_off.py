"""Lesson 4, turn it off: a ragged batch decoded plain, always speculating (n-gram lookup) and with a switch that
speculates only once N rows or fewer remain; the claim is that far past the room always-on costs and that the switch's
speculation pays as rows finish. Its run, phases, words, charts (with the live batch per step) and record.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.common import measurement as ms
from app.common.lane_stats import spread
from app.common.measurement import CHOSEN, LANE, NUMBERS, SPREAD, WARMUP
from app.lessons.kit import numbers
from app.lessons.kit.experiment import (
    CURVE_HELP,
    DECODING_ALONE,
    Claim,
    Experiment,
    Knob,
    Prediction,
    lane_jobs,
    leviathan_models,
    leviathan_of,
    pair_numbers,
)
from app.lessons.kit.gpu import verify_passes
from app.lessons.kit.numbers import (
    MAX_STEPS,
    decode_rate,
    decode_ratio,
    decode_steps,
    rate_rounds,
    spread_of,
    tpot_ms,
)
from app.lessons.kit.runs import Job, lane_pair, machine_curve, median_run, timed_rounds
from app.views.bars import COLORS, PLAIN_COLOR, frame, grouped_bars, label_above_whiskers, whiskers
from engine import DecodeConfig
from engine import verdict as rule
from engine.bench.prompts import EXTRACTIVE_PROMPTS

PHASE_NAMES = {"full": "while more than N rows decoded", "shrunk": "once N or fewer remained"}


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


CHOSEN_BATCHES = (4, 8, 16)  # the batches setting 0 chooses from


# beside the long copy, so the batch never shrinks to N and the switch never comes back on
SWITCH_PAST = 8.0  # the full batch's verify pass carries at least this many times the room: far enough past it that


# every guess costs real time even with the n-gram lookup's free drafts (at 4x the room, 16 tokens on the 2-core EPYC,
# a pass cost 1.75x a one-token pass and the lookup's accepted guesses still paid for it)
LANES = (("ar", "plain"), ("on", "always on"), ("off", "switch"))  # measurement key, name in a sentence


PHASES = ("full", "shrunk")


TURN_OFF_ROUNDS = 3  # lesson 4: each run prefills up to 16 prompts: three lanes × (3 rounds + a warm-up) within 20 s


def ragged_prompts(batch: int) -> list[str]:
    if not 1 <= batch <= len(RAGGED_PROMPTS):
        raise ValueError(f"lesson 4 has {len(RAGGED_PROMPTS)} prompts of different lengths; asked for {batch}")
    return list(RAGGED_PROMPTS[:batch])


def choose(room: int, s: dict) -> dict:
    """The lesson's settings from the room (numbers.py), a knob's 0 meaning "from this machine's curve": speculation's
    depth k, the deepest draft a one-row verify pass fits inside the room (at most numbers.MOST_DEPTH); the batch, the
    smallest of CHOSEN_BATCHES whose verify pass carries SWITCH_PAST x the room's tokens (else the largest); the
    switch's N, the most rows whose verify pass still fits the room (at least 1)."""
    depth = int(s.get("depth", 0)) or numbers.inside_depth(room, 1, most=numbers.MOST_DEPTH)
    batch = int(s.get("batch", 0)) or numbers.past_batch(room, depth, CHOSEN_BATCHES, SWITCH_PAST)
    n = int(s.get("n", 0)) or max(1, room // (depth + 1))
    return {"room": int(room), "depth": depth, "batch": batch, "n": n, "tokens": int(s["tokens"])}


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


def phase_spreads(runs: list, n: int) -> dict:
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


# --- 4. turn it off ---------------------------------------------------------------------------------
def turn_it_off(pair, probe, s: dict) -> dict:
    """Plain, always-on (draft model, depth k) and off-above-batch-N decoding of one batch of prompts whose answers
    end at different lengths (`ragged_prompts`), interleaved TURN_OFF_ROUNDS times; k, the batch and N chosen
    from this machine's room where their knobs are 0. Besides the lanes: each lane's decode rate while more than N
    rows decoded and once N or fewer remained, per run, and its median run's steps (live batch, depth, ms)."""
    curve, room = machine_curve(pair)
    c = choose(room, s)
    prompts, tokens, k, drafter = ragged_prompts(c["batch"]), c["tokens"], c["depth"], DRAFTER
    jobs = lane_jobs(prompts, k, drafter, tokens)
    off = DecodeConfig(depth=k, drafter=drafter, max_new_tokens=tokens, policy="off_above_batch", disable_by_batch_size=c["n"])
    runs, warm = timed_rounds(pair, jobs | {"off": Job(prompts, off)}, TURN_OFF_ROUNDS)
    on = lane_pair(runs["ar"], runs["spec"])
    lanes = {"ar": on["ar"], "on": on["spec"], "off": ms.lane_of_runs([r[0] for r in runs["off"]])}
    traces = {"ar": runs["ar"], "on": runs["spec"], "off": runs["off"]}
    steps = {key: step_rows(median_run(runs)[0]) for key, runs in traces.items()}
    phases = {key: phase_spreads([r[0] for r in runs], c["n"]) for key, runs in traces.items()}
    return lanes | {"m": on["m"], "chosen": c, "curve": curve, "warmup": warm, "phases": phases, "steps": steps}


def always_on_speedup(m: dict, s: dict) -> float | None:
    """Lesson 4's measured answer: always-on's speed over plain decoding's, decoding alone (prefill left out), as the
    one rule's ratio over the interleaved rounds (the number its verdict sentence states)."""
    v = numbers.judge(rate_rounds(m["on"]), rate_rounds(m["ar"]))
    return v.ratio if v else None


def _phase(lane: str, phase: str):
    return lambda m: m["phases"][lane][phase]


def _policy_lanes(m: dict, s: dict) -> list[tuple[str, dict]]:
    n = int((m.get("chosen") or s).get("n", 0))
    return [("plain", m["ar"]), ("always on", m["on"]), (f"switch, N = {n}", m["off"])]  # off above batch N


def turn_it_off_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """Decoding-alone tokens/s of each policy over both phases and, where the measurement has them, in each phase
    (more than N rows decoding, N or fewer), every bar with its runs' range."""
    batch = int((m.get("chosen") or s).get("batch", 1))
    lanes = _policy_lanes(m, s)
    phases = m.get("phases") or {}
    keys = ("ar", "on", "off")
    titles = ("both phases together (tokens/s)", "by phase (tokens/s)")
    fig = make_subplots(rows=1, cols=2 if phases else 1, subplot_titles=titles[: 2 if phases else 1])
    colors = [PLAIN_COLOR, COLORS[0], COLORS[1]]
    vals = [decode_rate(ln) for _, ln in lanes]
    names = [name for name, _ in lanes]
    fig.add_bar(x=names, y=[v for v, _, _ in vals], marker_color=colors, error_y=whiskers(vals), showlegend=False, row=1, col=1)
    label_above_whiskers(fig, names, vals, [f"{v:.0f}" for v, _, _ in vals], row=1, col=1)
    if phases:
        series = [
            {"name": name, "values": [spread_of(phases.get(key, {}), p) for p in PHASE_NAMES], "color": color}
            for (name, _), key, color in zip(lanes, keys, colors)
        ]
        grouped_bars(fig, list(PHASE_NAMES.values()), series, row=1, col=2)
    return frame(fig, f"Batch {batch}, rows ending at different lengths: each policy's decoding speed", label, height=420)


def _times(r: tuple[float, float | None, float | None]) -> str:
    """'0.92× (0.88–0.98×)': a ratio and its 95% range, as the verdict sentences state them."""
    v, lo, hi = r
    return f"{v:.2f}×" + (f" ({rule.span(lo, hi)})" if lo is not None else "")


def turn_it_off_table(m: dict, s: dict) -> list[dict]:
    """Per policy: decoding-alone tokens/s (median, runs' range, × plain), each phase's decoding rate, time per output
    token, and the decode steps that speculated (decoding alone: the rounds read the prompt's pass warm)."""
    base = decode_rate(m["ar"])[0]
    phases = m.get("phases") or {}
    out = []
    for (name, ln), key in zip(_policy_lanes(m, s), ("ar", "on", "off")):
        v, lo, hi = decode_rate(ln)
        t = tpot_ms(ln)
        row = {
            "policy": name,
            "decoding tokens/s": round(v, 1),
            "range (runs)": f"{lo:.0f}–{hi:.0f}" if lo is not None else "one run",
            "× plain (95% range)": _times(decode_ratio(ln, m["ar"])) if base else None,
            "× always on (95% range)": _times(decode_ratio(ln, m["on"])) if key == "off" else "",
        }
        for phase, title in PHASE_NAMES.items():
            sp = phases.get(key, {}).get(phase)
            if phases:
                row[f"{title} (tokens/s)"] = round(sp["median"], 1) if sp else None
        row["time per output token (ms)"] = round(t, 1) if t else None
        row["speculated steps"] = f"{ln.get('speculated_steps', 0)} of {ln.get('decode_steps', 0)}"
        out.append(row)
    return out


# --- the per-step picture ----------------------------------------------------------------------------
def steps_figure(m: dict, label: str = "") -> go.Figure | None:
    """One strip per lane (always-on, the switch): the live batch at each decode step (a line) and the draft depth
    chosen there (bars), with the switch's N dotted. None for an older recording without steps."""
    from app.views.bars import COLORS, PLAIN_COLOR, esc, frame

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


def notes(m: dict, s: dict) -> list[str]:
    """When the switch speculated: its speculated steps (the table's column) and the live batch at those steps."""
    off, n = m["off"], settings_of(m, s)["n"]
    on_at = sorted({int(b) for b, d, _ in (m.get("steps") or {}).get("off") or [] if d > 0})
    if not off["speculated_steps"]:
        return [f"The switch speculated on 0 of {off['decode_steps']} decode steps: more than {n} rows decoded at every step."]
    at = f", at a live batch of {', '.join(map(str, on_at))}" if on_at else ""
    return [
        f"The switch speculated on {off['speculated_steps']} of {off['decode_steps']} decode steps{at}: it came back on as rows finished."
    ]


CAPTION = DECODING_ALONE + (
    " Time per output token is what one request waits per token: this engine runs a batch "
    "until its slowest row ends (rows are not refilled), so a policy can raise the batch's tokens/s and still "
    "lengthen each request's wait; a server with continuous batching refills finished rows."
)


RECORD = Experiment(
    turn_it_off,
    (
        Knob(
            "l4_batch",
            "Batch size",
            (0, *SWITCH_BATCHES),
            0,
            CURVE_HELP + ": the smallest of 4, 8 and 16 whose verify pass carries 8× the room, else 16",
        ),
        Knob("l4_n", "Off above batch N", (0, 1, 2, 4, 8), 0, CURVE_HELP + ": the most rows whose verify pass fits the room"),
        Knob("l4_depth", "Speculation depth k", (0, 1, 2, 3, 4), 0, CURVE_HELP + ": the deepest one-row draft inside the room"),
        Knob("l4_tokens", "New tokens per sequence (the longest answer)", (32, 48, 64), 48),
    ),
    Prediction(
        "The speedup of always-on speculation (n-gram lookup) over plain decoding, decoding alone (the prompt's pass left "
        "out), over both phases: the batch starts full (chosen from this machine's room) and shrinks as rows finish?",
        "e.g. 1.2",
        always_on_speedup,
        lambda m, s: leviathan_models(m["m"]),
    ),
    leviathan=lambda m, s: leviathan_of(m["m"], {"ar": m["ar"], "spec": m["on"]}),
    notes=notes,
    table=turn_it_off_table,
    figures=lambda m, s, label: [turn_it_off_figure(m, s, label), steps_figure(m, label)],
    caption=CAPTION,
    numbers=lambda m, s: pair_numbers([("always-on", m["m"], {"ar": m["ar"], "spec": m["on"]})]),
    gpu_passes=lambda s: verify_passes(s, [int(s.get("batch", 1) or 1)]),
    contest=lambda m, s: ("always-on speculation", "plain decoding", rate_rounds(m["on"]), rate_rounds(m["ar"])),
    plain=lambda m: (int((m.get("chosen") or {}).get("batch", 1)), m["ar"]),
    name="turn_it_off",
    schema={
        "ar": LANE,
        "on": LANE,
        "off": LANE,
        "m": NUMBERS,
        **CHOSEN,
        **WARMUP,
        # lesson 4 (this record): each lane's decode rate per phase over its runs, its median run's steps
        "phases?": {"*": {"full?": SPREAD, "shrunk?": SPREAD}},
        "steps?": {"*": [["num"]]},
    },
    claims=(
        Claim(
            "Far past the room, always-on lookup costs where rows have little to copy",
            "always-on",
            "plain decoding",
            "while the batch is full (more than N rows)",
            lambda m: (_phase("on", "full")(m), _phase("ar", "full")(m)),
            -1,
            lead=True,
        ),
        Claim(
            "As rows finish, the switch's speculation pays",
            "the switch",
            "plain decoding",
            "N rows or fewer",
            lambda m: (_phase("off", "shrunk")(m), _phase("ar", "shrunk")(m)),
            1,
            lead=True,
        ),
    ),
)
