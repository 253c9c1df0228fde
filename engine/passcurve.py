"""The target's measured pass-cost curve: time of ONE forward pass against tokens per pass, on this machine.

This is the curve behind the whole story (engine.bench.pass_costs draws it for the Sweep): flat while a
pass is memory- or overhead-bound, then rising once it is compute-bound. The load-aware policies
(engine/policies.py) read it to price a verify pass of batch x (k + 1) tokens before they choose k.

It is measured, never assumed: the first time a policy needs it for a (machine, model, dtype, threads)
it is timed (a few seconds on a CPU: 1..256 tokens, batch 1, a 128-token context, median of 3) and
cached as JSON in the cache folder ($SPECLAB_CACHE/pass_curves/), so later runs start at once.
Between two measured points the time is interpolated linearly; past the last one it is extrapolated
along the last segment's slope (compute-bound: linear in tokens).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
from bisect import bisect_left
from dataclasses import asdict, dataclass

import torch

CURVE_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CURVE_CONTEXT = 128
CURVE_FORMAT = "speclab.pass_curve/1"
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
        return cls(tokens=tuple(int(t) for t in data["tokens"]), ms=tuple(float(m) for m in data["ms"]),
                   context=int(data["context"]), key=str(data["key"]), measured_at=str(data["measured_at"]))


def curve_key(pair) -> str:
    from .hardware import device_name

    return f"{device_name(pair.device)} | {pair.target_name} | {pair.dtype_name} | torch {torch.__version__}"


def measure_curve(pair, tokens=CURVE_TOKENS, context: int = CURVE_CONTEXT, repeats: int = 3) -> PassCurve:
    """Time the target's passes now (engine.bench.pass_costs at batch 1)."""
    from .bench import pass_costs

    limit = pair.max_context - context
    tokens = tuple(t for t in tokens if t <= limit)
    rows = pass_costs(pair, [1], list(tokens), context=context, repeats=repeats)
    # a noisy machine can time a larger pass faster: keep the curve non-decreasing, as the policy assumes
    ms, floor = [], 0.0
    for row in rows:
        floor = max(floor, row["ms"])
        ms.append(floor)
    return PassCurve(tokens=tokens, ms=tuple(ms), context=context, key=curve_key(pair),
                     measured_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))


def pass_curve(pair, refresh: bool = False) -> PassCurve:
    """This machine's curve for `pair`'s target: from memory, else from the cache folder, else measured now."""
    from .models import cache_dir

    key = curve_key(pair)
    path = cache_dir() / "pass_curves" / (hashlib.sha1(key.encode()).hexdigest()[:16] + ".json")
    with _lock:
        if not refresh and key in _memory:
            return _memory[key]
        curve = None
        if not refresh and path.exists():
            try:
                curve = PassCurve.from_dict(json.loads(path.read_text()))
            except (OSError, ValueError, KeyError, TypeError):
                curve = None  # unreadable or stale: measure again
            if curve is not None and curve.key != key:
                curve = None
        if curve is None:
            curve = measure_curve(pair)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(curve.to_dict(), indent=1))
                tmp.replace(path)
            except OSError:
                pass  # a read-only cache folder: keep it in memory only
        _memory[key] = curve
        return curve
