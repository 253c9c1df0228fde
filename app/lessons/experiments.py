"""The Lessons' experiments: what each one measures, its settings, and the prediction a student makes first.

Each experiment takes (pair, probe, settings) and returns a *measurement*: plain numbers checked by
app/measurement.py, the same dict scripts/record/record_lessons.py records under assets/lessons/. Its settings
are Knobs the page binds to the URL; its Prediction names the number a student guesses before the run,
how that number is read from the measurement, and the models (Leviathan et al. 2023, Theorem 3.8, or the
roofline) it is set against. No streamlit here: the page (app/app_pages/lessons.py) draws, the recording
script runs these same functions.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from app.lessons import measurement as ms
from app.lessons.load import cell
from app.lessons.step_lesson import STEP_DEPTH, one_step, one_step_models
from app.views import metrics
from engine import DecodeConfig, generate
from engine.bench.harness import run_cells
from engine.bench.prompts import batch_prompts
from engine.costs import expected_tokens_per_step, ridge_tokens
from engine.decoding.passcurve import pass_costs
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


def lanes(pair, prompts: list[str], depth: int, drafter: str, tokens: int, **spec) -> dict:
    """Plain then speculative decoding of the same prompts, reduced to lanes and the compare numbers."""
    ar = generate(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=tokens))
    sp = generate(pair, prompts, DecodeConfig(depth=depth, drafter=drafter, max_new_tokens=tokens, **spec))
    return {"ar": ms.lane(ar), "spec": ms.lane(sp), "m": ms.plain_numbers(metrics.compare(ar, sp))}


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


def memory_bound(pair, probe, s: dict) -> dict:
    """One target pass at batch 1 with 1..`largest` new tokens, and this machine's probed peaks to read it against."""
    rows = pass_costs(pair, [1], [n for n in PASS_SIZES if n <= s["largest"]], context=int(s["context"]), repeats=5)
    rows = [{key: row[key] for key in ms.PASS_ROW} for row in rows]  # the fields the lesson's schema records
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
SEED_CONTEXT, SEED_ROUNDS = 150, 3


def seed_passes(pair, depth: int) -> dict:
    """Barrow's example: k+1 tokens per pass made two ways, batch k+1 at depth 0 and batch 1 at depth k, timed
    back to back (SEED_ROUNDS rounds alternating the two, 5 timed passes each), with the engine's counted FLOPs
    and bytes split into weights and KV cache (engine/costs.py forward_flops / forward_bytes)."""
    n = depth + 1
    shapes = {f"batch {n} at depth 0 (one new token per row)": (n, 1), f"batch 1 at depth {depth} (last token + {depth} drafts)": (1, n)}
    times = {label: [] for label in shapes}
    rows = {}
    for _ in range(SEED_ROUNDS):
        for label, (batch, new) in shapes.items():
            row = pass_costs(pair, [batch], [new], context=SEED_CONTEXT, repeats=5)[0]
            times[label].append(row["ms"])
            rows[label] = row
    weights = float(pair.target_costs.weight_bytes)
    passes = [
        {
            "label": label,
            "batch": batch,
            "new_tokens": new,
            "tokens_per_pass": batch * new,
            "ms": statistics.median(times[label]),
            "flops": rows[label]["flops"],
            "weight_bytes": weights,
            "kv_bytes": rows[label]["bytes"] - weights,
            "times_ms": times[label],
        }
        for label, (batch, new) in shapes.items()
    ]
    return {"context": SEED_CONTEXT, "rounds": SEED_ROUNDS, "passes": passes}


def more_flops(pair, probe, s: dict) -> dict:
    out = lanes(pair, batch_prompts("extractive", 1), int(s["depth"]), "ngram", int(s["tokens"]))
    return out | {"seed": seed_passes(pair, int(s["depth"]))}


def operations_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    return [("Leviathan's operations factor, Theorem 3.11 (decode steps only)", m["m"].get("operations_factor"))]


# --- 3. past the ridge ------------------------------------------------------------------------------
def past_the_ridge(pair, probe, s: dict) -> dict:
    """A model drafter at depth k on held-out prompts at batch 1 and `batch`, and the n-gram lookup at `batch` on
    extractive prompts (its best case) for contrast; each beside plain decoding of the same prompts."""
    drafter, depth, batch, tokens = model_drafter(pair), int(s["depth"]), int(s["batch"]), int(s["tokens"])
    runs = [{"batch": b, **lanes(pair, batch_prompts("heldout", b), depth, drafter, 2 * tokens if b == 1 else tokens)} for b in (1, batch)]
    ngram = lanes(pair, batch_prompts("extractive", batch), depth, "ngram", tokens)
    return {
        "drafter": drafter,
        "runs": runs,
        "ngram": ngram,
        "ridge_tokens": ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth),
    }


# --- 4. turn it off ---------------------------------------------------------------------------------
def turn_it_off(pair, probe, s: dict) -> dict:
    prompts, tokens = batch_prompts("chat", int(s["batch"])), int(s["tokens"])
    on = lanes(pair, prompts, 4, "model", tokens)
    off = generate(
        pair,
        prompts,
        DecodeConfig(depth=4, drafter="model", max_new_tokens=tokens, policy="off_above_batch", disable_by_batch_size=int(s["n"])),
    )
    return {"ar": on["ar"], "on": on["spec"], "off": ms.lane(off), "m": on["m"]}


# --- 5. adaptive per sequence -----------------------------------------------------------------------
GATE_BATCHES = ((1, 48), (8, 32))  # (batch, new tokens per sequence)


def adaptive(pair, probe, s: dict) -> dict:
    """Depth k drafting every token vs stopping below a joint confidence, at batch 1 and 8."""
    drafter, depth, threshold = model_drafter(pair), int(s["depth"]), float(s["conf"])
    out = []
    for batch, tokens in GATE_BATCHES:
        prompts = batch_prompts("heldout", batch)
        ar = generate(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=tokens))
        runs = {
            name: generate(pair, prompts, DecodeConfig(depth=depth, drafter=drafter, max_new_tokens=tokens, confidence_threshold=t))
            for name, t in (("fixed", 0.0), ("gated", threshold))
        }
        out.append(
            {
                "batch": batch,
                "ar": ms.lane(ar),
                "fixed": ms.lane(runs["fixed"]),
                "gated": ms.lane(runs["gated"]),
                "m_fixed": ms.plain_numbers(metrics.compare(ar, runs["fixed"])),
                "m_gated": ms.plain_numbers(metrics.compare(ar, runs["gated"])),
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
LOAD_BATCHES, LOAD_TOKENS, LOAD_N, LOAD_MAX = (1, 4, 16), 24, 8, 6
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
    """Tokens/s of plain decoding and four depth policies at batch 1, 4 and 16 (held-out prompts), interleaved
    at each batch size (engine.bench.run_cells: one warm-up each, then one run of every contender in turn)."""
    drafter = model_drafter(pair)
    contenders = load_contenders(drafter, int(s["k"]))
    rows = []
    for batch in LOAD_BATCHES:
        cells = run_cells(pair, batch_prompts("heldout", batch), list(contenders.values()), repeats=1)
        for name, measured in zip(contenders, cells):
            rows.append(
                {
                    "batch": batch,
                    "contender": name,
                    "tokens_per_s": measured["tokens_per_s"],
                    "mean_depth": measured["mean_depth"] if name != PLAIN else 0.0,
                    "alpha": measured["alpha"],
                }
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
WIDTH_DEPTH, WIDTH_PROMPTS, WIDTH_TOKENS = 4, 4, 32  # chain and tree depth; prompts at batch 1; tokens per sequence
WIDTH_CONTENDERS = ("plain decoding", "chain", "tree")


def width_configs(drafter: str, nodes: int, topk: int) -> list[DecodeConfig]:
    """Plain decoding, a chain of depth WIDTH_DEPTH, and a tree of `nodes` nodes (top-`topk`) as deep."""
    spec = {"drafter": drafter, "depth": WIDTH_DEPTH, "max_new_tokens": WIDTH_TOKENS}
    return [
        DecodeConfig(mode="autoregressive", max_new_tokens=WIDTH_TOKENS),
        DecodeConfig(**spec),
        DecodeConfig(tree_nodes=nodes, tree_topk=topk, **spec),
    ]


def width(pair, probe, s: dict) -> dict:
    """The three contenders at batch 1 (WIDTH_PROMPTS held-out prompts, one after another) and at `batch`,
    interleaved at each batch size (engine.bench.run_cells: one warm-up each, then one run of each in turn)."""
    drafter, nodes, topk, batch = model_drafter(pair), int(s["nodes"]), int(s["topk"]), int(s["batch"])
    rows = []
    for b in (1, batch):
        prompts = batch_prompts("heldout", WIDTH_PROMPTS if b == 1 else b)
        cells = run_cells(pair, prompts, width_configs(drafter, nodes, topk), repeats=1, sequential=b == 1)
        for name, per_row, measured in zip(WIDTH_CONTENDERS, (0, WIDTH_DEPTH, nodes), cells):
            rows.append(
                {
                    "batch": b,
                    "contender": name,
                    "tokens_per_s": measured["tokens_per_s"],
                    "tokens_per_step": measured["tokens_per_step"],
                    "tokens_per_pass": b * (per_row + 1),
                    "verify_ms": measured["verify_ms"],
                    "flops": measured["flops"],
                }
            )
    return {"drafter": drafter, "depth": WIDTH_DEPTH, "nodes": nodes, "topk": topk, "rows": rows}


def width_ratio(m: dict, s: dict, key: str = "tokens_per_s") -> float | None:
    """The tree's `key` ÷ the chain's at the large batch."""
    t, c = (cell(m["rows"], int(s["batch"]), name) for name in ("tree", "chain"))
    return t[key] / c[key] if t and c and t.get(key) and c.get(key) else None


def width_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    return [("if a wider pass cost nothing: the tree's tokens per pass ÷ the chain's (measured)", width_ratio(m, s, "tokens_per_step"))]


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
        (Knob("l2_depth", "Speculation depth k", DEPTHS, 4), Knob("l2_tokens", "New tokens", (16, 32, 64), 64)),
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
            Knob("l3_batch", "Large batch", (4, 8, 16, 32), 16),
            Knob("l3_tokens", "New tokens per sequence (twice this at batch 1)", (8, 16, 24, 32), 24),
        ),
        Prediction(
            "The speedup of speculation over plain decoding at batch {batch}?",
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
