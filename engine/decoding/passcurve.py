"""The target's measured pass-cost curve: time of ONE forward pass against tokens per pass, on this machine.

This is the curve behind the whole story (engine.decoding.passcurve.pass_costs draws it for the Sweep): flat while a
pass is memory- or overhead-bound, then rising once it is compute-bound. The load-aware policies
(engine/decoding/policies.py) read it to price a verify pass of batch x (k + 1) tokens before they choose k.

It is measured, never assumed: the first time a policy needs it for a (machine, model, dtype, threads)
it is timed (seconds on a CPU: 1..17 tokens one by one, then up to 256; batch 1, a 128-token
context, the fastest of 3 interleaved sweeps of 2 passes each) and
cached as JSON (`curves_dir()`: $SPECLAB_DATA/pass_curves/, else a Space's persistent storage
/data/speclab/pass_curves/ where /data is writable, else $SPECLAB_CACHE/pass_curves/), so later runs, and a
restarted Space with persistent storage, start at once.
Between two measured points the time is interpolated linearly; past the last one it is extrapolated
along the last segment's slope (compute-bound: linear in tokens).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import statistics
import threading
from bisect import bisect_left
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from engine.config import DecodeConfig
from engine.costs import ModelCosts
from engine.formats import data_dir
from engine.hardware import StepTimer, device_name
from engine.model.backend import pass_key
from engine.model.pair import ModelPair
from engine.model.static_cache import StaticRaggedCache, make_cache

# Every count up to 17 (a batch-1 verify of depth 0..16), then coarser: CPU GEMM kernels change at small
# row counts (a jump between neighbouring sizes: docs/journal.md, "Code history moved out of engine/"), so no interpolation there.
CURVE_TOKENS = tuple(range(1, 18)) + (20, 24, 32, 48, 64, 96, 128, 192, 256)
CURVE_CONTEXT = 128
CURVE_FORMAT = "speclab.pass_curve/2"  # /2: interleaved sweeps (`measure_curve`); a /1 curve is measured again
CURVE_SWEEPS = 3
_memory: dict[str, PassCurve] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class PassCurve:
    tokens: tuple[int, ...]  # tokens per pass, increasing
    ms: tuple[float, ...]  # median time of one target pass at each
    context: int  # KV-cache length per row while measuring
    key: str  # what it was measured on (device name, model, dtype, threads, torch)
    measured_at: str  # ISO date and time

    def __post_init__(self):
        if len(self.tokens) < 2 or len(self.tokens) != len(self.ms) or list(self.tokens) != sorted(set(self.tokens)):
            raise ValueError("a pass curve needs at least two increasing token counts, one time each")
        if not all(m > 0 for m in self.ms):
            raise ValueError("pass times must be positive")

    def time_ms(self, tokens: float) -> float:
        """Predicted time of one pass carrying `tokens` tokens (linear between points, extrapolated past)."""
        xs, ys = self.tokens, self.ms
        if tokens <= xs[0]:
            return ys[0]
        i = min(max(bisect_left(xs, tokens), 1), len(xs) - 1)
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return max(y0 + (y1 - y0) * (tokens - x0) / (x1 - x0), ys[0])

    def to_dict(self) -> dict:
        return {"format": CURVE_FORMAT} | asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> PassCurve:
        if not isinstance(data, dict) or data.get("format") != CURVE_FORMAT:
            raise ValueError(f"not a {CURVE_FORMAT} file")
        return cls(
            tokens=tuple(int(t) for t in data["tokens"]),
            ms=tuple(float(m) for m in data["ms"]),
            context=int(data["context"]),
            key=str(data["key"]),
            measured_at=str(data["measured_at"]),
        )


def curve_key(pair) -> str:
    # the curve times the passes the decode loop runs by default: the device's default backend (engine/model/backend.py);
    # "torch" keeps the key it had before backends were named, the native kernels add their source's hash
    key = pass_key(pair.device)
    graphs = "" if key == "torch" else f" | fast {key}"
    return f"{device_name(pair.device)} | {pair.target_name} | {pair.dtype_name} | torch {torch.__version__}{graphs}"


def _grid(pair, tokens=CURVE_TOKENS, context: int = CURVE_CONTEXT) -> tuple[int, ...]:
    return tuple(t for t in tokens if t <= pair.max_context - context)


def measure_curve(pair, tokens=CURVE_TOKENS, context: int = CURVE_CONTEXT, repeats: int = 2, sweeps: int = CURVE_SWEEPS) -> PassCurve:
    """Time the target's passes now (engine.decoding.passcurve.pass_costs at batch 1): `sweeps` sweeps over every
    size, `repeats` timed passes of each size per sweep, each size's fastest over all of them. The sweeps interleave
    the sizes in time, so a burst of other work lifts a few passes of one sweep, not a whole range of sizes (timed
    in one sweep under load, a curve's shape was wrong enough that goodput, which prices the sizes it never runs
    from it, took speculation at batch 16 for hopeless: docs/journal.md, "Code history moved out of engine/")."""

    tokens = _grid(pair, tokens, context)
    ms = [float("inf")] * len(tokens)
    for _ in range(sweeps):
        rows = pass_costs(pair, [1], list(tokens), context=context, repeats=repeats, stat=min, cuda_graphs="off")
        ms = [min(old, row["ms"]) for old, row in zip(ms, rows)]
    # A larger pass can time faster (noise, or a kernel that suits it better): keep the curve non-decreasing,
    # as the policy assumes, by capping each point at the fastest larger pass (a spike cannot lift the rest).
    for i in range(len(ms) - 2, -1, -1):
        ms[i] = min(ms[i], ms[i + 1])
    return PassCurve(
        tokens=tokens,
        ms=tuple(ms),
        context=context,
        key=curve_key(pair),
        measured_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )


def curves_dir() -> Path:
    """Where measured curves are kept: pass_curves in the data folder (engine/formats.py, `data_dir`: a curve takes
    seconds to measure, so a Space keeps it across restarts), as the class store and goodput's state are."""
    return data_dir() / "pass_curves"


def pass_curve(pair, refresh: bool = False) -> PassCurve:
    """This machine's curve for `pair`'s target: from memory, else from `curves_dir()`, else measured now."""
    key = curve_key(pair)
    path = curves_dir() / (hashlib.sha1(key.encode()).hexdigest()[:16] + ".json")
    with _lock:
        if not refresh and key in _memory:
            return _memory[key]

        def read(data: dict) -> PassCurve | None:  # another machine or model, or an older grid of pass sizes: None
            curve = PassCurve.from_dict(data)
            return curve if curve.key == key and curve.tokens == _grid(pair) else None

        _memory[key] = kept(path, read, lambda: measure_curve(pair), refresh)
        return _memory[key]


def kept(path: Path, read, measure, refresh: bool = False):
    """A measured thing kept as JSON at `path`: `read(data)` of the file where it trusts it (None, or a ValueError,
    KeyError or TypeError: not trusted), else `measure()` written there (atomically; a read-only folder keeps it in
    memory only). `refresh`: measure again whatever the file holds. Each object's `to_dict` is what is written."""
    found = None
    if not refresh and path.exists():
        try:
            found = read(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            found = None  # unreadable or stale: measure again
    if found is None:
        found = measure()
        write_kept(path, found)
    return found


def write_kept(path: Path, thing) -> None:
    """Write `thing.to_dict()` to `path` atomically (a read-only folder: not written)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(thing.to_dict(), indent=1))
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache folder: keep it in memory only


def pass_costs(
    pair: ModelPair,
    batches: list[int],
    tokens: list[int],
    context: int = 150,
    repeats: int = 5,
    which: str = "target",
    stat=statistics.median,
    cuda_graphs: str = "off",
    backend: str = "auto",
) -> list[dict]:
    """Measured time of ONE forward pass with `batch` rows x `tokens` new tokens over a `context`-token KV cache
    (every row the same context, prefilled once and copied: engine/model/kvcache.py's shared prefix).

    This is the curve behind the whole story: while a pass is memory-bound its time hardly grows with
    tokens per pass (batch x (depth+1)); past the ridge point it grows linearly (compute-bound).
    stat: how the repeats are summarised (the median; the load-aware policies' cached curve takes the
    fastest, which a busy machine disturbs least).
    backend, cuda_graphs: DecodeConfig's (engine/model/backend.py; "auto" and "off": the device's default pass); with
    the "cuda_graphs" backend on CUDA each shape is captured once (in the warm-up pass) and its replays are timed."""

    model = pair.target if which == "target" else pair.weights("draft")
    if model is None:
        raise ValueError("no draft model loaded")
    costs = pair.target_costs if which == "target" else ModelCosts.from_model(model)  # the full head here
    gen = torch.Generator().manual_seed(0)
    rows = []
    with torch.inference_mode():
        for batch in batches:
            cfg = DecodeConfig(max_new_tokens=max(tokens), cuda_graphs=cuda_graphs, backend=backend)
            cache = make_cache(model, pair.device, costs, cfg)
            row = torch.randint(100, 40000, (context,), generator=gen).tolist()
            cache.prefill([row] * batch, pad_id=0, shared=context - 1)  # one context, prefilled once, copied to every row
            for n in tokens:
                ids = torch.randint(100, 40000, (batch, n), generator=gen).to(pair.device)
                times = []
                for i in range(repeats + 1):
                    with StepTimer(pair.device) as timer:
                        cache.forward(ids)
                    cache.keep(cache.lengths - n)  # roll back: every pass sees the same context
                    if i == 0 and isinstance(cache, StaticRaggedCache):
                        cache.graphs.capture_pending()  # the warm-up pass met this shape: capture it before timing
                    if i:  # the first is a warm-up
                        times.append(timer.ms)
                cache.take_counts()
                ms = stat(times)
                flops = costs.forward_flops(batch, n, context)
                nbytes = costs.forward_bytes(batch, n, context)
                rows.append(
                    {
                        "batch": batch,
                        "new_tokens": n,
                        "tokens_per_pass": batch * n,
                        "context": context,
                        "ms": ms,
                        "cuda_graphs": cuda_graphs,
                        "backend": cache.backend.name,
                        "graphs_captured": getattr(getattr(cache, "graphs", None), "captured", 0),
                        "ms_per_token": ms / (batch * n),
                        "flops": flops,
                        "bytes": nbytes,
                        "achieved_flops": flops / (ms / 1000),
                        "achieved_bandwidth": nbytes / (ms / 1000),
                    }
                )
    return rows
