"""Pass-cost curves per (batch, context), their room and knee, and the price of a row's KV read at a context.

The pass curve (engine/decoding/passcurve.py) is measured at batch 1 over a short cache. At a long context every
pass of B rows also reads each row's KV cache, once whatever the pass's tokens per row, so the first pass of a
(batch, context) curve (one token per row) is dearer and extra tokens per row ride on a larger share for free: the
room and the knee (engine/room.py: 1.25x and 1.5x that first pass) move with the context. `measure_context_curves`
times them in interleaved rounds (engine/decoding/context_passes.py `context_rounds`, one batch at a time, every
context and every tokens-per-row size in turn); `context_curve` keeps one per (machine, model, batch, context, grid)
as the pass curve is kept (memory, then `passcurve.curves_dir()`/context/, else measured now).

`kv_ms_per_token` is what goodput's prior (engine/decoding/goodput.py) prices a cached token's read at: the
target's KV bytes per token (engine/costs.py) over the rate this machine's passes read KV at (`kv_read`: measured
once, from a short and a long cache's passes, and kept beside the curves). Not the probed peak: a pass's attention
reads its cache well below it, and a quick probe beside other work read anywhere from a quarter of the peak to all of it.
`kv_per_query` is what each more new token per row adds to that read: 0 where attention streams the cache once for
every query token of a row (memory-bound, as on a GPU); on a CPU whose attention is bound by its arithmetic on the cache,
a share of it (measured: docs/engine.md, "goodput at a long context").
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
from dataclasses import dataclass

from engine.decoding.context_passes import context_rounds
from engine.decoding.passcurve import CURVE_CONTEXT, PassCurve, curve_key, curves_dir, kept, write_kept
from engine.hardware import probe
from engine.room import knee_tokens, room_tokens

CONTEXT_FORMAT = "speclab.context_curve/1"
KV_FORMAT = "speclab.kv_read/3"  # /2 added per_query; /3 measures it from the second token per row
KV_BATCHES, KV_CONTEXT = (8, 16), 1024  # the KV read is timed at these batches, over CURVE_CONTEXT and this many cached tokens
# ... with one and with this many new tokens per row (`per_query`): the second token of a row costs the most (on a CPU
# whose attention is bound by its arithmetic the extra per token falls as a row's tokens share each column read), and
# it is the one a draft's first position adds, so pricing every token at it errs toward plain
KV_QUERIES = 2
CONTEXT_TOKENS = (1, 2, 3, 4, 6, 8)  # new tokens per row: a verify pass of depth 0..7 measured, no interpolation to 4
_memory: dict[tuple, ContextCurve | KVRead] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class ContextCurve:
    batch: int  # rows per pass, every row holding `curve.context` cached tokens
    curve: PassCurve  # time of one pass against its tokens (batch x new tokens per row)

    def __post_init__(self):
        if self.batch < 1 or any(t % self.batch for t in self.curve.tokens):
            raise ValueError("a context curve's tokens per pass are its batch times whole tokens per row")

    @property
    def context(self) -> int:
        return self.curve.context

    def room(self) -> int:
        """The most tokens per pass within engine.room.ROOM of one token per row (engine/room.py)."""
        return room_tokens(self.curve.tokens, self.curve.ms)

    def knee(self) -> float | None:
        """Tokens per pass where a pass reaches engine.room.KNEE x one token per row (None: past the curve)."""
        return knee_tokens(self.curve.tokens, self.curve.ms)

    def summary(self) -> dict:
        """{"batch", "context", "one_token_ms", "room" (tokens per pass), "room_per_row", "knee", "knee_per_row"}."""
        room, knee = self.room(), self.knee()
        return {
            "batch": self.batch,
            "context": self.context,
            "one_token_ms": self.curve.ms[0],
            "room": room,
            "room_per_row": room / self.batch,
            "knee": knee,
            "knee_per_row": None if knee is None else knee / self.batch,
        }

    def to_dict(self) -> dict:
        return {"format": CONTEXT_FORMAT, "batch": self.batch, "curve": self.curve.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> ContextCurve:
        if not isinstance(data, dict) or data.get("format") != CONTEXT_FORMAT:
            raise ValueError(f"not a {CONTEXT_FORMAT} file")
        return cls(batch=int(data["batch"]), curve=PassCurve.from_dict(data["curve"]))


def measure_context_curves(
    pair, batches: list[int], contexts: list[int], tokens=CONTEXT_TOKENS, rounds: int = 3, repeats: int = 3
) -> tuple[list[ContextCurve], list[dict]]:
    """Time passes of every batch x context x new tokens per row (`context_rounds`: interleaved rounds within a batch).
    Returns one curve per (batch, context), in that order, each size at its fastest round (other work on the machine
    lifts a round, never lowers one, as the pass curve keeps the fastest sweep), and the timed rows (median over rounds)."""
    if not batches or min(batches) < 1:
        raise ValueError("context curves need batch sizes >= 1")
    tokens = sorted(set(tokens))
    if len(tokens) < 2:
        raise ValueError("a context curve needs at least two sizes of new tokens per row (e.g. 1,2,4)")
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    curves, rows = [], []
    for batch in batches:
        timed = context_rounds(pair, batch, tokens, list(contexts), rounds=rounds, repeats=repeats)
        rows += timed
        for context in contexts:
            ms = tuple(min(r["ms_rounds"]) for r in timed if r["context"] == context)  # the fastest round: a burst lifts one
            curve = PassCurve(tuple(batch * n for n in tokens), ms, context, curve_key(pair), now)
            curves.append(ContextCurve(batch, curve))
    return curves, rows


def _path(key: tuple):
    return curves_dir() / "context" / (hashlib.sha1(json.dumps(list(key)).encode()).hexdigest()[:16] + ".json")


def _key(pair, batch: int, context: int, tokens) -> tuple:
    return (curve_key(pair), batch, context, tuple(sorted(set(tokens))))


def context_curve(pair, batch: int, context: int, tokens=CONTEXT_TOKENS, refresh: bool = False) -> ContextCurve:
    """This machine's (batch, context) curve for `pair`'s target: from memory, else from its file, else measured now
    (a few seconds at a long context: the cache is prefilled once and shared by the rows)."""
    key = _key(pair, batch, context, tokens)
    with _lock:
        if not refresh and key in _memory:
            return _memory[key]

        def read(data: dict) -> ContextCurve | None:  # another machine, model, batch, context or grid: None
            found = ContextCurve.from_dict(data)
            grid = tuple(batch * n for n in key[3])
            fits = (found.curve.key, found.batch, found.context, found.curve.tokens) == (key[0], batch, context, grid)
            return found if fits else None

        _memory[key] = kept(_path(key), read, lambda: measure_context_curves(pair, [batch], [context], tokens)[0][0], refresh)
        return _memory[key]


def keep_curves(pair, curves: list[ContextCurve], tokens) -> None:
    """Keep freshly measured curves (`python -m engine passes --context ...`) for later `context_curve` calls."""
    with _lock:
        for curve in curves:
            key = _key(pair, curve.batch, curve.context, tokens)
            _memory[key] = curve
            write_kept(_path(key), curve)


@dataclass(frozen=True)
class KVRead:
    """How fast this machine's passes read KV cache: bytes per second, from one-token-per-row passes over a short and
    a long cache, and what each more new token per row adds to that time (`measure_kv_read`)."""

    bandwidth: float  # bytes of KV cache read per second by a pass of one new token per row
    key: str  # what it was measured on (passcurve.curve_key)
    measured_at: str
    per_query: float = 0.0  # each more new token per row adds this share of the one-token read (0: the cache read once)

    def to_dict(self) -> dict:
        return {
            "format": KV_FORMAT,
            "bandwidth": self.bandwidth,
            "per_query": self.per_query,
            "key": self.key,
            "measured_at": self.measured_at,
        }

    @classmethod
    def from_dict(cls, data: dict) -> KVRead:
        if not isinstance(data, dict) or data.get("format") != KV_FORMAT or not float(data["bandwidth"]) > 0:
            raise ValueError(f"not a {KV_FORMAT} file")
        per_query = float(data["per_query"])
        if not 0.0 <= per_query <= 1.0:
            raise ValueError(f"per_query {per_query} is outside 0..1")
        return cls(float(data["bandwidth"]), str(data["key"]), str(data["measured_at"]), per_query)


def measure_kv_read(pair) -> KVRead:
    """Time 1 and KV_QUERIES new tokens per row over CURVE_CONTEXT and over KV_CONTEXT cached tokens at each of
    KV_BATCHES (interleaved rounds). The bandwidth, at KV_BATCHES[0]: the extra KV bytes (engine/costs.py) over the extra
    time of one token per row, each size at its fastest round (a burst of other work lifts a round, never lowers one);
    where that difference drowns in noise (not above 0), the quick probe's peak stands in. `per_query`: how much more
    the long cache cost the KV_QUERIES-token pass than the one-token pass, per more token per row, as a share of the
    one-token extra, each size at its fastest round, the mean over the batches (one batch's reading moves by a third
    between runs), kept within 0..1 (0 where the one-token difference drowned)."""
    long = min(KV_CONTEXT, pair.max_context - KV_QUERIES - 1)
    shares, bandwidth = [], None
    for batch in KV_BATCHES:
        rows = context_rounds(pair, batch, [1, KV_QUERIES], [CURVE_CONTEXT, long], rounds=7, repeats=3)
        fastest = {(r["context"], r["new_tokens"]): min(r["ms_rounds"]) for r in rows}
        one = fastest[long, 1] - fastest[CURVE_CONTEXT, 1]  # the long cache's extra time at one token per row
        if bandwidth is None:
            extra_bytes = [r["bytes"] for r in rows if r["new_tokens"] == 1]  # [short, long]: contexts in order
            bandwidth = (
                (extra_bytes[1] - extra_bytes[0]) / (one / 1000) if one > 0 else probe(pair.device, pair.dtype, quick=True).peak_bandwidth
            )
        more = (fastest[long, KV_QUERIES] - fastest[CURVE_CONTEXT, KV_QUERIES]) / one - 1.0 if one > 0 else 0.0
        shares.append(min(1.0, max(0.0, more / (KV_QUERIES - 1))))
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return KVRead(bandwidth, curve_key(pair), now, sum(shares) / len(shares))


def kv_read(pair, refresh: bool = False) -> KVRead:
    """This machine's KV read rate for `pair`'s target: from memory, else from its file, else measured now (seconds)."""
    key = ("kv_read", curve_key(pair))
    with _lock:
        if not refresh and key in _memory:
            return _memory[key]

        def read(data: dict) -> KVRead | None:  # another machine or model: None
            found = KVRead.from_dict(data)
            return found if found.key == key[1] else None

        _memory[key] = kept(_path(key), read, lambda: measure_kv_read(pair), refresh)
        return _memory[key]


def kv_ms_per_token(pair) -> float:
    """ms a pass spends reading one cached token of one row: the target's KV bytes per token (keys and values, every
    layer; engine/costs.py) over the rate this machine's passes read KV at (`kv_read`, measured once and kept)."""
    return 1000.0 * pair.target_costs.kv_bytes_per_token / kv_read(pair).bandwidth


def kv_per_query(pair) -> float:
    """What each more new token per row adds to a pass's KV time, as a share of one token's (`KVRead.per_query`)."""
    return kv_read(pair).per_query
