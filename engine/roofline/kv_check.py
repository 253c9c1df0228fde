"""The predictor's KV term checked against one machine's measured passes at several contexts.

A pass over `context` cached tokens per row streams every weight once plus each row's KV cache (engine/costs.py,
`ModelCosts.forward_bytes`); the predictor prices it at the peaks (`engine.roofline.predictor.pass_ms`). A check
sets passes measured on one machine (batch × new tokens per row × context, each the median of interleaved rounds,
with their spread) against the predictor's time for the same pass at that machine's probed peaks, no overhead added
(the overheads the predictor knows were measured on a GPU):

    ratio = predicted ms / measured ms        (below 1: the model is optimistic; 1 = exact)

and, per batch × new tokens, what growing the context added: measured ms at the longest context minus at the
shortest, against the predictor's (the weights' share is the same at every context, so this is the KV term alone).

The recording (`speclab.kv_check/1`, written by scripts/record/record_kv_check.py) holds the machine, dtype, date, the
probed peaks, the model's shape (ModelCosts' fields) and the passes. It is read like every file SpecLab reads back:
size-capped, parsed with engine/checks.py's limits, checked field by field; a bad file is refused with one line
naming the file and the field (`RecordingError`). Pure numbers; no torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from engine.checks import Checker
from engine.costs import ModelCosts
from engine.roofline.predictor import Roof, pass_ms, regime
from engine.roofline.recordings import RecordingError, read_json

KV_SCHEMA = "speclab.kv_check/1"
MAX_KV_BYTES = 256 << 10
MAX_PASSES = 256
ROOT = Path(__file__).resolve().parents[2]
KV_RECORDING = ROOT / "assets" / "predictor" / "kv_check.json"
COST_FIELDS = tuple(f.name for f in dataclasses.fields(ModelCosts) if f.name != "resident_bytes")  # resident_bytes: optional
_PASS = {"batch": "nat", "new_tokens": "nat", "context": "nat", "ms": "num+", "ms_low": "num+", "ms_high": "num+"}
KV_SPEC = {
    "schema": (KV_SCHEMA,),
    "machine": "str",
    "device": ("cpu", "cuda", "mps"),
    "dtype": "str",
    "date": "date",
    "note": "str",
    "source": "str",
    "torch": "str",
    "backend": "str",
    "rounds": "nat",
    "repeats": "nat",
    "probe": {"peak_bandwidth": "num+", "peak_flops": "num+", "quick": "bool", "...": None},
    "model": {"name": "str", **dict.fromkeys(COST_FIELDS, "nat"), "resident_bytes?": "nat"},
    "passes": [_PASS, MAX_PASSES],
}


@dataclass(frozen=True)
class MeasuredPass:
    batch: int
    new_tokens: int
    context: int
    ms: float  # the median over rounds
    ms_low: float  # the fastest and slowest round
    ms_high: float


@dataclass(frozen=True)
class KvRecording:
    machine: str
    device: str  # "cpu", "cuda" or "mps"
    dtype: str
    date: str
    note: str
    source: str
    backend: str
    rounds: int
    repeats: int
    quick_probe: bool
    roof: Roof
    model_name: str
    costs: ModelCosts
    passes: tuple[MeasuredPass, ...]


@dataclass(frozen=True)
class KvRow:
    """One measured pass against the predictor's time for it."""

    batch: int
    new_tokens: int
    context: int
    measured_ms: float
    low_ms: float
    high_ms: float
    predicted_ms: float
    kv_share: float  # of the pass's bytes, the KV cache's (the rest: the weights)
    bound: str  # what the model says limits it: "memory" or "compute"

    @property
    def ratio(self) -> float:
        return self.predicted_ms / self.measured_ms


@dataclass(frozen=True)
class KvGrowth:
    """What growing the context from `short` to `long` added to one batch × new-tokens pass, measured and modelled."""

    batch: int
    new_tokens: int
    short: int
    long: int
    measured_ms: float
    predicted_ms: float

    @property
    def ratio(self) -> float | None:
        return self.predicted_ms / self.measured_ms if self.measured_ms > 0 else None


def parse_kv_check(data, source: str) -> KvRecording:
    """A checked recording from parsed JSON (see the module docstring); RecordingError naming the field if it is not one."""
    check = Checker(RecordingError, source, max_text=300)
    check.spec(data, KV_SPEC, "the recording")
    model = data["model"]
    if not (model["n_layers"] and model["n_kv_heads"] and model["head_dim"] and model["elem_bytes"] in (1, 2, 4)):
        check.fail("model", "must have layers, KV heads, a head size and 1, 2 or 4 bytes per element", model)
    if model["head_params"] > model["linear_params"]:
        check.fail("model.head_params", "must be at most linear_params (the head is one of the linear layers)", model["head_params"])
    seen = set()
    for i, row in enumerate(data["passes"]):
        if row["batch"] < 1 or row["new_tokens"] < 1:
            check.fail(f"passes[{i}]", "must have batch and new_tokens of at least 1", (row["batch"], row["new_tokens"]))
        if not 0 < row["ms_low"] <= row["ms"] <= row["ms_high"]:
            check.fail(f"passes[{i}]", "must have 0 < ms_low <= ms <= ms_high", (row["ms_low"], row["ms"], row["ms_high"]))
        shape = (row["batch"], row["new_tokens"], row["context"])
        if shape in seen:
            check.fail(f"passes[{i}]", "repeats an earlier pass's batch, new_tokens and context", shape)
        seen.add(shape)
    if not seen:
        check.fail("passes", "must hold at least one pass")
    probe = data["probe"]
    if not (probe["peak_bandwidth"] > 0 and probe["peak_flops"] > 0):
        check.fail("probe", "must have positive peaks", (probe["peak_bandwidth"], probe["peak_flops"]))
    return KvRecording(
        **{k: data[k] for k in ("machine", "device", "dtype", "date", "note", "source", "backend", "rounds", "repeats")},
        quick_probe=probe["quick"],
        roof=Roof(f"{data['machine']}, probed", probe["peak_bandwidth"], probe["peak_flops"]),
        model_name=model["name"],
        costs=ModelCosts(**{k: model[k] for k in COST_FIELDS}, resident_bytes=model.get("resident_bytes", 0)),
        passes=tuple(MeasuredPass(**row) for row in data["passes"]),
    )


def read_kv_check(path: Path = KV_RECORDING) -> KvRecording:
    """Read one recording file (size-capped, parsed with engine/checks.py's caps) and check it."""
    return parse_kv_check(*read_json(path, MAX_KV_BYTES, "a KV check"))


def kv_rows(recording: KvRecording) -> list[KvRow]:
    """Every measured pass against the predictor at the recording's probed peaks, no overhead; by batch, tokens, context."""
    costs, roof = recording.costs, recording.roof
    rows = []
    for p in sorted(recording.passes, key=lambda p: (p.batch, p.new_tokens, p.context)):
        kv = p.batch * costs.kv_bytes_per_token * (p.context + p.new_tokens)
        rows.append(
            KvRow(
                batch=p.batch,
                new_tokens=p.new_tokens,
                context=p.context,
                measured_ms=p.ms,
                low_ms=p.ms_low,
                high_ms=p.ms_high,
                predicted_ms=pass_ms(costs, roof, p.batch, p.new_tokens, p.context, "none"),
                kv_share=kv / costs.forward_bytes(p.batch, p.new_tokens, p.context),
                bound=regime(costs, roof, p.batch, p.new_tokens, p.context, "none"),
            )
        )
    return rows


def kv_growth(rows: list[KvRow]) -> list[KvGrowth]:
    """Per batch × new tokens measured at two contexts or more: the ms the longest context added over the shortest."""
    groups: dict[tuple[int, int], list[KvRow]] = {}
    for r in rows:
        groups.setdefault((r.batch, r.new_tokens), []).append(r)
    out = []
    for (batch, new_tokens), group in sorted(groups.items()):
        if len(group) < 2:
            continue
        short, long = min(group, key=lambda r: r.context), max(group, key=lambda r: r.context)
        out.append(
            KvGrowth(
                batch,
                new_tokens,
                short.context,
                long.context,
                long.measured_ms - short.measured_ms,
                long.predicted_ms - short.predicted_ms,
            )
        )
    return out
