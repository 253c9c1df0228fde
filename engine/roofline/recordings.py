"""Recorded pass times from GPU runs, read through a strict loader, and the predictor checked against them.

The files are the JSON reports SpecLab's GPU scripts write (labelled with device, dtype, torch and date):
- scripts/investigate/gpu_graphs.py: per shape, passes with `eager_ms` and `graph_ms`; prefill passes with no earlier
  context and the output head on the last position only (`logits_to_keep=1`);
- scripts/record/gpu_bench.py: per shape, passes with `ms`, the engine's eager forward (`engine.decoding.passcurve.pass_costs`)
  over a `context`-token cache, logits for every position;
- any later report in assets/recordings/*.json of either shape; a pass row may also say `mode` ("graph" or
  "eager"), `context` and `logits_tokens` explicitly, which then win over the defaults above.
A file that is not such a report is refused with one line naming the file and the field; the others load.
Nothing in a file is executed; sizes, counts and numbers are capped and checked before use.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from engine.checks import Checker
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


_NAME = re.compile(r"(?s).")  # any non-empty string (the checker caps its length)


def _text(check: Checker, obj: dict, key: str, default=None) -> str:
    return check.str(obj.get(key, default), key, _NAME, "a non-empty string")


def _count(check: Checker, obj: dict, key: str, where: str, default=None) -> int:
    return check.int(obj.get(key, default), f"{where}.{key}", 0, 10_000_000)


def parse_report(data, source: str) -> list[PassRecord]:
    """The pass records of one report (see the module docstring); RecordingError if it is not one."""
    check = Checker(RecordingError, source, max_text=200)
    check.obj(data, "the report", ("device", "dtype", "date", "shapes"), open=True)
    device, date = _text(check, data, "device"), _text(check, data, "date")
    dtype = check.choice(data["dtype"], "dtype", tuple(DTYPE_BYTES))
    torch_version = _text(check, data, "torch", default="unknown")
    peaks = {k: None if data.get(k) is None else check.positive(data[k], k) for k in ("peak_bandwidth", "peak_flops")}
    shapes = check.list(data["shapes"], "shapes", MAX_ROWS, min_len=1)
    records = []
    for i, shape in enumerate(shapes):
        where = f"shapes[{i}]"
        check.obj(shape, where, open=True)
        if "error" in shape and "passes" not in shape:
            continue  # the script recorded that this shape failed; nothing measured
        check.obj(shape, where, ("shape", "passes"), open=True)
        name = check.str(shape["shape"], f"{where}.shape", _NAME, "a non-empty string")
        for j, row in enumerate(check.list(shape["passes"], f"{where}.passes", MAX_ROWS)):
            label = (source, device, dtype, date, torch_version, name)
            records.extend(_rows(check, row, shape, f"{where}.passes[{j}]", label, peaks))
            if len(records) > MAX_ROWS:
                raise RecordingError(f"{source}: more than {MAX_ROWS} passes")
    return records


def _rows(check: Checker, row, shape: dict, where: str, label: tuple, peaks: dict) -> list[PassRecord]:
    """One pass row -> one record per timed mode it holds."""
    check.obj(row, where, ("batch", "new_tokens"), open=True)
    batch, new_tokens = _count(check, row, "batch", where), _count(check, row, "new_tokens", where)
    if batch < 1 or new_tokens < 1:
        check.fail(where, "must have batch and new_tokens of at least 1", (batch, new_tokens))
    timed = {}
    if "ms" in row:
        mode = check.choice(row.get("mode", shape.get("mode", "eager")), f"{where}.mode", MODES)
        timed[mode] = (check.positive(row["ms"], f"{where}.ms"), None)  # engine.decoding.passcurve.pass_costs: every position's logits
    for mode in MODES:
        if row.get(f"{mode}_ms") is not None:
            timed[mode] = (check.positive(row[f"{mode}_ms"], f"{where}.{mode}_ms"), 1)  # gpu_graphs.py: logits_to_keep=1
    if not timed:
        check.fail(where, "has no time (ms, graph_ms or eager_ms)")
    context = _count(check, row, "context", where, default=shape.get("context", 0))
    out = []
    for mode, (ms, logits_default) in timed.items():
        logits = None if row.get("logits_tokens", logits_default) is None else _count(check, row, "logits_tokens", where, logits_default)
        out.append(PassRecord(*label, mode, batch, new_tokens, context, logits, ms, peaks["peak_bandwidth"], peaks["peak_flops"]))
    return out


def read_json(path: Path, max_bytes: int = MAX_FILE_BYTES, what: str = "a report"):
    """(parsed JSON, the file's name relative to the project root where it is inside it): the size checked before the
    bytes are read, then parsed with the caps of engine/checks.py; RecordingError (one line naming the file) if not."""
    path = Path(path)
    try:
        source = str(path.resolve().relative_to(ROOT))
    except ValueError:
        source = path.name
    try:
        if path.stat().st_size > max_bytes:
            raise RecordingError(f"{source}: larger than {max_bytes:,} bytes: not {what}")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise RecordingError(f"{source}: no such file") from None
    except OSError as exc:
        raise RecordingError(f"{source}: cannot be read ({type(exc).__name__})") from None
    return Checker(RecordingError, source, noun=source).parse(raw, max_bytes), source


def load_report(path: Path) -> list[PassRecord]:
    """Read one report file (size-capped, parsed with the caps of engine/checks.py) and parse it."""
    return parse_report(*read_json(path))


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
