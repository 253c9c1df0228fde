"""The lessons' GPU evidence beside SpecLab's recorded H200 pass curves (app/views/h200.py, measured, labelled with
machine and date): the curves drawn with a lesson's passes marked, the roofline Predictor at a lesson's settings (a
model, labelled so), the KV-cache sentence and published results (cited). No streamlit.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from app.common.a11y import readable
from app.views.bars import COLORS, SYMBOLS, esc, frame
from app.views.h200 import Curve, knee_curve, knee_tokens
from engine.costs import ridge_tokens_with_kv
from engine.roofline import predictor
from engine.roofline.architectures import architecture
from engine.roofline.gpus import gpu

MODEL_GPU, MODEL_SHAPE, MODEL_CONTEXT = "H100-SXM", "8B", 1024


SEED_SHAPE = "27B"  # the seed's framing: a 27B model in bf16 streams its weights every decode pass


SERVING_BATCH = 64  # a serving engine's batch, beside the lesson's own
SERVING_TAG = " (a serving batch)"  # how a pass at SERVING_BATCH that the lesson did not run is named


CAN_SHOW = (
    "Can show: what one forward pass costs on that GPU as it carries more tokens (the flat part, the knee, and the "
    "launch overhead of running the pass *eager*, each kernel launched from Python one by one, against a *CUDA graph*, "
    "the pass's kernels recorded once and replayed with one launch; see the glossary in the sidebar). Cannot show: "
    "acceptance, so no speedup of a real drafter: the weights are random, so drafts are (almost) never accepted. The "
    "gpu_graphs curves were recorded with zero context (no KV cache read); the gpu_bench curves over a 256-token cache."
)


def _log_x_marker(fig: go.Figure, x: float, color: str, dash: str, text: str, anchor: str = "left", y: float = 1.0) -> None:
    """A vertical line at data value x on a log x axis, labelled. The line is a shape (data coordinates); the
    label is an annotation, which on a log axis takes log10 of the value (as app/views/roofline.py does):
    plotly's add_vline(annotation_text=...) would place it at 10**x and break the axis ("NaN×10^Infinity")."""
    fig.add_vline(x=x, line_dash=dash, line_color=color)
    fig.add_annotation(
        x=math.log10(x),
        y=y,
        xref="x",
        yref="paper",
        text=text,
        showarrow=False,
        font={"color": readable(color)},  # the line's hue, dark enough to read (orange text was 2.25:1)
        xanchor=anchor,
        yanchor="bottom",
    )


# --- 2. the Predictor at the lesson's settings ---------------------------------------------------
def verify_passes(settings: dict, batches: list[int] | None = None) -> list[tuple[str, int, int]]:
    """(what, batch, new tokens per row) of plain steps and verify passes at the lesson's batches (default: 1 and its
    batch), plus a serving batch."""
    s = settings or {}
    depth = int(s.get("depth", s.get("k", 4)) or 4)
    batches = batches or sorted({1, int(s.get("batch", 1) or 1)})
    out = []
    for b in [*batches, SERVING_BATCH] if SERVING_BATCH not in batches else batches:
        tag = SERVING_TAG if b == SERVING_BATCH and b not in batches else ""
        out += [(f"plain, batch {b}{tag}", b, 1), (f"verify k = {depth}, batch {b}{tag}", b, depth + 1)]
    return out


def lesson_passes(record, settings: dict) -> list[tuple[str, int, int]]:
    """The passes a lesson's settings make (its record's `gpu_passes`, else plain and verify at 1 and its batch)."""
    return record.gpu_passes(settings or {}) if record.gpu_passes else verify_passes(settings)


def model_rows(record, settings: dict, gpu_key: str = MODEL_GPU, shape: str = MODEL_SHAPE) -> list[dict]:
    """Predicted pass times for the lesson's passes on a named GPU and real shape: a MODEL, labelled per row."""
    arch = architecture(shape)
    costs, roof = arch.costs("bfloat16"), predictor.Roof.from_gpu(gpu(gpu_key), "bfloat16")
    out = []
    for what, b, n in lesson_passes(record, settings):
        one = predictor.pass_ms(costs, roof, b, 1, MODEL_CONTEXT)
        ms = predictor.pass_ms(costs, roof, b, n, MODEL_CONTEXT)
        out.append(
            {
                "pass (model, not a measurement)": what,
                "tokens per pass": b * n,
                "predicted ms": round(ms, 2),
                "× a plain pass at that batch": round(ms / one, 2),
                "regime (model)": predictor.regime(costs, roof, b, n, MODEL_CONTEXT),
                "KV cache read, MB (model)": round(b * costs.kv_bytes_per_token * (MODEL_CONTEXT + n) / 1e6, 1),
            }
        )
    return out


def model_label(gpu_key: str = MODEL_GPU, shape: str = MODEL_SHAPE, also: tuple[str, ...] = ()) -> str:
    """Where the model's numbers come from: the data-sheet peaks of `gpu_key` (and of `also`, drawn beside it)."""
    names, arch = " and the ".join(gpu(k).name for k in (gpu_key, *also)), architecture(shape)
    return (
        f"model, not a measurement: roofline at the {names} data-sheet peaks (bf16) plus the CUDA-graph overhead "
        f"measured on an H200, {arch.name} shape, context {MODEL_CONTEXT} (engine/roofline/predictor.py)"
    )


def model_ridge(gpu_key: str = MODEL_GPU, shape: str = MODEL_SHAPE) -> float:
    """Tokens per pass where the model's pass turns compute-bound on that GPU (the Predictor's ridge)."""
    return predictor.ridge_tokens_per_pass(architecture(shape).costs("bfloat16"), predictor.Roof.from_gpu(gpu(gpu_key), "bfloat16"))


def kv_ridge(gpu_key: str = MODEL_GPU, shape: str = MODEL_SHAPE, context: int = MODEL_CONTEXT, depth: int = 4) -> dict:
    """The ridge in tokens per pass counting the weights alone and counting each row's KV cache at `context` too
    (engine.costs.ridge_tokens_with_kv), for rows of one token (plain decoding) and of depth + 1 (a verify pass)."""
    costs, g = architecture(shape).costs("bfloat16"), gpu(gpu_key)
    peak = g.peak_flops("bfloat16")
    one_row_kv = costs.kv_bytes_per_token * context
    attention = costs.forward_flops(1, 1, context) - costs.forward_flops(1, 1, 0)  # one token's attention FLOPs over the cache
    return {
        "gpu": g.name,
        "model": architecture(shape).name,
        "context": context,
        "depth": depth,
        "kv_kb_per_token": costs.kv_bytes_per_token / 1e3,
        "kv_mb_per_row": one_row_kv / 1e6,
        "weights_gb": costs.weight_bytes / 1e9,
        "kv_flop_per_byte": attention / one_row_kv if one_row_kv else 0.0,
        "ridge_point": peak / g.bandwidth,
        "weights_only": model_ridge(gpu_key, shape),
        "plain": ridge_tokens_with_kv(costs, peak, g.bandwidth, context, 1),
        "verify": ridge_tokens_with_kv(costs, peak, g.bandwidth, context, depth + 1),
    }


def tokens_words(x: float) -> str:
    return "never, at any batch," if math.isinf(x) else f"at {x:,.0f} tokens per pass"


def kv_sentence(gpu_key: str = MODEL_GPU, shape: str = MODEL_SHAPE, context: int = MODEL_CONTEXT, depth: int = 4) -> str:
    """Why long contexts keep large passes memory-bound, in numbers computed from the model."""
    k = kv_ridge(gpu_key, shape, context, depth)
    return (
        f"The ridge counts bytes, and a pass reads more than weights: each row also reads its own KV cache, "
        f"{k['kv_kb_per_token']:.0f} kB per token for the {k['model']} shape, {k['kv_mb_per_row']:,.0f} MB per row at a "
        f"{context:,}-token context (the weights are {k['weights_gb']:.1f} GB). Attention does only about "
        f"{k['kv_flop_per_byte']:.0f} FLOPs per KV byte, far below the {k['gpu']}'s ridge of {k['ridge_point']:.0f}, so every "
        f"row added to a batch brings more bytes than arithmetic can hide. Counting weights alone, the pass turns "
        f"compute-bound {tokens_words(k['weights_only'])}; counting each row's KV at this context, "
        f"{tokens_words(k['verify'])} for verify passes of {depth + 1} tokens per row and {tokens_words(k['plain'])} for "
        "plain rows of one token (model, data-sheet peaks). **Long contexts keep large passes memory-bound**: the KV "
        "bytes grow with every row and every cached token, while the weights' arithmetic per byte stays put."
    )


def seed_framing(gpu_key: str = MODEL_GPU, shape: str = SEED_SHAPE) -> dict:
    """The seed's numbers, computed: weight bytes of a real shape in bf16, and the least time to stream them once."""
    g, arch = gpu(gpu_key), architecture(shape)
    costs = arch.costs("bfloat16")
    flops_one = costs.forward_flops(1, 1, 0)
    return {
        "model": arch.name,
        "gpu": g.name,
        "weight_gb": costs.weight_bytes / 1e9,
        "bandwidth_tb_s": g.bandwidth / 1e12,
        "stream_ms": 1000.0 * costs.weight_bytes / g.bandwidth,
        "one_token_flops_ms": 1000.0 * flops_one / g.peak_flops("bfloat16"),
        "ridge_tokens": model_ridge(gpu_key, shape),
    }


def seed_sentence(gpu_key: str = MODEL_GPU, shape: str = SEED_SHAPE) -> str:
    f = seed_framing(gpu_key, shape)
    return (
        f"A GPU keeps the weights in its large global memory (HBM) and streams them into small on-chip memory on "
        f"every pass. {f['model']} in bf16 is {f['weight_gb']:.0f} GB of weights: at the {f['gpu']}'s "
        f"{f['bandwidth_tb_s']:.2f} TB/s one decode pass takes at least {f['stream_ms']:.0f} ms however few tokens it "
        f"carries, while one token's arithmetic takes {f['one_token_flops_ms']:.2g} ms at its peak; the pass stays "
        f"memory-bound up to about {f['ridge_tokens']:.0f} tokens (model, data-sheet peaks). A sparse (MoE) model "
        "streams only the experts its tokens are routed to (its active parameters)."
    )


# --- 3. published results where the claim needs acceptance ----------------------------------------
SGLANG = "SGLang docs, Speculative Decoding (https://docs.sglang.io/advanced_features/speculative_decoding.html), from the EAGLE-3 paper"


EAGLE3 = "Li et al., EAGLE-3, arXiv 2503.01840 (abstract), https://arxiv.org/abs/2503.01840"


CITED = (
    {"result": "plain decoding", "value": "158.34 tokens/s", "setup": "Llama-3.1-8B-Instruct, MT-Bench, 1× H100, SGLang", "source": SGLANG},
    {"result": "EAGLE-2", "value": "244.10 tokens/s", "setup": "Llama-3.1-8B-Instruct, MT-Bench, 1× H100, SGLang", "source": SGLANG},
    {"result": "EAGLE-3", "value": "373.25 tokens/s", "setup": "Llama-3.1-8B-Instruct, MT-Bench, 1× H100, SGLang", "source": SGLANG},
    {"result": "EAGLE-3 throughput gain at batch 64", "value": "1.38×", "setup": "SGLang", "source": EAGLE3},
    {"result": "EAGLE-3 speedup, best case", "value": "up to 6.5×", "setup": "chat and reasoning models, five tasks", "source": EAGLE3},
)


def cited_rows(record) -> list[dict]:
    """Published results for a lesson (its record) whose claim depends on acceptance; none for lesson 1 (pass cost)."""
    return [dict(r) for r in CITED] if record.acceptance else []


# --- the panel's figures --------------------------------------------------------------------------
def curves_figure(curves: list[Curve], marks: list[int] | None = None) -> go.Figure:
    """ms per pass against tokens per pass for each recorded curve (log-log), the lesson's pass sizes marked."""
    fig = go.Figure()
    dashes = {"graph": None, "eager": "dash"}
    shapes = list(dict.fromkeys(c.shape for c in curves))
    for c in curves:
        color = COLORS[shapes.index(c.shape) % len(COLORS)]
        fig.add_scatter(
            x=list(c.tokens),
            y=list(c.ms),
            mode="lines+markers",
            name=esc(c.name + (" (gpu_bench)" if "bench" in c.source else "")),
            line={"color": color, "dash": "dot" if c.context else dashes.get(c.mode)},  # never told apart by colour alone
            marker={"symbol": SYMBOLS[shapes.index(c.shape) % len(SYMBOLS)] + ("" if c.mode == "graph" else "-open")},
            customdata=list(c.batches),
            hovertemplate="%{x} tokens per pass (batch×tokens: %{customdata}): %{y:.2f} ms<extra></extra>",
        )
    for t in sorted(set(marks or [])):
        _log_x_marker(fig, t, "#555", "dot", f"{t}")
    if marks:  # what the dotted lines are, in the legend beside the curves (not only in the caption)
        fig.add_scatter(
            x=[None], y=[None], mode="lines", line={"color": "#555", "dash": "dot"}, name="this lesson's pass sizes (tokens, on top)"
        )
    quoted = knee_curve(curves)
    knee = knee_tokens(quoted) if quoted else None
    if knee:  # the one knee the panel and the lesson texts quote, on the curve it is read from
        color = COLORS[shapes.index(quoted.shape) % len(COLORS)]
        _log_x_marker(fig, knee, color, "dashdot", esc(f"knee ≈ {knee:.0f} ({quoted.shape}, CUDA graph)"), "right", 0.9)
    fig.update_xaxes(type="log", title_text="tokens per pass (batch × tokens per row)", dtick=1)  # decades: minor labels crowd
    fig.update_yaxes(type="log", title_text="ms per pass", dtick=1)
    label = "; ".join(dict.fromkeys(c.label for c in curves))
    return frame(fig, "Measured on a GPU: what one pass costs as it carries more tokens", label, height=420)


def model_figure(record, settings: dict, gpu_keys: tuple[str, ...] = ("H100-SXM", "H200"), shape: str = MODEL_SHAPE) -> go.Figure:
    """The Predictor's pass time against tokens per pass (batch 1 growing), per GPU, with the lesson's passes marked."""
    arch = architecture(shape)
    costs = arch.costs("bfloat16")
    xs = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]
    fig = go.Figure()
    ridges: list[tuple[float, str, str]] = []
    for i, key in enumerate(gpu_keys):
        roof = predictor.Roof.from_gpu(gpu(key), "bfloat16")
        fig.add_scatter(
            x=xs,
            y=[predictor.pass_ms(costs, roof, 1, n, MODEL_CONTEXT) for n in xs],
            mode="lines",
            name=esc(f"{gpu(key).name} (model)"),
            line={"color": COLORS[i % len(COLORS)], "dash": ("dot", "dash", "solid")[i % 3]},
        )
        ridge = model_ridge(key, shape)
        ridges.append((ridge, key, COLORS[i % len(COLORS)]))
    for j, (ridge, key, color) in enumerate(sorted(ridges)):  # the lower ridge labelled leftwards, the next rightwards
        _log_x_marker(
            fig,
            ridge,
            color,
            "dash",
            esc(f"{key} ridge ≈ {ridge:.0f} (weights only)"),
            "right" if j == 0 else "left",
            1.0 - 0.07 * (j // 2),
        )
    for j, row in enumerate(model_rows(record, settings, gpu_keys[0], shape)):
        fig.add_scatter(
            x=[row["tokens per pass"]],
            y=[row["predicted ms"]],
            mode="markers",
            marker={"size": 10, "color": "#333", "symbol": "diamond"},
            name=esc(f"◆ this lesson's passes, on the {gpu(gpu_keys[0]).name} (hover for each)"),
            legendgroup="passes",
            showlegend=j == 0,
            hovertemplate=esc(row["pass (model, not a measurement)"]) + ": %{x} tokens, %{y:.2f} ms (model)<extra></extra>",
        )
    fig.update_xaxes(type="log", title_text="tokens per pass")
    fig.update_yaxes(rangemode="tozero", title_text="predicted ms per pass (model)")
    label = model_label(gpu_keys[0], shape, also=gpu_keys[1:])
    return frame(fig, f"Model, not a measurement: the {arch.name} shape's pass on named GPUs", label, height=400)
