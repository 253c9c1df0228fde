"""Lesson 8, long context: passes of one token and of k + 1 tokens per row, at a batch whose verify pass is past this
machine's room, over a short and a long KV cache, in interleaved rounds; the claim is that a long context makes the
verify pass's extra tokens cheaper against a one-token pass (the room grows with the context, because every pass
reads each row's cache once however many tokens the row carries). Its record, its run, its words, its chart and
table, and its GPU view (the roofline Predictor at long contexts, a model).
"""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from app.common import measurement as ms
from app.common.measurement import CHOSEN, PASS_ROW_SPEC, PEAKS, SPREAD
from app.lessons.kit import numbers
from app.lessons.kit.experiment import CURVE_HELP, Claim, Experiment, Knob, Prediction
from app.lessons.kit.runs import chosen, context_store, inside_depth, machine_curve, metered
from app.lessons.kit.show import show_table
from app.views.bars import COLORS, frame, grouped_bars
from engine import verdict as rule
from engine.costs import ridge_tokens
from engine.decoding.context_passes import context_rounds, warm_contexts
from engine.roofline import predictor
from engine.roofline.architectures import architecture
from engine.roofline.gpus import gpu

SHORT = 256  # the short context: a chat turn's worth of cache


LONGS = (1024, 2048, 4096)  # the long context's options (the embedded target's window is 8,192 tokens)


LONG = 4096  # the long context's default


BATCHES = (4, 8, 16, 32)  # the batch's options; 0 = the smallest up to 16 whose verify pass carries 4× the room (numbers.past_batch)


ROUNDS, REPEATS = 5, 2  # every pass once per round, the rounds in turn; each round's time the median of 2 passes


GPU_KEY, GPU_SHAPE, GPU_BATCH, GPU_CONTEXTS = "H200", "8B", 128, (256, 1024, 2048, 4096, 8192)  # k + 1 = 4: 512 tokens per pass


def long_context(pair, probe, s: dict) -> dict:
    """One-token and (k + 1)-token passes per row at `batch` rows, over SHORT and `context` tokens of KV cache, in
    ROUNDS interleaved rounds (engine/decoding/context_passes.py); k and the batch chosen from this machine's room
    where left at 0. Each verify row keeps its per-round ratio to the one-token pass of its context."""
    curve, room = machine_curve(pair)
    k = int(s["k"]) or inside_depth(room)
    batch = int(s["batch"]) or numbers.past_batch(room, k, chosen(BATCHES))
    contexts = [SHORT, int(s["context"])]
    store = context_store(pair)  # a context prefilled before (the server's preparation, an earlier run) is read warm
    (found,), other = metered(lambda: context_rounds(pair, batch, [1, k + 1], contexts, ROUNDS, REPEATS, store), 1)
    rows = []
    for r in found:
        one = next(x for x in found if x["context"] == r["context"] and x["new_tokens"] == 1)
        per_round = [a / b for a, b in zip(r["ms_rounds"], one["ms_rounds"])]
        seconds = r["ms"] / 1000
        rows.append(
            {key: r[key] for key in ("batch", "new_tokens", "tokens_per_pass", "context", "ms", "flops", "bytes")}
            | {"ms_per_token": r["ms"] / r["tokens_per_pass"], "achieved_flops": r["flops"] / seconds}
            | {"achieved_bandwidth": r["bytes"] / seconds, "ms_runs": ms.spread(r["ms_rounds"])}
            | ({"over_one_runs": ms.spread(per_round)} if r is not one else {})
        )
    return {
        "rows": rows,
        "kv_bytes_per_token": pair.target_costs.kv_bytes_per_token,
        "peak_bandwidth": probe.peak_bandwidth,
        "peak_flops": probe.peak_flops,
        "ridge_point": probe.ridge_point,
        "dtype": probe.dtype,
        "ridge_tokens": ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth),
        "chosen": {"room": room, "k": k, "batch": batch},
        "curve": curve,
        "other_cores": other,
    }


def prepare(pair) -> None:
    """The default run's contexts prefilled into the pair's context store before anyone asks (the server's preload,
    app/main.py): the long one is about 8 s of prefill on a 2-core CPU, and the first live run reads it warm, as a
    later one does; kept on disk by the store (runs.context_store), a restarted server reads it back in under 1 s."""
    warm_contexts(pair, [SHORT, LONG], context_store(pair))


def contexts(m: dict) -> tuple[int, int]:
    """(short, long) context of a run."""
    found = sorted({int(r["context"]) for r in m["rows"]})
    return found[0], found[-1]


def pair_at(m: dict, context: int) -> tuple[dict, dict]:
    """(the one-token pass, the verify pass) over `context` tokens of cache."""
    rows = sorted((r for r in m["rows"] if int(r["context"]) == context), key=lambda r: r["new_tokens"])
    return rows[0], rows[-1]


def over_one(m: dict, context: int) -> rule.Verdict:
    """The verify pass ÷ the one-token pass over one context, by the one rule over the paired rounds: the number the
    chart, the table, the notes and the prediction all show."""
    one, verify = pair_at(m, context)
    return rule.judge(verify["ms_runs"], one["ms_runs"])


def kv_share(m: dict, row: dict) -> float:
    """The share of a pass's bytes that is KV cache (engine.costs: each row's cache of context + new tokens)."""
    return row["batch"] * m["kv_bytes_per_token"] * (row["context"] + row["new_tokens"]) / row["bytes"]


def _ms(row: dict) -> str:
    sp = row["ms_runs"]
    return f"{row['ms']:.1f} ({sp['min']:.1f}–{sp['max']:.1f})"


def table(m: dict, s: dict) -> list[dict]:
    out = []
    for c in contexts(m):
        one, verify = pair_at(m, c)
        v = over_one(m, c)
        out.append(
            {
                "context (tokens per row)": c,
                "batch": one["batch"],
                "one token per row, ms (rounds)": _ms(one),
                f"{verify['new_tokens']} tokens per row, ms (rounds)": _ms(verify),
                "verify ÷ one-token pass": round(v.ratio, 2),
                "95% range": v.interval,
                "KV cache's share of the one-token pass's bytes": f"{kv_share(m, one):.0%}",
                "MB read by the one-token pass": round(one["bytes"] / 1e6, 1),
            }
        )
    return out


def notes(m: dict, s: dict) -> list[str]:
    """The verify pass against the one-token pass at both contexts, what the cache adds to a pass, and where the long
    context left the verify pass against the room."""
    short, long_ = contexts(m)
    (one_s, ver_s), one_l = pair_at(m, short), pair_at(m, long_)[0]
    r_s, r_l = over_one(m, short).ratio, over_one(m, long_).ratio
    tokens = ver_s["tokens_per_pass"]
    out = [
        f"At batch {one_s['batch']}, the verify pass ({tokens} tokens) cost {r_s:.2f}× a one-token pass over {short} tokens "
        f"of cache, and {r_l:.2f}× over {long_}.",
        f"The one-token pass read {one_l['bytes'] / 1e6:.1f} MB over {long_} tokens against {one_s['bytes'] / 1e6:.1f} MB "
        f"over {short}: the extra is KV cache, which a verify pass reads once for all of a row's tokens.",
    ]
    try:
        a, b = _ratio_rounds(m)
    except KeyError:  # a measurement from before the rounds were kept
        a = b = None
    fell = rule.judge(a["values"], b["values"]) if a and b and a.get("values") and b.get("values") else None
    where = (
        "priced as a pass inside the room is (nearly a one-token pass)"
        if r_l <= numbers.ROOM
        else "still priced above a pass inside the room"
    )
    said = {  # the lead claim by the one rule on the rounds' ratios (long ÷ short), not by the medians alone
        -1: "the cache made the extra tokens cheaper",
        1: "the extra tokens cost more against a one-token pass over the long cache, not less",
        0: "the ratio over the long cache is level with the short one's",
    }
    if fell is None:
        out.append(f"Over {long_} tokens the verify pass is {where}.")
    elif fell.kind == "can't tell":
        out.append(
            f"Over {long_} tokens the verify pass is {where}; whether the cache made the extra tokens cheaper, "
            f"{fell.rounds} rounds cannot tell ({fell.interval})."
        )
    else:
        out.append(f"Over {long_} tokens the verify pass is {where}: {said[fell.sign]} ({fell.interval}).")
    return out


def figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """Time of each pass at both contexts (bars: median, whiskers: the rounds' range), each verify bar labelled with
    its ratio to the one-token pass of its context."""
    cs = contexts(m)
    pairs = [pair_at(m, c) for c in cs]
    k1 = pairs[0][1]["new_tokens"]

    def vals(i):
        return [(p[i]["ms"], p[i]["ms_runs"]["min"], p[i]["ms_runs"]["max"]) for p in pairs]

    series = [
        {"name": "one token per row (a plain step)", "values": vals(0), "color": COLORS[2]},
        {
            "name": f"{k1} tokens per row (a verify pass, k = {k1 - 1})",
            "values": vals(1),
            "color": COLORS[0],
            "text": [f"{over_one(m, c).ratio:.2f}× one" for c in cs],
        },
    ]
    fig = go.Figure()
    grouped_bars(fig, [f"{c:,} tokens of cache per row" for c in cs], series)
    fig.update_yaxes(title_text=f"ms per pass, batch {pairs[0][0]['batch']}")
    return frame(fig, "The verify pass against a one-token pass, over a short and a long KV cache", label, height=400)


def gpu_rows(depth: int) -> list[dict]:
    """The roofline Predictor (a model) for a serving batch on an H200 at growing contexts: the verify pass ÷ the
    plain pass, and which regime the model puts each in; contexts whose caches do not fit the GPU's memory left out."""
    costs, g = architecture(GPU_SHAPE).costs("bfloat16"), gpu(GPU_KEY)
    roof, out = predictor.Roof.from_gpu(g, "bfloat16"), []
    for c in GPU_CONTEXTS:
        if not predictor.fits(costs, g.memory_gb * 1e9, GPU_BATCH, c, depth):
            continue
        one, verify = (predictor.pass_ms(costs, roof, GPU_BATCH, n, c) for n in (1, depth + 1))
        out.append(
            {
                "context (model, not a measurement)": c,
                "plain pass, ms": round(one, 2),
                f"verify pass (k = {depth}), ms": round(verify, 2),
                "verify ÷ plain": round(verify / one, 2),
                "regime of the verify pass": predictor.regime(costs, roof, GPU_BATCH, depth + 1, c),
            }
        )
    return out


def show_gpu(m: dict, label: str, key: str, recorded: dict | None) -> None:
    """The GPU panel's view of this lesson: the Predictor's verify ÷ plain at a serving batch as the context grows."""
    depth = int((m.get("chosen") or {}).get("k") or 3)
    g, arch = gpu(GPU_KEY), architecture(GPU_SHAPE)
    st.markdown(f"**These passes on an H200 as the context grows** (a model, not a measurement; batch {GPU_BATCH}, k = {depth})")
    show_table(gpu_rows(depth))
    st.caption(
        f"Model, not a measurement: the roofline at the {g.name} data-sheet peaks (bf16) plus the CUDA-graph overhead "
        f"measured on an H200, {arch.name} shape, batch {GPU_BATCH} (engine/roofline/predictor.py); a context whose KV "
        "cache would not fit the GPU's memory beside the weights is left out. SpecLab has no "
        "H200 recording at long contexts yet (scripts/record/gpu_context.py records one when a GPU is lent). "
        "MagicDec (Chen et al., 2024) measured the same turn on GPUs: at long contexts and large batches the KV "
        "cache dominates a pass, and speculation pays again."
    )


def _ratio_rounds(m: dict) -> tuple[dict, dict]:
    """(the verify pass's per-round ratio to the one-token pass over the long context, over the short): the lead
    claim's rounds, kept in the measurement."""
    short, long_ = contexts(m)
    return pair_at(m, long_)[1]["over_one_runs"], pair_at(m, short)[1]["over_one_runs"]


def _one_token_rounds(m: dict) -> tuple[dict, dict]:
    short, long_ = contexts(m)
    return pair_at(m, long_)[0]["ms_runs"], pair_at(m, short)[0]["ms_runs"]


def roofline_ratio(m: dict) -> float | None:
    """The roofline's verify ÷ one-token pass over the long context: time = max(bytes ÷ bandwidth, FLOPs ÷ FLOP/s)."""
    one, verify = pair_at(m, contexts(m)[1])
    if not m.get("peak_bandwidth") or not m.get("peak_flops"):
        return None
    return numbers.roofline_s(verify, m) / numbers.roofline_s(one, m)


CAPTION = (
    "Each pass ran once per round, both contexts in turn, five rounds; a round's time is the median of two passes, "
    "and the cache rolls back after each, so every pass over a context reads the same cache. The ratio is the one "
    "rule's over the paired rounds (the glossary's verdict rule). Bytes are SpecLab's count (weights + each row's KV "
    "cache, engine/costs.py), not a hardware counter."
)


RECORD = Experiment(
    long_context,
    (
        Knob("l8_context", "Long context (tokens of KV cache per row)", LONGS, LONG),
        Knob("l8_batch", "Batch", (0, *BATCHES), 0, CURVE_HELP + ": the smallest whose verify pass carries 4× the room"),
        Knob("l8_k", "Depth k", (0, 1, 2, 3, 4), 0, CURVE_HELP + ": the deepest draft whose batch-1 verify pass fits in the room"),
    ),
    Prediction(
        "Over {context} tokens of KV cache per row, at this lesson's batch (its verify pass past this machine's room at a short context), "
        "a verify pass of k + 1 tokens per row costs how many times a one-token-per-row pass over the same cache?",
        "e.g. 2",
        lambda m, s: over_one(m, contexts(m)[1]).ratio,
        lambda m, s: [("roofline from the probed peaks: max(bytes ÷ bandwidth, FLOPs ÷ FLOP/s)", roofline_ratio(m))],
    ),
    notes=notes,
    table=table,
    figures=lambda m, s, label: [figure(m, s, label)],
    caption=CAPTION,
    numbers=lambda m, s: [(f"verify ÷ one-token pass over {c} tokens", over_one(m, c).interval) for c in contexts(m)],
    gpu_passes=lambda s: [
        ("one token per row", int(s.get("batch") or 8), 1),
        ("verify", int(s.get("batch") or 8), int(s.get("k") or 3) + 1),
    ],
    acceptance=False,
    retimed=show_gpu,
    one_pass=lambda m: (
        f"a one-token pass at batch {pair_at(m, contexts(m)[0])[0]['batch']} over {contexts(m)[0]} tokens",
        pair_at(m, contexts(m)[0])[0]["ms"],
    )
    if m.get("rows")
    else None,
    read=lambda m: pair_at(m, contexts(m)[1])[1]["tokens_per_pass"] if m.get("rows") else None,
    name="long_context",
    prepare=prepare,
    schema={"rows": [PASS_ROW_SPEC | {"over_one_runs?": SPREAD}], "kv_bytes_per_token": "num", **PEAKS, **CHOSEN, "other_cores?": "num?"},
    claims=(
        Claim(
            "A long context makes the verify pass's extra tokens cheaper against a one-token pass",
            "verify ÷ one-token pass over the long context",
            "the same over the short context",
            "the chosen batch",
            _ratio_rounds,
            -1,
            lead=True,
            costs=True,
            metric="verify pass ÷ one-token pass, per round",
        ),
        Claim(
            "The KV cache makes every pass dearer",
            "a one-token pass over the long context",
            "a one-token pass over the short context",
            "the chosen batch",
            _one_token_rounds,
            1,
            costs=True,
            metric="ms per pass",
        ),
    ),
)
