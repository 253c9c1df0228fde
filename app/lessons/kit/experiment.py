"""What every lesson's record is made of: its settings (Knob), the prediction a student makes first (Prediction),
its claims as data (Claim, checked by the one verdict rule, engine/verdict.py) and the record itself
(Experiment: run, settings, prediction, claims, notes, table, schema, charts, worksheet numbers, GPU view),
plus the lanes most lessons run (plain and speculative decoding of the same prompts, interleaved). Each lesson
declares one `RECORD` in app/lessons/lNN_<name>.py; app/lessons/registry.py finds them. No streamlit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from app.common import measurement as ms
from app.lessons.kit import numbers
from app.lessons.kit.numbers import cell, rate_rounds
from app.lessons.kit.runs import Job, interleaved, lane_pair
from app.views import metrics
from engine import DecodeConfig, verdict
from engine.drafters import drafter_name


@dataclass(frozen=True)
class Knob:
    """One setting of a lesson, drawn as a select slider bound to the URL query parameter `key`."""

    key: str
    label: str
    options: tuple
    default: float | int
    help: str = ""


@dataclass(frozen=True)
class Prediction:
    """The number a student commits to before the run, and what it is set against afterwards."""

    question: str  # may use {settings} fields, e.g. "speedup at batch {batch}"
    placeholder: str
    measured: Callable[[dict, dict], float | None]  # (measurement, settings) -> the measured number
    models: Callable[[dict, dict], list[tuple[str, float | None]]]  # -> [(model name, its number)]
    unit: str = "×"
    whole: bool = False  # a count (lesson 0's accepted drafts): the student enters a whole number


@dataclass(frozen=True)
class Claim:
    """One claim of a lesson, as data: contender `a` against `b` at `where`, which way the one rule (app/common/
    verdict.py) must find it (`expect`: +1 a faster, -1 a slower, 0 a not slower; with `costs`, rounds of times:
    +1 a costs more, -1 less, 0 not more), and where their rounds are in a measurement (`rounds`: m -> (a's
    rounds, b's rounds)). The page shows every claim checked on the run it shows; the claim tests apply the rule
    to the shipped recordings, both ways."""

    text: str
    a: str
    b: str
    where: str
    rounds: Callable[[dict], tuple[dict | None, dict | None]]
    expect: int
    lead: bool = False  # the lesson's lead claim: a shipped recording must show it
    costs: bool = False  # the rounds are times (ms), and `expect` speaks of costing more
    metric: str = "tokens/s, decoding alone"
    applies: Callable[[dict], str | None] = field(default=lambda m: None)  # m -> why the claim is not tested here, or None
    times: float = 1.0  # the claim is about a against `times` × b (lesson 1: a pass against 1.25× a one-token pass)


def check_claim(claim: Claim, m: dict) -> dict:
    """A claim on one measurement: {"claim", "verdict" (None without rounds on both sides), "holds", "skipped" (why
    the claim is not tested on this run: e.g. this machine has no room for it; None where it is)}."""
    skipped = claim.applies(m)
    if skipped:
        return {"claim": claim, "verdict": None, "decided": None, "holds": False, "skipped": skipped}
    try:
        a, b = claim.rounds(m)
    except (KeyError, IndexError, TypeError, StopIteration):  # an older measurement without these contenders
        a = b = None
    v = decided = None
    if a and b and a.get("values") and b.get("values"):
        v = verdict.judge(a["values"], b["values"])  # a ÷ b: rates, or times where the claim is about costs
        decided = v if claim.times == 1 else verdict.judge(a["values"], [claim.times * x for x in b["values"]])
    # expect 0: "not slower" on rates, "costs no more" on times: the rule's non-inferiority margin (verdict.not_worse)
    holds = decided is not None and (decided.sign == claim.expect if claim.expect else verdict.not_worse(_rate_view(decided, claim.costs)))
    return {"claim": claim, "verdict": v, "decided": decided, "holds": holds, "skipped": None}


EXPECT_WORDS = {1: "faster", -1: "slower", 0: "not slower"}


COST_WORDS = {1: "costs more", -1: "costs less", 0: "costs no more"}


COST_KIND = {"faster": "costs more", "slower": "costs less"}  # the rule on times: a "faster" ratio is a dearer pass


def _rate_view(v, costs: bool):
    """A verdict on times read as one on rates (a dearer pass is a slower one), for verdict.not_worse."""
    if not costs:
        return v
    flip = {"faster": "slower", "slower": "faster"}.get(v.kind, v.kind)
    return replace(v, ratio=1 / v.ratio, lo=1 / v.hi if v.hi else None, hi=1 / v.lo if v.lo else None, sign=-v.sign, kind=flip)


def _shown(c: Claim, r: dict) -> str:
    """'yes', 'no', 'not shown: can't tell …' or 'not tested here'. A claim of 'not slower' (or 'costs no more') that
    holds only by the margin says so: the range rules out more than NOT_WORSE worse, and no more than that."""
    if r["skipped"]:
        return "not tested here"
    d = r["decided"]
    if r["holds"]:
        worse = "dearer" if c.costs else "slower"
        return f"yes, weakly: at most {verdict.NOT_WORSE:.0%} {worse}" if c.expect == 0 and d.kind == "can't tell" else "yes"
    if d is not None and d.kind == "can't tell":
        return f"not shown: can't tell with {d.rounds} round{'s' if d.rounds != 1 else ''}"
    return "no"


def _rule_says(c: Claim, r: dict) -> str:
    d = r["decided"]
    if d is None:
        return "not tested" if r["skipped"] else "can't tell"
    return (COST_KIND.get(d.kind, d.kind) if c.costs else d.kind) + (f" than {c.times:g}×" if c.times != 1 else "")


def claim_rows(claims, m: dict) -> list[dict]:
    """The claims checked on a measurement, one table row each, every number from the rule's verdict."""
    rows = []
    for c in claims:
        r = check_claim(c, m)
        v = r["verdict"]
        than = f"{c.times:g}× {c.b}" if c.times != 1 else c.b
        measured = ((f"{c.a} ÷ {c.b}: " if c.times != 1 else "") + v.interval) if v else r["skipped"] or "no rounds"
        rows.append(
            {  # the result first, beside the claim: a narrow screen scrolls to the details, never to the answer
                "claim": c.text,
                "shown?": _shown(c, r),
                "measured (95% range)": measured,
                "the rule says": _rule_says(c, r),
                "where": c.where,
                "expected": f"{c.a} {(COST_WORDS if c.costs else EXPECT_WORDS)[c.expect]} than {than}",
            }
        )
    return rows


@dataclass(frozen=True)
class Walkthrough:
    """A lesson whose body is one recorded trace stepped through (lesson 0): its own recording and live run, its
    drawing (shown before a prediction too, up to the stages that would give the answer away), and what a class
    session says of it (a class shares the recorded trace)."""

    recorded: Callable[[], tuple[dict | None, str | None, object]]  # () -> (record, why not, trace)
    live: Callable[[object], tuple[dict, object]]  # pair -> (measurement, its trace)
    draw: Callable[[dict | None, object, bool], None]  # (result or None, trace, locked until a prediction)
    class_note: str


@dataclass(frozen=True)
class Experiment:
    run: Callable[[object, object, dict], dict]  # (pair, probe, settings) -> measurement (plain numbers)
    knobs: tuple[Knob, ...]
    predict: Prediction
    needs: tuple[str, ...] = ()  # drafter kinds, any one of which the pair must offer
    leviathan: Callable[[dict, dict], dict | None] = field(default=lambda m, s: None)  # -> {alpha, k, c} for worksheets
    claims: tuple[Claim, ...] = ()  # what the lesson claims, checked on every run it shows
    notes: Callable[[dict, dict], list[str]] = field(default=lambda m, s: [])  # (measurement, settings) -> the why, short
    table: Callable[[dict, dict], list[dict]] = field(default=lambda m, s: [])  # the table under its chart, the same numbers
    name: str = ""  # lessons/NN-*.md's `experiment:`, and its recording assets/lessons/<name>.json
    schema: dict = field(default_factory=dict)  # its measurement's fields, in app/common/measurement.py's spec language
    figures: Callable[[dict, dict, str], list] = field(default=lambda m, s, label: [])  # (m, s, label) -> its charts
    caption: str = ""  # under its table: what the columns mean
    extra: Callable[[dict, dict, str], None] | None = None  # (m, s, label): one more block drawn under the result
    numbers: Callable[[dict, dict], list[tuple[str, str]]] = field(default=lambda m, s: [])  # the worksheet's key numbers
    gpu_passes: Callable[[dict], list[tuple[str, int, int]]] | None = None  # settings -> (what, batch, tokens per row)
    contest: Callable[[dict, dict], tuple | None] = field(default=lambda m, s: None)  # (a, b, a's rounds, b's rounds)
    plain: Callable[[dict], tuple[int, dict] | None] = field(default=lambda m: None)  # (batch, plain lane at the smallest)
    one_pass: Callable[[dict], tuple[str, float] | None] | None = None  # a lesson of passes: (what, ms) of its 1-token pass
    read: Callable[[dict], int | None] = field(default=lambda m: None)  # a lesson of passes: the pass its answer reads
    acceptance: bool = True  # its claims depend on acceptance: the GPU panel cites published results
    retimed: Callable[[dict, str, str], None] | None = None  # (measurement, label, key): its own GPU re-timing, drawn
    gpu_lines: Callable[[dict], list[str]] = field(default=lambda m: [])  # what its run trades on the H200, in words
    more: tuple[str, Callable[[], None]] | None = None  # (title, draw): one more section (lesson 7: a recorded tree step)
    walkthrough: Walkthrough | None = None  # a stepped-through trace instead of a chart (lesson 0)
    prepare: Callable[[object], None] | None = None  # (pair): work its live run reuses, done when the server starts

    def defaults(self) -> dict:
        return {k.key.split("_", 1)[1]: k.default for k in self.knobs}


def model_drafter(pair) -> str:
    """The EAGLE head where the pair has one, else the draft model."""
    return "eagle" if drafter_name(pair, "eagle") else "model"


ROUNDS = 3  # every contender runs this many times, interleaved (app/lessons/kit/runs.py); a lesson may run fewer


def lane_jobs(prompts: list[str], depth: int, drafter: str, tokens: int, warm: bool = True, **spec) -> dict[str, Job]:
    """Plain and speculative decoding of `prompts` as jobs; warm: later runs read the prompts' pass (Job.warm)."""
    return {
        "ar": Job(prompts, DecodeConfig(mode="autoregressive", max_new_tokens=tokens), warm=warm),
        "spec": Job(prompts, DecodeConfig(depth=depth, drafter=drafter, max_new_tokens=tokens, **spec), warm=warm),
    }


def lanes(pair, prompts: list[str], depth: int, drafter: str, tokens: int, rounds: int = ROUNDS, **spec) -> dict:
    """Plain and speculative decoding of the same prompts, interleaved `rounds` times, as lanes (the median run
    of each, with every run's tokens/s) and the compare numbers of the two median runs."""
    runs = interleaved(pair, lane_jobs(prompts, depth, drafter, tokens, **spec), rounds)
    return lane_pair(runs["ar"], runs["spec"])


def leviathan_of(m: dict, run: dict | None = None) -> dict | None:
    """α, the depth actually drafted and c of one compare dict (None when the run drafted nothing), and the measured
    speedup the worksheet sets Leviathan's formula against: the one rule's ratio over `run`'s interleaved rounds (the
    chart's number) where the run is given, else the compare dict's own."""
    if m.get("alpha") is None or not m.get("drafted_depth") or m.get("c") is None:
        return None
    sp = numbers.speedup(run) if run else None
    return {"alpha": m["alpha"], "k": m["drafted_depth"], "c": m["c"], "measured": sp["value"] if sp else m.get("speedup")}


def leviathan_models(m: dict) -> list[tuple[str, float | None]]:
    return [
        ("Leviathan, Theorem 3.8 (verify = one plain step)", m.get("predicted_speedup")),
        ("Leviathan with the measured verify cost", m.get("predicted_measured_verify")),
    ]


# --- the claims, as data: where each contender's rounds are in a measurement ---------------------------
def lane_rounds(a: str, b: str, key=lambda m: m):
    """(a's rounds, b's rounds) of two lanes of one run (`key` finds the run): decoding alone where recorded."""
    return lambda m: (rate_rounds(key(m)[a]), rate_rounds(key(m)[b]))


def by_batch(i: int):
    return lambda m: sorted(m["runs"], key=lambda r: r["batch"])[i]


def cell_rounds(a, b, batch):
    """Two rows of a per-(batch, contender) table (lessons 6 and 7): a, b, batch read from the measurement."""
    return lambda m: tuple(rate_rounds(cell(m["rows"], batch(m), name(m) if callable(name) else name)) for name in (a, b))


# --- the table the page reads -------------------------------------------------------------------------
DEPTHS = tuple(range(1, 9))


SETTING_NAMES = {  # a setting, or what a run chose from its room (its `chosen`), named in a sentence
    "depth": "depth k",
    "k": "depth k",
    "batch": "batch",
    "largest": "largest pass",
    "n": "off above batch",
    "mid": "middle batch",
    "past": "batch past the room",
    "most": "deepest draft",
    "nodes": "tree nodes",
    "topk": "children per node",
    "tokens": "new tokens",
    "context": "context (tokens)",
    "conf": "confidence gate",
}


CURVE_HELP = "0: chosen from this machine's pass curve (app/lessons/kit/numbers.py)"


def pair_numbers(pairs: list[tuple[str, dict, dict | None]], whole: bool = False) -> list[tuple[str, str]]:
    """A worksheet's key numbers of (label, compare numbers, the plain/speculative pair whose rounds give the speedup);
    whole: with the whole run's FLOPs ratio (a lesson whose every run ran its prompt's pass: Job.warm off)."""
    f, out = metrics.fmt, []
    for label, c, run in pairs:
        sp = numbers.speedup(run) if run else None  # the one number the chart, its verdict and the prediction show
        out += [
            (f"{label}: speedup", f(sp["value"] if sp else c.get("speedup"), ".2f", "×")),
            (f"{label}: α", f(c.get("alpha"), ".3f")),  # the digits the hand calculation works with
            (f"{label}: depth drafted k", f(c.get("drafted_depth"))),
            (f"{label}: c", f(c.get("c"), ".3f")),
        ]
        if whole:
            out.append((f"{label}: FLOPs ratio (whole run, prefill included)", f(c.get("flops_ratio"), ".2f", "×")))
    return out


DECODING_ALONE = (  # the first words of a caption under a table of decoding rates
    "Decoding alone: the decode steps' tokens over their time, the prompt's pass (prefill) left out. A live run makes that pass"
    " once per batch of prompts, the later rounds reusing its keys and values (a prefix cache). Tokens/s are a lane's"
    " median round; × plain is the verdict rule's typical round-by-round ratio, which can differ from the ratio of two"
    " medians (even in direction, where the rounds scatter)."
)


def room_of(result: dict) -> int | None:
    """The room the run chose its settings from (its `chosen`), else read from its recorded curve, else None."""
    chosen, curve = result.get("chosen") or {}, result.get("curve")
    if chosen.get("room"):
        return int(chosen["room"])
    return numbers.room_tokens(curve["tokens"], curve["ms"]) if curve else None


def findings(e, m: dict, s: dict) -> list[str]:
    """What a run shows, short: this machine's room where the run read its curve, then the lesson's notes."""
    room, curve = room_of(m), m.get("curve")
    notes = [line for line in e.notes(m, s) if line]
    if not room or not curve or e.one_pass is not None:  # a lesson of passes measures the curve itself: its table is the room
        return notes
    words = numbers.room_words(room, curve["tokens"], curve["ms"])
    if curve.get("measured_at"):  # the curve is its own measurement, not this lesson's run: say which and when
        words = words.rstrip(".") + f" (this machine's pass curve, measured {curve['measured_at'][:10]}"
        busy = ms.curve_busy(curve)  # the curve's rounds shared the cores with other work
        words += ", beside other work: a busy machine's curve rises sooner, so its room may read small)." if busy else ")."
    return [words, *notes]
