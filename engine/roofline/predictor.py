"""A roofline predictor: pass time and speculative speedup on a named GPU, from peaks and SpecLab's measured overheads.

This is a MODEL, not a measurement (the idea of Modal's "Spec Dec Roofline" calculator, checked here against
SpecLab's recorded passes: see `model_error` and the Predictor page). Pure functions on numbers; no torch.

1. One forward pass carrying `batch` rows of `new_tokens` over a `context`-token KV cache (FLOPs and bytes from
   engine/costs.py's `ModelCosts`, the same counts the engine reports for its measured passes):

       T_roof  = max(bytes / peak bandwidth, FLOPs / peak FLOP/s)            (Williams et al. 2009, roofline)
       T_pass  = T_roof + overhead

   The overhead is what a pass spends on anything but streaming and arithmetic at the peaks: launching its
   kernels (eager: ~800 launches issued from Python per pass; as a CUDA graph: replayed, but still kernels
   back to back, many too small to fill the GPU). No pass costs less than it: it is the curve's floor. Two
   are modelled, both set from SpecLab's H200 measurement (docs/measurements/h200-gpu_graphs.json,
   scripts/investigate/gpu_graphs.py, SmolLM2-1.7B shape, batch 1, one token, no context; FLOOR_MEASURED): of that
   pass's time eager and as a CUDA graph, the roofline at the H200's data-sheet peaks accounts for a small part;
   the rest is the overhead (per 24 layers), scaled by layer count
   (launches grow with layers). Added, not maxed: against the recorded H200 passes the sum fits better than
   max(T_roof, measured pass) for the 7B shape (median error of its graph passes 27% against 51%) and as
   well for the others (docs/engine.md).
2. Speculative speedup at batch B and depth k, with per-token acceptance alpha and draft cost c (a draft step
   costs c target decode steps at the same batch), Leviathan et al. 2023 (eq. 1, Theorem 3.8), with the
   verify pass priced by the roofline instead of assumed to cost one step:

       speedup(B, k) = E[tokens](alpha, k) · T(B, 1) / (k · c · T(B, 1) + T(B, k + 1))

   In the flat (memory- or overhead-bound) regime T(B, k+1) = T(B, 1) and this is Leviathan's
   (1 - alpha^(k+1)) / ((1 - alpha)(k·c + 1)). The crossover is the smallest batch at which it falls below 1.
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass

from engine.costs import ModelCosts, expected_tokens_per_step, ridge_tokens
from engine.roofline.gpus import GPU

# --- the overheads (SpecLab's own H200 measurement) -----------------------------------------------
FLOOR_SOURCE = "docs/measurements/h200-gpu_graphs.json (scripts/investigate/gpu_graphs.py on an NVIDIA H200, 2026-11-30)"
FLOOR_MEASURED = {"eager": 13.450655937194824, "graph": 3.0220320224761963}  # ms, SmolLM2-1.7B shape, batch 1, 1 token
FLOOR_PASS = {"shape": "1.7B", "gpu": "H200", "batch": 1, "new_tokens": 1, "context": 0, "logits_tokens": 1}
FLOORS = ("graph", "eager", "none")
FLOOR_LABELS = {"graph": "CUDA-graph overhead", "eager": "eager overhead", "none": "no overhead"}


@dataclass(frozen=True)
class Roof:
    """The peaks a prediction uses: a named GPU's data sheet, or a machine's probed peaks."""

    label: str
    bandwidth: float  # bytes/s
    flops: float  # FLOP/s in the model's dtype

    def __post_init__(self):
        if not (self.bandwidth > 0 and self.flops > 0):
            raise ValueError("peak bandwidth and FLOP/s must be positive")

    @classmethod
    def from_gpu(cls, gpu: GPU, dtype: str) -> Roof:
        return cls(f"{gpu.name}, data sheet", gpu.bandwidth, gpu.peak_flops(dtype))

    @property
    def ridge_point(self) -> float:
        """FLOP per byte where compute time equals memory time."""
        return self.flops / self.bandwidth


@functools.cache
def _overhead_per_layer(floor: str) -> float:
    """ms per decoder layer: the measured pass (FLOOR_PASS) minus its roofline time at the H200's data-sheet peaks."""
    from engine.roofline.architectures import architecture
    from engine.roofline.gpus import GPUS

    shape = architecture(FLOOR_PASS["shape"])
    roof = Roof.from_gpu(GPUS[FLOOR_PASS["gpu"]], "bfloat16")
    streaming = roof_ms(
        shape.costs("bfloat16"), roof, FLOOR_PASS["batch"], FLOOR_PASS["new_tokens"], FLOOR_PASS["context"], FLOOR_PASS["logits_tokens"]
    )
    return (FLOOR_MEASURED[floor] - streaming) / shape.layers


def floor_ms(costs: ModelCosts, floor: str) -> float:
    """The overhead every pass pays for a model with `costs.n_layers` layers ('graph', 'eager' or 'none')."""
    if floor not in FLOORS:
        raise ValueError(f"floor must be one of {', '.join(FLOORS)}; got {floor!r}")
    if floor == "none":
        return 0.0
    return _overhead_per_layer(floor) * costs.n_layers


def roof_ms(costs: ModelCosts, roof: Roof, batch: int, new_tokens: int, context: float, logits_tokens: int | None = None) -> float:
    """The roofline bound of one pass: max(bytes / bandwidth, FLOPs / FLOP/s), in ms."""
    flops = costs.forward_flops(batch, new_tokens, context, logits_tokens)
    nbytes = costs.forward_bytes(batch, new_tokens, context)
    return 1000.0 * max(flops / roof.flops, nbytes / roof.bandwidth)


def pass_ms(
    costs: ModelCosts, roof: Roof, batch: int, new_tokens: int, context: float, floor: str = "graph", logits_tokens: int | None = None
) -> float:
    """Predicted time of one pass: the roofline bound plus the overhead."""
    if batch < 1 or new_tokens < 1 or context < 0:
        raise ValueError("a pass needs batch >= 1, new_tokens >= 1 and context >= 0")
    return roof_ms(costs, roof, batch, new_tokens, context, logits_tokens) + floor_ms(costs, floor)


def regime(costs: ModelCosts, roof: Roof, batch: int, new_tokens: int, context: float, floor: str = "graph") -> str:
    """What takes most of the predicted pass time: 'overhead', 'memory' or 'compute'."""
    flops_ms = 1000.0 * costs.forward_flops(batch, new_tokens, context) / roof.flops
    bytes_ms = 1000.0 * costs.forward_bytes(batch, new_tokens, context) / roof.bandwidth
    if floor_ms(costs, floor) >= max(flops_ms, bytes_ms):
        return "overhead"
    return "compute" if flops_ms > bytes_ms else "memory"


def ridge_tokens_per_pass(costs: ModelCosts, roof: Roof) -> float:
    """Tokens per pass where the weights' FLOPs reach the ridge: n* = (FLOP/s / bandwidth) · weight_bytes / (2·params)."""
    return ridge_tokens(costs, roof.flops, roof.bandwidth)


# --- speculative decoding ----------------------------------------------------------------------
def _check_spec(alpha: float, depth: int, c: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1]; got {alpha}")
    if depth < 0:
        raise ValueError(f"depth must be >= 0; got {depth}")
    if c < 0:
        raise ValueError(f"c must be >= 0; got {c}")


def speedup(costs: ModelCosts, roof: Roof, alpha: float, depth: int, c: float, batch: int, context: float, floor: str = "graph") -> float:
    """Predicted speculative tokens/s ÷ plain tokens/s at this batch and depth (module docstring, item 2)."""
    _check_spec(alpha, depth, c)
    t_ar = pass_ms(costs, roof, batch, 1, context, floor)
    if depth == 0:
        return 1.0
    t_verify = pass_ms(costs, roof, batch, depth + 1, context, floor)
    return expected_tokens_per_step(alpha, depth) * t_ar / (depth * c * t_ar + t_verify)


MEMORY_USE = 0.9  # the share of a GPU's memory weights and KV caches may take (vLLM's default gpu_memory_utilization)


def fits(costs: ModelCosts, memory_bytes: float, batch: int, context: float, depth: int = 0) -> bool:
    """Do the weights (every one held, an untied input embedding too) plus `batch` KV caches of context + depth + 1
    tokens fit in MEMORY_USE of `memory_bytes`, the rest left to activations and the runtime?"""
    return costs.held_bytes + batch * costs.kv_bytes_per_token * (context + depth + 1) <= MEMORY_USE * memory_bytes


@dataclass(frozen=True)
class SpeedupGrid:
    batches: tuple[int, ...]
    depths: tuple[int, ...]
    values: tuple[tuple[float | None, ...], ...]  # values[i][j]: depth i, batch j; None = does not fit in memory
    crossover: dict[int, int | None]  # depth -> smallest batch whose speedup is < 1 (None: never in the grid)

    def best_depth(self, batch: int) -> tuple[int, float] | None:
        """(depth, speedup) of the fastest depth at this batch, or None where nothing fits."""
        j = self.batches.index(batch)
        cells = [(v[j], d) for d, v in zip(self.depths, self.values, strict=True) if v[j] is not None]
        if not cells:
            return None
        value, depth = max(cells)
        return depth, value


def crossover_batch(batches: list[int] | tuple[int, ...], values: list[float | None] | tuple) -> int | None:
    """The smallest batch at which speculation falls below plain decoding (speedup < 1), or None."""
    for batch, value in zip(batches, values, strict=True):
        if value is not None and value < 1.0:
            return batch
    return None


def speedup_grid(
    costs: ModelCosts,
    roof: Roof,
    alpha: float,
    c: float,
    batches,
    depths,
    context: float,
    floor: str = "graph",
    memory_bytes: float | None = None,
) -> SpeedupGrid:
    """Predicted speedup over batch x depth; cells whose KV caches do not fit `memory_bytes` are None."""
    batches, depths = tuple(int(b) for b in batches), tuple(int(d) for d in depths)
    if not batches or not depths or min(batches) < 1 or list(batches) != sorted(set(batches)):
        raise ValueError("batches must be increasing positive integers, and there must be at least one depth")
    values = []
    for depth in depths:
        row = []
        for batch in batches:
            if memory_bytes is not None and not fits(costs, memory_bytes, batch, context, depth):
                row.append(None)
            else:
                row.append(speedup(costs, roof, alpha, depth, c, batch, context, floor))
        values.append(tuple(row))
    crossover = {d: crossover_batch(batches, row) for d, row in zip(depths, values, strict=True)}
    return SpeedupGrid(batches, depths, tuple(values), crossover)


# --- checking the model against measurements -----------------------------------------------------
def model_error(predicted: list[float], measured: list[float]) -> float:
    """Median of |predicted / measured - 1| over paired points (0.25 = typically 25% off)."""
    if len(predicted) != len(measured) or not predicted:
        raise ValueError("model_error needs one prediction per measurement, at least one")
    if any(m <= 0 for m in measured):
        raise ValueError("measured times must be positive")
    return statistics.median(abs(p / m - 1.0) for p, m in zip(predicted, measured, strict=True))


# --- the CLI's table (python -m engine predict) ------------------------------------------------
TABLE_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
GRID_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
GRID_DEPTHS = (1, 2, 3, 4, 6, 8)
MAX_CONTEXT = 1 << 20


def check_inputs(context: int, alpha: float, c: float) -> None:
    """One-line ValueErrors for values the predictor cannot price."""
    if not 0 <= context <= MAX_CONTEXT:
        raise ValueError(f"context must be in 0..{MAX_CONTEXT}; got {context}")
    _check_spec(alpha, 1, c)


def prediction_table(
    gpu_key: str, model_key: str, context: int = 1024, alpha: float = 0.7, c: float = 0.05, dtype: str = "bfloat16", floor: str = "graph"
) -> str:
    """The predictor's pass-time table and speedup grid as text, labelled as a model."""
    from engine.roofline.architectures import architecture
    from engine.roofline.gpus import gpu

    check_inputs(context, alpha, c)
    chip, arch = gpu(gpu_key), architecture(model_key)
    roof, costs = Roof.from_gpu(chip, dtype), arch.costs(dtype)
    floor_ms(costs, floor)  # validates the floor name
    lines = [
        f"Roofline prediction - a model, not a measurement: {arch.name} on the {chip.name}, {dtype}, "
        f"context {context}, {FLOOR_LABELS[floor]} ({floor_ms(costs, floor):.2f} ms added to every pass; measured in {FLOOR_SOURCE})",
        f"peaks ({chip.source}): {chip.bandwidth / 1e9:.0f} GB/s, {roof.flops / 1e12:.1f} TFLOP/s dense; ridge "
        f"{roof.ridge_point:.0f} FLOP/byte = {ridge_tokens_per_pass(costs, roof):.0f} tokens per pass",
        f"weights {costs.weight_bytes / 1e9:.2f} GB streamed per pass; KV cache {costs.kv_bytes_per_token / 1e3:.1f} kB "
        f"per token ({costs.kv_bytes_per_token * context / 1e6:.1f} MB per {context}-token sequence)",
    ]
    if chip.note:
        lines.append(f"note: {chip.note}")
    lines.append(f"{'tokens/pass':>11} {'1 row x n ms':>13} {'bound':>8} {'n rows x 1 ms':>14} {'bound':>8}")
    for n in TABLE_TOKENS:
        lines.append(
            f"{n:>11} {pass_ms(costs, roof, 1, n, context, floor):>13.3f} "
            f"{regime(costs, roof, 1, n, context, floor):>8} {pass_ms(costs, roof, n, 1, context, floor):>14.3f} "
            f"{regime(costs, roof, n, 1, context, floor):>8}"
        )
    grid = speedup_grid(costs, roof, alpha, c, GRID_BATCHES, GRID_DEPTHS, context, floor, chip.memory_gb * 1e9)
    lines.append(
        f"predicted speedup over plain decoding (alpha {alpha}, c {c}); rows: depth k, columns: batch; "
        "'-' = weights + KV caches exceed the GPU's memory"
    )
    lines.append("k \\ batch " + "".join(f"{b:>7}" for b in grid.batches))
    for depth, row in zip(grid.depths, grid.values, strict=True):
        lines.append(f"{depth:>10} " + "".join(f"{'-':>7}" if v is None else f"{v:>7.2f}" for v in row))
    for depth, batch in grid.crossover.items():
        lines.append(
            f"depth {depth}: "
            + (f"falls below plain decoding at batch {batch}" if batch else "stays above plain decoding at every batch in the grid")
        )
    return "\n".join(lines)
