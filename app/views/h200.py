"""Your steps on an H200: SpecLab's recorded H200 pass curves (measured, labelled with machine and date; their knee by
the one definition, engine/room.py), and any decode run's lanes re-timed with them: each decode step's passes priced at
the H200's recorded cost of that many tokens, drafting too (engine/roofline/draft_prices.py), or the bar drawn as a
ceiling where drafting is not priced, beside the rate this machine measured. Labelled as re-timed, never as run on a
GPU. The Lessons' GPU panel and the Playground draw it. No streamlit.
"""

from __future__ import annotations

import functools
import statistics
import textwrap
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.common.drafters import label as drafter_label
from app.views.bars import COLORS, TICK_CHARS, chunks, dress, esc, fit_foot, frame, grouped_bars, labelled, log_axis
from engine import verdict as rule
from engine.drafters import DRAFTERS
from engine.roofline import draft_prices as drafting
from engine.roofline.recordings import BUILT_IN, ROOT, PassRecord, RecordingError, load_report
from engine.roofline.retime import PassPrices, retime
from engine.room import KNEE
from engine.room import knee_tokens as curve_knee


# --- 1. recorded GPU pass curves ----------------------------------------------------------------
@dataclass(frozen=True)
class Curve:
    source: str
    device: str
    date: str
    dtype: str
    shape: str
    mode: str  # "graph" or "eager"
    context: int
    tokens: tuple[int, ...]  # tokens per pass, sorted
    ms: tuple[float, ...]  # median ms over the (batch, new_tokens) pairs with that many tokens
    batches: tuple[str, ...]  # the pairs behind each point, for hover ("8×16")

    @property
    def label(self) -> str:
        return f"{self.device}, {self.dtype}, {self.date}, random weights in real shapes ({self.source})"

    @property
    def name(self) -> str:
        how = "CUDA graph" if self.mode == "graph" else "eager"
        return f"{self.shape} shape, {how}, " + (f"context {self.context}" if self.context else "zero context (no KV cache)")


def curves_of(records: list[PassRecord]) -> list[Curve]:
    """One curve per (file, shape, mode, context): the median time at each tokens-per-pass count."""
    groups: dict[tuple, list[PassRecord]] = {}
    for r in records:
        groups.setdefault((r.source, r.shape, r.mode, r.context), []).append(r)
    out = []
    for (source, shape, mode, context), group in groups.items():
        by_tokens: dict[int, list[PassRecord]] = {}
        for r in group:
            by_tokens.setdefault(r.tokens_per_pass, []).append(r)
        tokens = tuple(sorted(by_tokens))
        first = group[0]
        out.append(
            Curve(
                source,
                first.device,
                first.date,
                first.dtype,
                shape,
                mode,
                context,
                tokens,
                tuple(statistics.median([r.ms for r in by_tokens[t]]) for t in tokens),
                tuple(", ".join(f"{r.batch}×{r.new_tokens}" for r in by_tokens[t]) for t in tokens),
            )
        )
    return out


def recorded_curves(paths: list[Path] | None = None) -> tuple[list[Curve], list[str]]:
    """The shipped H200 curves, and one line per file that could not be used (missing or malformed)."""
    curves, problems = [], []
    for path in paths if paths is not None else [ROOT / p for p in BUILT_IN]:
        try:
            curves += curves_of(load_report(Path(path)))
        except RecordingError as exc:
            problems.append(str(exc))
    return curves, problems


KNEE_FACTOR = KNEE  # the one knee (engine/room.py): a pass costing 1.5× the one-token pass


KNEE_SHAPE, KNEE_MODE = "qwen2.5-7b", "graph"  # the curve whose knee the panel and the lesson texts quote


def knee_tokens(curve: Curve, factor: float = KNEE_FACTOR) -> float | None:
    """The knee of a recorded curve by the one definition (engine/room.py `knee_tokens`); None past it."""
    return curve_knee(curve.tokens, curve.ms, factor)


def knee_curve(curves: list[Curve]) -> Curve | None:
    """The recorded curve the panel quotes a knee for (Qwen2.5-7B shape, CUDA graph, zero context)."""
    return next((c for c in curves if c.shape == KNEE_SHAPE and c.mode == KNEE_MODE), None)


def knee_sentence(curves: list[Curve]) -> str:
    """The knee of the quoted H200 curve in words, with the numbers it comes from."""
    c = knee_curve(curves)
    knee = knee_tokens(c) if c else None
    if knee is None:
        return ""
    return (
        f"On the H200 (Qwen2.5-7B shape, CUDA graph, zero context, {c.date}) a one-token pass took {c.ms[0]:.2f} ms; the "
        f"curve reaches {KNEE_FACTOR:g}× that ({KNEE_FACTOR * c.ms[0]:.2f} ms) at about {knee:.0f} tokens per pass, its "
        "knee: below it, a pass of many tokens costs little more than a pass of one."
    )


LABEL = "re-timed from H200 recordings, not run on a GPU"


SHAPE, MODE = "qwen2.5-7b", "graph"


NAMES = {
    "ar": "plain",
    "spec": "speculative",
    "on": "always on",
    "off": "off above the batch limit",
    "fixed": "all drafts",
    "gated": "gated",
}
NAMES |= {kind: d.display for kind, d in DRAFTERS.items()}  # a drafter's lanes, by its registered name


SKIP = {"runs", "batches", "rows", "measurement", "m", "seed"}
CPU_COLOR, GPU_COLOR = COLORS[1], COLORS[0]


CAPTION = (
    "The same decode steps, the same tokens per pass and the same accepted tokens per step, each priced at the time "
    "the H200 took for one pass of that many tokens (a straight line between the recorded sizes, never beyond them). "
    "Acceptance is this run's; the recording's random weights only set the time. It read no KV cache, and the "
    "recorded passes kept logits for the last position only, so a long context or a wide verify pass would cost a "
    "little more there."
)
RULE_RATIO = "This machine's × plain is the verdict rule's ratio over the rounds (not the medians' quotient)."


@functools.cache
def h200_prices(shape: str = SHAPE, mode: str = MODE) -> PassPrices | None:
    """The recorded H200 curve of `shape` in `mode` as pass prices, None where it is not shipped."""
    c = next((c for c in recorded_curves()[0] if c.shape == shape and c.mode == mode), None)
    if c is None:
        return None
    how = "CUDA graph" if mode == "graph" else "eager"
    context = f"context {c.context}" if c.context else "no KV context (zero-context passes)"
    return PassPrices(c.tokens, c.ms, f"{c.device}, {c.date}: {c.shape} shape, random weights, {how}, {context} ({c.source})")


def machine_line(shape: str = SHAPE, mode: str = MODE) -> str:
    """The recording behind the re-timing: machine, date, shape, mode, context, file."""
    prices = h200_prices(shape, mode)
    return f"{LABEL}: {prices.label}" if prices else f"{LABEL}: no recorded H200 curve for {shape} ({mode})"


def is_lane(obj) -> bool:
    """A lane or table cell with pass shapes: `passes` as [tokens_per_pass, depth, steps] triples and `decode_tokens`
    (Barrow's seed passes, a list of pass dicts, are not one)."""
    passes = obj.get("passes") if isinstance(obj, dict) else None
    return (
        isinstance(passes, list)
        and isinstance(obj.get("decode_tokens"), (int, float))
        and all(isinstance(p, (list, tuple)) and len(p) == 3 and all(isinstance(x, (int, float)) for x in p) for p in passes)
    )


def _speculative(passes) -> bool:
    return any(int(d) > 0 and int(n) > 0 for _, d, n in passes)


# How a re-timed rate priced its steps' drafting: every re-timed number carries one of these.
PLAIN, MEASURED, MODEL, CEILING = "none to price", "measured", "model", "drafting not priced"


DRAFTING = {
    PLAIN: "none (plain steps)",
    MEASURED: "measured on the H200 machine",
    MODEL: "model (predictor, the drafter's own shape)",
    CEILING: "drafting not priced: a ceiling",
}


@dataclass(frozen=True)
class Priced:
    """A lane's steps re-timed on the H200: the rate (None where it could not be), a note saying how or why not,
    how its drafting was priced (PLAIN, MEASURED, MODEL or CEILING) and the time it adds up to."""

    rate: float | None
    note: str
    drafting: str = PLAIN
    target_ms: float = 0.0
    draft_ms: float = 0.0
    tokens: int = 0


def h200_lane(lane: dict, drafter: str | None = None, shape: str = SHAPE, mode: str = MODE) -> Priced:
    """The lane's decode steps re-timed on the recorded H200 passes, their drafting priced (engine/roofline/draft_prices.py)."""
    if not is_lane(lane):
        return Priced(None, "not re-timed: this run carries no per-step pass shapes")
    passes, tokens = lane["passes"], lane["decode_tokens"]
    prices = h200_prices(shape, mode)
    if prices is None:
        return Priced(None, f"not re-timed: no recorded H200 curve for {shape} ({mode})")
    speculative = _speculative(passes)
    drafter = drafter if drafter is not None else str(lane.get("drafter") or "")
    draft = drafting.prices(drafter, drafter_label(drafter)) if speculative else None
    try:
        r = retime(passes, int(tokens), prices, draft)
    except ValueError as exc:
        return Priced(None, f"not re-timed: {exc}")
    if r.outside:
        return Priced(
            None,
            f"not re-timed: {r.outside} of {r.steps} steps carried up to {r.largest} tokens per pass, outside the recorded "
            f"{prices.tokens[0]}–{prices.tokens[-1]} (never extrapolated)",
        )
    if r.tokens_per_s is None:
        return Priced(None, "not re-timed: no decode steps")
    if not speculative:
        kind, how = PLAIN, "no drafting (plain steps)"
    elif draft is not None:
        kind = MEASURED if draft.measured else MODEL
        how = f"drafting {r.draft_ms / max(1, r.drafted_steps):.2f} ms per drafting step, {draft.label}"
    else:
        kind = CEILING
        how = (
            f"{CEILING}: the {drafter_label(drafter)} has no H200 price (neither timed there nor a shape the predictor "
            "can read), so this counts the target's passes alone, a ceiling on the rate"
        )
    note = f"{r.steps} decode steps at {r.target_ms / r.steps:.2f} ms per target pass on average; {how}"
    return Priced(r.tokens_per_s, note, kind, r.target_ms, r.draft_ms, int(tokens))


def bar_text(value: float | None, kind: str, unit: str = "×") -> str:
    """A re-timed bar's own label: the value, and where drafting is not priced, that it is a ceiling."""
    if not value:
        return ""
    number = f"{value:.2f}{unit}" if unit == "×" else f"{value:,.0f}"
    return f"≤{number} ({CEILING}: a ceiling)" if kind == CEILING else number


def cpu_rate(lane: dict) -> float | None:
    """This machine's decode tokens/s for the lane: its rounds' median (as the lesson's table), else its run's; or None."""
    runs, rate = lane.get("decode_tokens_per_s_runs"), lane.get("decode_tokens_per_s")
    rate = runs.get("median") if isinstance(runs, dict) and runs.get("median") else rate
    if isinstance(rate, (int, float)) and rate > 0:
        return float(rate)
    tokens, seconds = lane.get("decode_tokens"), lane.get("decode_s")
    if isinstance(tokens, (int, float)) and isinstance(seconds, (int, float)) and seconds > 0:
        return tokens / seconds
    return None


def here_speedup(lane: dict, base: dict) -> float:
    """This machine's decoding-alone speedup of `lane` over `base`: the one rule's ratio (as the lesson shows it)."""
    a, b = lane.get("decode_tokens_per_s_runs"), base.get("decode_tokens_per_s_runs")
    if isinstance(a, dict) and isinstance(b, dict) and a.get("values") and b.get("values"):
        return rule.judge(a, b).ratio
    return cpu_rate(lane) / cpu_rate(base)


# --- every lane of a lesson's measurement -----------------------------------------------------------------
def lanes_of(m) -> list[dict]:
    """Every lane or table cell in a measurement that carries pass shapes: {name, batch, lane, plain, group, drafter},
    in order. A cell without its own `drafter` (lessons 6 and 7's rows) drafts with the measurement's."""
    out: list[dict] = []

    def walk(obj, names: list[str], batch, drafter: str):
        if isinstance(obj, list):
            for item in obj:
                walk(item, names, batch, drafter)
            return
        if not isinstance(obj, dict):
            return
        if isinstance(obj.get("batch"), int):
            batch = obj["batch"]
        if isinstance(obj.get("drafter"), str) and (obj["drafter"] or not is_lane(obj)):
            drafter = obj["drafter"]
        if is_lane(obj):
            name = str(obj.get("contender") or " · ".join(names) or "run")
            plain = not _speculative(obj["passes"]) and "plain" in name
            out.append({"name": name, "batch": batch, "lane": obj, "plain": plain, "group": tuple(names[:-1]), "drafter": drafter})
            return
        for key, value in obj.items():
            if isinstance(value, (dict, list)):
                walk(value, names + ([] if key in SKIP else [NAMES.get(key, key)]), batch, drafter)

    walk(m, [], None, "")
    return out


def base_of(entry: dict, entries: list[dict]) -> dict | None:
    """The plain lane at the entry's batch (and in its group): what its speedup is over."""
    same = [e for e in entries if e["plain"] and e["batch"] == entry["batch"]]
    return next((e for e in same if e["group"] == entry["group"]), same[0] if same else None)


def rows(m) -> list[dict]:
    """One table row per lane: this machine's decode tokens/s and speedup, and the same steps re-timed on the H200
    with how their drafting was priced."""
    entries = lanes_of(m)
    out = []
    for e in entries:
        base = base_of(e, entries)
        cpu, h200 = cpu_rate(e["lane"]), h200_lane(e["lane"], e["drafter"])
        cpu_base = cpu_rate(base["lane"]) if base else None
        base_rate = h200_lane(base["lane"]).rate if base else None
        gpu_speed = h200.rate / base_rate if h200.rate and base_rate else None
        out.append(
            {
                "run": (f"batch {e['batch']}: " if e["batch"] is not None else "") + e["name"],
                "this machine, decode tokens/s (measured)": round(cpu) if cpu else None,  # as the lessons' bars label it
                "× plain here": round(here_speedup(e["lane"], base["lane"]), 2) if cpu and cpu_base else None,
                f"H200, decode tokens/s ({LABEL})": round(h200.rate, 0) if h200.rate else None,
                "× plain on the H200 (re-timed)": round(gpu_speed, 2) if gpu_speed else None,
                "drafting on the H200": DRAFTING[h200.drafting] if h200.rate else None,
                "how it was re-timed": h200.note,
            }
        )
    return out


def _kinds(row: dict) -> str:
    return next((k for k, v in DRAFTING.items() if v == row["drafting on the H200"]), PLAIN)


def priced_name(table: list[dict]) -> str:
    """The legend of the re-timed bars whose drafting is in the time: how it was priced, for the drafters shown."""
    kinds = [k for k in (MEASURED, MODEL) if any(_kinds(r) == k for r in table)]
    how = {MEASURED: "n-gram lookup measured on the H200 machine", MODEL: "draft model / EAGLE head: model"}
    return f"{LABEL}; drafting priced" + (f" ({'; '.join(how[k] for k in kinds)})" if kinds else "")


SPEED_KEYS = ("× plain here", "× plain on the H200 (re-timed)")


RATE_KEYS = ("this machine, decode tokens/s (measured)", f"H200, decode tokens/s ({LABEL})")


def _series(table: list[dict]) -> list[dict]:
    """This machine's bars, the re-timed bars whose drafting is priced, and the re-timed ceilings (cross-hatched): each
    with its name, colour and hatch; only those with a bar."""
    ceiling = f"{LABEL}; {CEILING}: a ceiling (the target's passes alone)"
    out = [
        {"name": "this machine (measured)", "color": CPU_COLOR, "hatch": "", "h200": False},
        {"name": priced_name(table), "color": GPU_COLOR, "hatch": "/", "h200": True, "ceiling": False},
        {"name": ceiling, "color": GPU_COLOR, "hatch": "x", "h200": True, "ceiling": True},
    ]
    return [sr for sr in out if any(_draws(sr, r) and r[SPEED_KEYS[sr["h200"]]] is not None for r in table)]


def _draws(sr: dict, row: dict) -> bool:
    """Whether a series has the row's bar: this machine has every row's, the re-timed priced or ceiling ones theirs."""
    return not sr["h200"] or (_kinds(row) == CEILING) == sr["ceiling"]


def _panel(fig: go.Figure, table: list[dict], series: list[dict], keys: tuple[str, str], unit: str, row: int) -> list[float]:
    """One panel of grouped bars (app/views/bars.py grouped_bars): each bar's value over it where every bar has
    room (a ceiling's says so), its hover how its drafting was priced. Returns the values drawn."""
    drawn, grouped, dressed = [], [], []
    for i, sr in enumerate(series):
        vals = [r[keys[sr["h200"]]] if _draws(sr, r) else None for r in table]
        sr = sr | {"kinds": [_kinds(r) if sr["h200"] else PLAIN for r in table]}
        drawn += [v for v in vals if v]
        full = [bar_text(v, k, unit) for v, k in zip(vals, sr["kinds"])]
        short = [t.replace(f" ({CEILING}: a ceiling)", "<br>ceiling") for t in full]  # over a bar: "≤1.30×", "ceiling"
        how = [f"; drafting: {DRAFTING[k]}" if sr["h200"] else "" for k in sr["kinds"]]
        hover = [f"{esc(r['run'])}: {esc(t)} ({esc(sr['name'])}{h})" for r, t, h in zip(table, full, how)]
        bar = {"name": sr["name"], "color": sr["color"], "legendgroup": str(i), "showlegend": row == 1, "hovertext": hover}
        bar |= {"values": [(v, None, None) if v else None for v in vals]}
        grouped.append(bar | ({"text": short} if labelled(len(table), len(series)) else {}))
        # each re-timed bar carries how its drafting was priced, and a ceiling's own text says that it is one
        dressed.append(sr | {"full": full, "customdata": [DRAFTING[k] for k in sr["kinds"]] if sr["h200"] else None})
    first = len(fig.data)
    grouped_bars(fig, [r["run"] for r in table], grouped, rule=1.0 if unit == "×" else None, row=row, col=1)
    dress([t for t in fig.data[first:] if t.type == "bar"], dressed)
    return drawn


def figure(m, label: str = "") -> go.Figure | None:
    """Speedup over plain decoding per lane, and under it decode tokens/s on a log axis: measured on this machine beside
    the same steps re-timed on the H200; the re-timed bars whose drafting could not be priced drawn apart
    (cross-hatched) and labelled as a ceiling. Many lanes are cut into panels a narrow chart can label
    (`_panel`). None where no lane carries pass shapes."""
    table = [r for r in rows(m) if r[SPEED_KEYS[0]] is not None or r[SPEED_KEYS[1]] is not None]
    if not table:
        return None
    parts, series = chunks(table), _series(table)
    n, height = len(parts), 180 + 240 * 2 * len(parts)
    titles = ["speedup over plain at the same batch, round by round (dotted: 1×)"] + [""] * (n - 1)
    titles += ["decode tokens/s (log scale)"] + [""] * (n - 1)
    fig = make_subplots(rows=2 * n, cols=1, subplot_titles=titles, vertical_spacing=90 / (height - 95))
    speeds, rates = [1.0], []
    for i, part in enumerate(parts):
        speeds += _panel(fig, part, series, SPEED_KEYS, "×", i + 1)
        rates += _panel(fig, part, series, RATE_KEYS, "", n + i + 1)
        fig.add_hline(y=1.0, line_dash="dot", line_color="#333", layer="below", row=i + 1, col=1)
    for i in range(n):
        fig.update_yaxes(range=[0, 1.32 * max(speeds)], title_text="× plain", row=i + 1, col=1)
        fig.update_yaxes(title_text="tokens/s", row=n + i + 1, col=1, **(log_axis(rates) if rates else {}))
    where = (f"this machine: {label}; " if label else "") + f"the H200: {machine_line()}"
    frame(fig, "Your run on both sides of a knee: this machine, and the same steps on an H200", where, height=height)
    return fit_foot(fig, max(len(textwrap.wrap(esc(r["run"]), TICK_CHARS)) for r in parts[-1]))


def drafting_lines(m) -> list[str]:
    """How the re-timed bars priced drafting, one line per way used (the figure's caption)."""
    lines = {}
    for e in lanes_of(m):
        p = h200_lane(e["lane"], e["drafter"])
        if p.rate and p.drafting != PLAIN:
            lines.setdefault(e["drafter"], (p.drafting, drafting.prices(e["drafter"], drafter_label(e["drafter"]))))
    out = []
    for drafter, (kind, prices) in lines.items():
        if kind == CEILING:
            out.append(f"The {drafter_label(drafter)}'s drafting is not priced: its bars count the target's passes alone, a ceiling.")
        else:
            out.append(f"Drafting with the {drafter_label(drafter)}: {prices.label}.")
    return out


def why_not(m, label: str = "", recorded: bool | None = None) -> str:
    """Why a result has no re-timed view, exactly: a recording made before its experiment kept per-step pass shapes
    (only a recording can be that: `recorded`, else a label saying "recorded on"), or why no lane could be priced."""
    entries = lanes_of(m)
    if entries:
        notes = dict.fromkeys(h200_lane(e["lane"], e["drafter"]).note for e in entries)
        return "None of this run's steps can be re-timed on the H200: " + "; ".join(notes) + "."
    if recorded if recorded is not None else "recorded on" in label:
        return (
            "This recording carries no per-step pass shapes: it was recorded before this experiment kept them, so it "
            "cannot be re-timed. Run the experiment live to see your own steps priced on the H200 (a live run keeps "
            "them), or re-record it."
        )
    return "This run carries no per-step pass shapes, so it cannot be re-timed on the H200."
