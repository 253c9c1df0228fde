"""Lessons 4-7's experiments: switching speculation off by batch size, adaptive per-sequence depth, depth policies
against load, and width (a draft tree). Each takes (pair, probe, settings) and returns a measurement
(app/lessons/measurement.py). No streamlit.
"""

from __future__ import annotations

from app.lessons import measurement as ms
from app.lessons.experiment_kit import ROUNDS, lane_jobs, model_drafter
from app.lessons.load import cell
from app.lessons.runs import Job, cell_of_runs, interleaved, lane_pair, median_run
from app.lessons.width import GOODPUT, goodput_fields
from engine import DecodeConfig
from engine.bench.prompts import batch_prompts
from engine.costs import expected_tokens_per_step, ridge_tokens

TURN_OFF_ROUNDS = 2  # lesson 4


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
