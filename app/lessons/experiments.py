"""The Lessons' experiments: what each one measures, its settings, and the prediction a student makes first.

Each experiment takes (pair, probe, settings) and returns a *measurement*: plain numbers checked by
app/lessons/measurement.py, the same dict scripts/record/record_lessons.py records under assets/lessons/. Its settings
are Knobs the page binds to the URL; its Prediction names the number a student guesses before the run,
how that number is read from the measurement, and the models (Leviathan et al. 2023, Theorem 3.8, or the
roofline) it is set against. No streamlit here: the page (app/app_pages/lessons.py) draws, the recording
script runs these same functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.lessons import measurement as ms
from app.lessons.load import cell
from app.lessons.runs import LARGE_BATCHES, Job, cell_of_runs, interleaved, knee_tokens, lane_pair, large_batch, median_run, seed_passes
from app.lessons.step_lesson import STEP_DEPTH, one_step, one_step_models
from app.lessons.width import GOODPUT, goodput_fields, width_models, width_ratio
from engine import DecodeConfig
from engine.bench.prompts import batch_prompts
from engine.costs import expected_tokens_per_step, ridge_tokens
from engine.decoding.passcurve import pass_costs, pass_curve
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


@dataclass(frozen=True)
class Experiment:
    run: Callable[[object, object, dict], dict]  # (pair, probe, settings) -> measurement (plain numbers)
    knobs: tuple[Knob, ...]
    predict: Prediction
    needs: tuple[str, ...] = ()  # drafter kinds, any one of which the pair must offer
    leviathan: Callable[[dict, dict], dict | None] = field(default=lambda m, s: None)  # -> {alpha, k, c} for worksheets

    def defaults(self) -> dict:
        return {k.key.split("_", 1)[1]: k.default for k in self.knobs}


def model_drafter(pair) -> str:
    """The EAGLE head where the pair has one, else the draft model."""
    return "eagle" if drafter_name(pair, "eagle") else "model"


ROUNDS = 3  # every contender runs this many times, interleaved (app/lessons/runs.py); a lesson may run fewer


def lane_jobs(prompts: list[str], depth: int, drafter: str, tokens: int, **spec) -> dict[str, Job]:
    return {
        "ar": Job(prompts, DecodeConfig(mode="autoregressive", max_new_tokens=tokens)),
        "spec": Job(prompts, DecodeConfig(depth=depth, drafter=drafter, max_new_tokens=tokens, **spec)),
    }


def lanes(pair, prompts: list[str], depth: int, drafter: str, tokens: int, rounds: int = ROUNDS, **spec) -> dict:
    """Plain and speculative decoding of the same prompts, interleaved `rounds` times, as lanes (the median run
    of each, with every run's tokens/s) and the compare numbers of the two median runs."""
    runs = interleaved(pair, lane_jobs(prompts, depth, drafter, tokens, **spec), rounds)
    return lane_pair(runs["ar"], runs["spec"])


def _leviathan_of(m: dict) -> dict | None:
    """α, the depth actually drafted and c of one compare dict (None when the run drafted nothing)."""
    if m.get("alpha") is None or not m.get("drafted_depth") or m.get("c") is None:
        return None
    return {"alpha": m["alpha"], "k": m["drafted_depth"], "c": m["c"], "measured": m.get("speedup")}


def _leviathan_models(m: dict) -> list[tuple[str, float | None]]:
    return [
        ("Leviathan, Theorem 3.8 (verify = one plain step)", m.get("predicted_speedup")),
        ("Leviathan with the measured verify cost", m.get("predicted_measured_verify")),
    ]


# --- 1. one token per pass leaves the arithmetic idle ----------------------------------------------
PASS_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


PASS_ROUNDS = 3


def memory_bound(pair, probe, s: dict) -> dict:
    """One target pass at batch 1 with 1..`largest` new tokens (PASS_ROUNDS rounds over every size, the median of
    3 timed passes per size and round; a row's ms is the median over the rounds, its spread the rounds'), and
    this machine's probed peaks to read it against."""
    sizes = [n for n in PASS_SIZES if n <= s["largest"]]
    rounds = [pass_costs(pair, [1], sizes, context=int(s["context"]), repeats=3) for _ in range(PASS_ROUNDS)]
    rows = []
    for per_size in zip(*rounds):
        times = [row["ms"] for row in per_size]
        row = {key: per_size[ms.median_index(times)][key] for key in ms.PASS_ROW}  # the fields the schema records
        rows.append(row | {"ms_runs": ms.spread(times)})
    return {
        "rows": rows,
        "peak_bandwidth": probe.peak_bandwidth,
        "peak_flops": probe.peak_flops,
        "ridge_point": probe.ridge_point,
        "dtype": probe.dtype,
        "ridge_tokens": ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth),
    }


def _row(rows: list[dict], tokens: int) -> dict:
    return min(rows, key=lambda r: abs(r["tokens_per_pass"] - tokens))


def pass_ratio(m: dict, s: dict) -> float | None:
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    return _row(rows, 16)["ms"] / rows[0]["ms"] if rows and rows[0]["ms"] > 0 else None


def roofline_ratio(m: dict, s: dict) -> list[tuple[str, float | None]]:
    """The roofline's ratio: time = max(bytes / peak bandwidth, FLOPs / peak FLOP/s), 16 tokens over 1."""
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    if not rows:
        return [("roofline from the probed peaks", None)]

    def t(r):
        return max(r["bytes"] / m["peak_bandwidth"], r["flops"] / m["peak_flops"])

    return [("roofline from the probed peaks: max(bytes ÷ bandwidth, FLOPs ÷ FLOP/s)", t(_row(rows, 16)) / t(rows[0]))]


# --- 2. speculation does more work, and the seed's five tokens per pass -----------------------------
def more_flops(pair, probe, s: dict) -> dict:
    """The n-gram lookup against plain decoding on an extractive prompt (batch 1), and Barrow's seed passes."""
    out = lanes(pair, batch_prompts("extractive", 1), int(s["depth"]), "ngram", int(s["tokens"]))
    return out | {"seed": seed_passes(pair, int(s["depth"]))}


def operations_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    return [("Leviathan's operations factor, Theorem 3.11 (decode steps only)", m["m"].get("operations_factor"))]


# --- 3. past the ridge ------------------------------------------------------------------------------
TURN_OFF_ROUNDS = 2  # lesson 4
RIDGE_ROUNDS = 2  # six contenders at two batch sizes: two interleaved rounds keep a live run near 20 s on 2 cores


def past_the_ridge(pair, probe, s: dict) -> dict:
    """A model drafter at depth k on held-out prompts at batch 1 and a large batch, and the n-gram lookup at the
    large batch on extractive prompts (its best case) for contrast; each beside plain decoding of the same
    prompts, all six interleaved RIDGE_ROUNDS times. batch 0 picks the large batch from this machine's pass curve
    (engine/decoding/passcurve.py, measured once per machine) so its verify pass sits well past the knee."""
    drafter, depth, tokens = model_drafter(pair), int(s["depth"]), int(s["tokens"])
    curve = pass_curve(pair)
    knee = knee_tokens(curve.tokens, curve.ms)
    batch = int(s["batch"]) or large_batch(knee, depth)
    jobs = {}
    for b in (1, batch):
        for key, job in lane_jobs(batch_prompts("heldout", b), depth, drafter, 2 * tokens if b == 1 else tokens).items():
            jobs[(b, key)] = job
    for key, job in lane_jobs(batch_prompts("extractive", batch), depth, "ngram", tokens).items():
        jobs[("ngram", key)] = job
    runs = interleaved(pair, jobs, RIDGE_ROUNDS)
    shape = {"tokens": list(curve.tokens), "ms": list(curve.ms), "knee_tokens": knee}
    return {
        "drafter": drafter,
        "runs": [{"batch": b, **lane_pair(runs[(b, "ar")], runs[(b, "spec")])} for b in (1, batch)],
        "ngram": lane_pair(runs[("ngram", "ar")], runs[("ngram", "spec")]),
        "ridge_tokens": ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth),
        "curve": shape | {"key": curve.key[:300], "measured_at": curve.measured_at},
    }


# --- 4. turn it off ---------------------------------------------------------------------------------
def turn_it_off(pair, probe, s: dict) -> dict:
    """Plain, always-on (draft model, k = 4) and off-above-batch-N decoding of one batch, interleaved TURN_OFF_ROUNDS
    times (two: three rounds of three lanes at batch 16 took 25 s on the 2-core EPYC, over the 20 s a live run gets)."""
    prompts, tokens = batch_prompts("chat", int(s["batch"])), int(s["tokens"])
    jobs = lane_jobs(prompts, 4, "model", tokens)
    off = DecodeConfig(depth=4, drafter="model", max_new_tokens=tokens, policy="off_above_batch", disable_by_batch_size=int(s["n"]))
    runs = interleaved(pair, jobs | {"off": Job(prompts, off)}, TURN_OFF_ROUNDS)
    on = lane_pair(runs["ar"], runs["spec"])
    return {"ar": on["ar"], "on": on["spec"], "off": ms.lane_of_runs([r[0] for r in runs["off"]]), "m": on["m"]}


# --- 5. adaptive per sequence -----------------------------------------------------------------------
GATE_BATCHES = ((1, 32), (8, 16))  # (batch, new tokens per sequence)


def adaptive(pair, probe, s: dict) -> dict:
    """Depth k drafting every token vs stopping below a joint confidence, at batch 1 and 8, with plain decoding;
    the three interleaved ROUNDS times at each batch."""
    drafter, depth, threshold = model_drafter(pair), int(s["depth"]), float(s["conf"])
    out = []
    for batch, tokens in GATE_BATCHES:
        prompts = batch_prompts("heldout", batch)
        jobs = {"ar": Job(prompts, DecodeConfig(mode="autoregressive", max_new_tokens=tokens))}
        for name, t in (("fixed", 0.0), ("gated", threshold)):
            jobs[name] = Job(prompts, DecodeConfig(depth=depth, drafter=drafter, max_new_tokens=tokens, confidence_threshold=t))
        runs = interleaved(pair, jobs, ROUNDS)
        fixed, gated = lane_pair(runs["ar"], runs["fixed"]), lane_pair(runs["ar"], runs["gated"])
        out.append(
            {
                "batch": batch,
                "ar": fixed["ar"],
                "fixed": fixed["spec"],
                "gated": gated["spec"],
                "m_fixed": fixed["m"],
                "m_gated": gated["m"],
            }
        )
    return {"drafter": drafter, "batches": out}


def gate_ratio(m: dict, s: dict) -> float | None:
    b = m["batches"][0]
    fixed = b["fixed"]["summary"]["tokens_per_s"]
    return b["gated"]["summary"]["tokens_per_s"] / fixed if fixed else None


def gate_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    b = m["batches"][0]
    out = []
    for name, key in (
        ("Leviathan, Theorem 3.8", "predicted_speedup"),
        ("Leviathan with the measured verify cost", "predicted_measured_verify"),
    ):
        g, f = b["m_gated"].get(key), b["m_fixed"].get(key)
        out.append((f"{name}: gated ÷ fixed", g / f if g is not None and f else None))
    return out


# --- 6. speculate by load ---------------------------------------------------------------------------
LOAD_BATCHES, LOAD_TOKENS, LOAD_N, LOAD_MAX, LOAD_ROUNDS = (1, 4, 16), 10, 8, 6, 2
PLAIN = "plain decoding"


def fixed_label(k: int) -> str:
    return f"fixed k = {k}"


def load_contenders(drafter: str, k: int) -> dict[str, DecodeConfig]:
    spec = {"drafter": drafter, "max_new_tokens": LOAD_TOKENS}
    return {
        PLAIN: DecodeConfig(mode="autoregressive", max_new_tokens=LOAD_TOKENS),
        fixed_label(k): DecodeConfig(depth=k, **spec),
        f"off above batch {LOAD_N}": DecodeConfig(depth=k, policy="off_above_batch", disable_by_batch_size=LOAD_N, **spec),
        f"batch table, derived (k ≤ {LOAD_MAX})": DecodeConfig(depth=LOAD_MAX, policy="batch_table", **spec),
        f"goodput (k ≤ {LOAD_MAX})": DecodeConfig(depth=LOAD_MAX, policy="goodput", **spec),
    }


def by_load(pair, probe, s: dict) -> dict:
    """Tokens/s and time per output token of plain decoding and four depth policies at batch 1, 4 and 16
    (held-out prompts), every contender run LOAD_ROUNDS times, interleaved at each batch size."""
    drafter = model_drafter(pair)
    contenders = load_contenders(drafter, int(s["k"]))
    rows = []
    for batch in LOAD_BATCHES:
        prompts = batch_prompts("heldout", batch)
        runs = interleaved(pair, {name: Job(prompts, cfg) for name, cfg in contenders.items()}, LOAD_ROUNDS)
        for name in contenders:
            c = cell_of_runs(runs[name])
            keys = ("tokens_per_s", "alpha", "tokens_per_s_runs", "tpot_ms", "other_cores")
            rows.append(
                {"batch": batch, "contender": name, "mean_depth": c["mean_depth"] if name != PLAIN else 0.0} | {k: c[k] for k in keys}
            )
    return {"drafter": drafter, "rows": rows}


def load_speedup(m: dict, s: dict) -> float | None:
    batch = max(LOAD_BATCHES)
    c, p = cell(m["rows"], batch, fixed_label(int(s["k"]))), cell(m["rows"], batch, PLAIN)
    return c["tokens_per_s"] / p["tokens_per_s"] if c and p and p["tokens_per_s"] else None


def load_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    c = cell(m["rows"], max(LOAD_BATCHES), fixed_label(int(s["k"])))
    bound = expected_tokens_per_step(c["alpha"], c["mean_depth"]) if c and c["alpha"] is not None else None
    return [("Leviathan with a free drafter and a free verify (c = 0): E[tokens per step], an upper bound", bound)]


def load_leviathan(m: dict, s: dict) -> dict | None:
    c = cell(m["rows"], max(LOAD_BATCHES), fixed_label(int(s["k"])))
    if not c or c["alpha"] is None:
        return None
    return {"alpha": c["alpha"], "k": c["mean_depth"], "c": None, "measured": load_speedup(m, s)}


# --- 7. width: a draft tree ------------------------------------------------------------------------------
WIDTH_DEPTH, WIDTH_PROMPTS, WIDTH_TOKENS, WIDTH_ROUNDS = 4, 2, 10, 2  # depth; prompts at batch 1; tokens per sequence; rounds
WIDTH_CONTENDERS = (PLAIN, "chain", "tree", GOODPUT)


def width_configs(drafter: str, nodes: int, topk: int) -> list[DecodeConfig]:
    """Plain decoding, a chain of depth WIDTH_DEPTH, a tree of `nodes` nodes (top-`topk`) as deep, and the goodput
    policy choosing per step between plain, a chain of k ≤ WIDTH_DEPTH and that tree cut to its best n ≤ `nodes`."""
    spec = {"drafter": drafter, "depth": WIDTH_DEPTH, "max_new_tokens": WIDTH_TOKENS}
    tree = {"tree_nodes": nodes, "tree_topk": topk}
    return [
        DecodeConfig(mode="autoregressive", max_new_tokens=WIDTH_TOKENS),
        DecodeConfig(**spec),
        DecodeConfig(**tree, **spec),
        DecodeConfig(policy="goodput", **tree, **spec),
    ]


def width(pair, probe, s: dict) -> dict:
    """The four contenders at batch 1 (WIDTH_PROMPTS held-out prompts, one after another) and at `batch`, each run
    WIDTH_ROUNDS times, interleaved at each batch size. Goodput's row adds the shape its median run verified at each
    step (app/lessons/width.py `goodput_fields`); it starts from what earlier goodput runs of this process learnt."""
    drafter, nodes, topk, batch = model_drafter(pair), int(s["nodes"]), int(s["topk"]), int(s["batch"])
    rows = []
    for b in (1, batch):
        prompts = batch_prompts("heldout", WIDTH_PROMPTS if b == 1 else b)
        jobs = {name: Job(prompts, cfg, sequential=b == 1) for name, cfg in zip(WIDTH_CONTENDERS, width_configs(drafter, nodes, topk))}
        runs = interleaved(pair, jobs, WIDTH_ROUNDS)
        for name, per_row in zip(WIDTH_CONTENDERS, (0, WIDTH_DEPTH, nodes, None)):
            c = cell_of_runs(runs[name])
            keys = ("tokens_per_s", "tokens_per_step", "verify_ms", "flops", "tokens_per_s_runs", "other_cores")
            own = goodput_fields(b, median_run(runs[name])) if per_row is None else {"tokens_per_pass": b * (per_row + 1)}
            rows.append({"batch": b, "contender": name} | own | {k: c[k] for k in keys})
    ridge = ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth)
    return {"drafter": drafter, "ridge_tokens": ridge, "depth": WIDTH_DEPTH, "nodes": nodes, "topk": topk, "rows": rows}


# --- the table the page reads -------------------------------------------------------------------------
DEPTHS = tuple(range(1, 9))
EXPERIMENTS = {  # the names lessons/*.md use in their front matter ("experiment: memory_bound")
    "memory_bound": Experiment(
        memory_bound,
        (
            Knob("l1_context", "Context already in the KV cache (tokens)", (64, 150, 512, 1024), 150),
            Knob("l1_largest", "Largest pass (tokens)", (16, 32, 64, 128), 64),
        ),
        Prediction("A 16-token pass costs how many times the time of a 1-token pass?", "e.g. 4", pass_ratio, roofline_ratio),
    ),
    "more_flops": Experiment(
        more_flops,
        (Knob("l2_depth", "Speculation depth k", DEPTHS, 4), Knob("l2_tokens", "New tokens", (16, 32, 64), 32)),
        Prediction(
            "Speculative decoding's total FLOPs are how many times plain decoding's, for the same output?",
            "e.g. 0.8",
            lambda m, s: m["m"].get("flops_ratio"),
            operations_models,
        ),
        leviathan=lambda m, s: _leviathan_of(m["m"]),
    ),
    "past_the_ridge": Experiment(
        past_the_ridge,
        (
            Knob("l3_depth", "Speculation depth k", DEPTHS, 4),
            Knob(
                "l3_batch",
                "Large batch",
                (0, *LARGE_BATCHES),
                16,
                "0: chosen from this machine's pass curve, the smallest batch whose verify pass carries at least twice its knee",
            ),
            Knob("l3_tokens", "New tokens per sequence (twice this at batch 1)", (8, 12, 16, 24, 32), 12),
        ),
        Prediction(
            "The speedup of speculation over plain decoding at the large batch (batch {batch}; 0: chosen from the pass curve)?",
            "e.g. 1.5",
            lambda m, s: m["runs"][-1]["m"].get("speedup"),
            lambda m, s: _leviathan_models(m["runs"][-1]["m"]),
        ),
        needs=("eagle", "model"),
        leviathan=lambda m, s: _leviathan_of(m["runs"][-1]["m"]),
    ),
    "turn_it_off": Experiment(
        turn_it_off,
        (
            Knob("l4_batch", "Batch size", (8, 16, 32), 16),
            Knob("l4_n", "Off above batch N", (1, 2, 4, 8, 16), 8),
            Knob("l4_tokens", "New tokens per sequence", (16, 32), 32),
        ),
        Prediction(
            "The speedup of always-on speculation (draft model, k = 4) at batch {batch}?",
            "e.g. 1.2",
            lambda m, s: m["m"].get("speedup"),
            lambda m, s: _leviathan_models(m["m"]),
        ),
        needs=("model",),
        leviathan=lambda m, s: _leviathan_of(m["m"]),
    ),
    "adaptive": Experiment(
        adaptive,
        (
            Knob("l5_depth", "Speculation depth k", tuple(range(2, 9)), 6),
            Knob("l5_conf", "Stop drafting below joint confidence", (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9), 0.3),
        ),
        Prediction("At batch 1, the gated run's tokens/s ÷ the always-draft-k run's?", "e.g. 1.1", gate_ratio, gate_models),
        needs=("eagle", "model"),
        leviathan=lambda m, s: _leviathan_of(m["batches"][0]["m_gated"]),
    ),
    "by_load": Experiment(
        by_load,
        (Knob("l6_k", "Fixed depth k", DEPTHS, 4),),
        Prediction(
            "The speedup of fixed depth k over plain decoding at batch 16 (1.0 = the same speed)?", "e.g. 1.3", load_speedup, load_models
        ),
        needs=("eagle", "model"),
        leviathan=load_leviathan,
    ),
    "width": Experiment(
        width,
        (
            Knob("l7_nodes", "Tree nodes", (8, 16, 24, 32), 24),
            Knob("l7_topk", "Children per node (top-k)", (4, 6, 8), 6),
            Knob("l7_batch", "Large batch", (4, 8, 16), 16),
        ),
        Prediction("At batch {batch}, the tree's tokens/s ÷ the chain's (1.0 = the same speed)?", "e.g. 1.2", width_ratio, width_models),
        needs=("eagle", "model"),
    ),
    "one_step": Experiment(  # lesson 0: no knobs; its recording is the step-through trace (app/lessons/step_page.py)
        one_step,
        (),
        Prediction(
            f"Out of k = {STEP_DEPTH} drafts, how many will the target accept in this step?",
            "e.g. 2",
            lambda m, s: float(m["accepted"]),
            one_step_models,
            unit=" drafts",
        ),
        needs=("eagle", "model"),
    ),
}
