"""Recorded pass times from GPU runs, read through a strict loader, and the predictor checked against them.

The files are the JSON reports SpecLab's GPU scripts write (labelled with device, dtype, torch and date):
- scripts/investigate/gpu_graphs.py: per shape, passes with `eager_ms` and `graph_ms`; prefill passes with no earlier
  context and the output head on the last position only (`logits_to_keep=1`);
- scripts/record/gpu_bench.py: per shape, passes with `ms`, the engine's eager forward (`engine.bench.pass_costs`)
  over a `context`-token cache, logits for every position;
- any later report in assets/recordings/*.json of either shape; a pass row may also say `mode` ("graph" or
  "eager"), `context` and `logits_tokens` explicitly, which then win over the defaults above.
A file that is not such a report is refused with one line naming the file and the field; the others load.
Nothing in a file is executed; sizes, counts and numbers are capped and checked before use.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from engine.roofline.architectures import architecture
from engine.roofline.gpus import DTYPE_BYTES, gpu_for_device
from engine.roofline.predictor import Roof, model_error, pass_ms

MAX_FILE_BYTES = 8 << 20
MAX_ROWS = 20_000
MODES = ("graph", "eager")
ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = ("docs/measurements/h200-gpu_graphs.json", "docs/measurements/h200-gpu_bench.json")


class RecordingError(ValueError):
    """A recording file that cannot be used (one line: the file and the field)."""


@dataclass(frozen=True)
class PassRecord:
    source: str  # file it came from (relative to the project root where possible)
    device: str  # as torch named it ("NVIDIA H200")
    dtype: str
    date: str
    torch: str
    shape: str  # the script's shape name ("smollm2-1.7b")
    mode: str  # "graph" or "eager"
    batch: int
    new_tokens: int
    context: int
    logits_tokens: int | None  # positions per row through the output head; None = all of them
    ms: float
    peak_bandwidth: float | None = None  # the run's own probed peaks, where the report has them
    peak_flops: float | None = None

    @property
    def tokens_per_pass(self) -> int:
        return self.batch * self.new_tokens


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _field(obj: dict, key: str, kind, where: str, default=None, required: bool = True):
    value = obj.get(key, default)
    if value is None and not required:
        return None
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 10_000_000
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    else:
        ok = isinstance(value, str) and 0 < len(value) <= 200
    if not ok:
        raise RecordingError(f"{where}: field '{key}' is missing or not a valid {kind.__name__}")
    return float(value) if kind is float else value


def parse_report(data, source: str) -> list[PassRecord]:
    """The pass records of one report (see the module docstring); RecordingError if it is not one."""
    if not isinstance(data, dict):
        raise RecordingError(f"{source}: not a JSON object")
    device = _field(data, "device", str, source)
    dtype = _field(data, "dtype", str, source)
    if dtype not in DTYPE_BYTES:
        raise RecordingError(f"{source}: field 'dtype' must be one of {', '.join(DTYPE_BYTES)}; got {dtype[:40]!r}")
    date = _field(data, "date", str, source)
    torch_version = _field(data, "torch", str, source, default="unknown")
    peaks = {k: _field(data, k, float, source, required=False) for k in ("peak_bandwidth", "peak_flops")}
    shapes = data.get("shapes")
    if not isinstance(shapes, list) or not shapes:
        raise RecordingError(f"{source}: field 'shapes' must be a non-empty list")
    records = []
    for i, shape in enumerate(shapes):
        where = f"{source}: shapes[{i}]"
        if not isinstance(shape, dict):
            raise RecordingError(f"{where} is not an object")
        if "error" in shape and "passes" not in shape:
            continue  # the script recorded that this shape failed; nothing measured
        name = _field(shape, "shape", str, where)
        passes = shape.get("passes")
        if not isinstance(passes, list):
            raise RecordingError(f"{where}: field 'passes' must be a list")
        for j, row in enumerate(passes):
            records.extend(_rows(row, shape, f"{where}.passes[{j}]", name, device, dtype, date, torch_version, peaks, source))
            if len(records) > MAX_ROWS:
                raise RecordingError(f"{source}: more than {MAX_ROWS} passes")
    return records


def _rows(row, shape: dict, where: str, name, device, dtype, date, torch_version, peaks, source) -> list[PassRecord]:
    """One pass row -> one record per timed mode it holds."""
    if not isinstance(row, dict):
        raise RecordingError(f"{where} is not an object")
    batch = _field(row, "batch", int, where)
    new_tokens = _field(row, "new_tokens", int, where)
    if batch < 1 or new_tokens < 1:
        raise RecordingError(f"{where}: batch and new_tokens must be at least 1")
    timed = {}
    if "ms" in row:
        mode = row.get("mode", shape.get("mode", "eager"))
        if mode not in MODES:
            raise RecordingError(f"{where}: field 'mode' must be one of {', '.join(MODES)}")
        timed[mode] = (_field(row, "ms", float, where), None)  # engine.bench.pass_costs: logits for every position
    for mode in MODES:
        if row.get(f"{mode}_ms") is not None:
            timed[mode] = (_field(row, f"{mode}_ms", float, where), 1)  # scripts/investigate/gpu_graphs.py: logits_to_keep=1
    if not timed:
        raise RecordingError(f"{where}: no time (ms, graph_ms or eager_ms)")
    context = _field(row, "context", int, where, default=shape.get("context", 0))
    out = []
    for mode, (ms, logits_default) in timed.items():
        logits = _field(row, "logits_tokens", int, where, default=logits_default, required=False)
        out.append(
            PassRecord(
                source,
                device,
                dtype,
                date,
                torch_version,
                name,
                mode,
                batch,
                new_tokens,
                context,
                logits,
                ms,
                peaks["peak_bandwidth"],
                peaks["peak_flops"],
            )
        )
    return out


def load_report(path: Path) -> list[PassRecord]:
    """Read one report file (size-capped, no NaN/Infinity) and parse it."""
    path = Path(path)
    try:
        source = str(path.resolve().relative_to(ROOT))
    except ValueError:
        source = path.name
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise RecordingError(f"{source}: larger than {MAX_FILE_BYTES >> 20} MB")
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_refuse_constant)
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordingError(f"{source}: cannot be read ({type(exc).__name__})") from None
    except (json.JSONDecodeError, ValueError) as exc:
        if isinstance(exc, RecordingError):
            raise
        raise RecordingError(f"{source}: not valid JSON ({str(exc).splitlines()[0][:120]})") from None
    except RecursionError:
        raise RecordingError(f"{source}: nested too deeply") from None
    return parse_report(data, source)


def recording_paths(root: Path = ROOT) -> list[Path]:
    """The recordings that ship: the H200 reports in docs/measurements/, then assets/recordings/*.json."""
    paths = [root / p for p in BUILT_IN if (root / p).is_file()]
    folder = root / "assets" / "recordings"
    if folder.is_dir():
        paths += sorted(p for p in folder.glob("*.json") if p.is_file())
    return paths


def load_recordings(paths: list[Path] | None = None) -> tuple[list[PassRecord], list[str]]:
    """All records of the files that load, and one line per file that does not."""
    records, refused = [], []
    for path in recording_paths() if paths is None else paths:
        try:
            records.extend(load_report(path))
        except RecordingError as exc:
            refused.append(str(exc))
    return records, refused


# --- the predictor against the records ---------------------------------------------------------
def predict_record(record: PassRecord, peaks: str = "sheet") -> float | None:
    """The predictor's time for a recorded pass on the recorded GPU, with the floor of its mode.

    peaks: "sheet" = the GPU's data sheet; "probed" = the run's own probed peaks. None where the device is
    not in the GPU table (sheet), the run has no probe (probed), or the shape is not a known architecture."""
    try:
        arch = architecture(record.shape)
    except ValueError:
        return None
    costs = arch.costs(record.dtype)
    if peaks == "probed":
        if not (record.peak_bandwidth and record.peak_flops):
            return None
        roof = Roof(f"{record.device}, probed", record.peak_bandwidth, record.peak_flops)
    else:
        gpu = gpu_for_device(record.device)
        if gpu is None or gpu.flops.get(record.dtype) is None:
            return None
        roof = Roof.from_gpu(gpu, record.dtype)
    return pass_ms(costs, roof, record.batch, record.new_tokens, record.context, record.mode, record.logits_tokens)


@dataclass(frozen=True)
class ErrorRow:
    device: str
    shape: str
    mode: str
    source: str
    date: str
    points: int
    error_sheet: float | None  # median |pred/meas - 1| with data-sheet peaks
    error_probed: float | None  # ... with the run's probed peaks
    ratio_sheet: float | None  # median pred/meas (< 1: the model is optimistic)


def check(records: list[PassRecord]) -> list[ErrorRow]:
    """The model's error per (file, device, shape, mode) group of records."""
    groups: dict[tuple, list[PassRecord]] = {}
    for r in records:
        groups.setdefault((r.source, r.device, r.shape, r.mode), []).append(r)
    rows = []
    for (source, device, shape, mode), group in groups.items():
        measured = [r.ms for r in group]
        sheet = [predict_record(r, "sheet") for r in group]
        probed = [predict_record(r, "probed") for r in group]
        ok_sheet = None not in sheet
        rows.append(
            ErrorRow(
                device,
                shape,
                mode,
                source,
                group[0].date,
                len(group),
                model_error(sheet, measured) if ok_sheet else None,
                model_error(probed, measured) if None not in probed else None,
                statistics.median(p / m for p, m in zip(sheet, measured, strict=True)) if ok_sheet else None,
            )
        )
    return rows
