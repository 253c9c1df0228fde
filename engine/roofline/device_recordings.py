"""Device recordings shipped under assets/recordings/: listing, schema check and loading.

A recording is one folder written by `scripts/record/gpu_record.py` on a lent GPU: `recording.json` (the
machine, torch/CUDA versions and date; pass-cost curves graph-captured and eager; the batch x depth grid;
the graph-vs-eager exactness check; random-weight pass curves of larger shapes and a labelled
projection) and the race traces it names (engine/trace/'s format). The JSON is checked against
RECORDING_SPEC (engine/checks.py's spec walker, the checkers every file format uses) before anything
reads it, after the same parse caps as the trace loader (size, nesting, no NaN/Infinity); every trace
goes through `Trace.from_json`, the strict loader. A CPU dry run of the script writes the same files
with `dry_run: true` and a label saying so: `list_recordings` leaves those out unless asked (tests), so a
dry run is never shown as a recording.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from engine.checks import Checker
from engine.options import BackendKind
from engine.roofline.recordings import RecordingError
from engine.trace.file import Trace
from engine.trace.records import TraceError

RECORDING_SCHEMA_ID = "speclab.gpu_recording/2"  # /2: curves, grids and races keyed by `backend`
RECORDING_FILE = "recording.json"
MAX_RECORDING_BYTES = 16 << 20
ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "assets" / "recordings"
BACKENDS = tuple(kind.value for kind in BackendKind if kind is not BackendKind.AUTO)  # what a curve, grid or race ran on
TRACE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,80}\.json$")  # a plain file name inside the recording's traces/ folder

_PASS_ROW = {
    "batch": "nat",
    "new_tokens": "nat",
    "tokens_per_pass": "nat",
    "context?": "nat",
    "ms": "num",
    **{f"{k}?": "num" for k in ("flops", "bytes", "achieved_flops", "achieved_bandwidth")},
    "...": None,
}
_GRID_ROW = {"batch": "nat", "depth": "nat", "ar_tokens_per_s": "num", "spec_tokens_per_s": "num", "speedup": "num", "alpha?": "num?"}
# Every object lets keys it does not name through unread ("..."): the script adds facts as it grows.
RECORDING_SPEC = {
    "schema": (RECORDING_SCHEMA_ID,),
    "label": "str",
    "dry_run": "bool",
    "device": ("cuda", "cpu", "mps"),
    "device_name": "str",
    "torch": "str",
    "cuda": "str?",
    "date": "date",
    "dtype": "str",
    "elapsed_s?": "num",
    "probe": {"peak_bandwidth": "num", "peak_flops": "num", "ridge_point?": "num", "...": None},
    "pair?": {"*": "str?"},
    "pass_curves": [
        {
            "model": "str",
            "weights": ("real", "random"),
            "backend": BACKENDS,
            "graphs_used?": "bool",
            "context?": "nat",
            "role?": "str",
            "rows": [_PASS_ROW, 512],
            "...": None,
        },
        64,
    ],
    "grid": [{"backend": BACKENDS, "drafter": "str", "rows": [{**_GRID_ROW, "...": None}, 512], "...": None}, 16],
    "races": [
        {
            "batch": "nat",
            "depth": "nat",
            "backend": BACKENDS,
            "drafter?": "str",
            "ar": TRACE_NAME,
            "spec": TRACE_NAME,
            "speedup?": "num?",
            "...": None,
        },
        64,
    ],
    "exactness": {
        "dtype": "str",
        "all_equal": "bool",
        "runs": [{"drafter": "str", "equal": "bool", "tokens?": "nat", "...": None}],
        "...": None,
    },
    "projection": {
        "label": "str",
        "alpha?": "num?",
        "rows": [{"shape": "str", "batch": "nat", "k": "nat", "speedup": "num", "...": None}, 2048],
        "...": None,
    },
    "comparisons?": [{"...": None}],
    "notes?": ["str"],
    "errors?": ["str"],
    "...": None,
}


@dataclass(frozen=True)
class Recording:
    folder: Path
    data: dict

    @property
    def label(self) -> str:
        return self.data["label"]

    @property
    def dry_run(self) -> bool:
        return self.data["dry_run"]

    def trace(self, name: str) -> Trace:
        """One of the recording's traces, through the strict trace loader."""
        if not TRACE_NAME.match(name):
            raise RecordingError(f"recording {self.folder.name}: {name!r} is not a trace file name")
        return Trace.from_json(self.folder / "traces" / name)

    def race(self, index: int) -> tuple[Trace, Trace]:
        entry = self.data["races"][index]
        return self.trace(entry["ar"]), self.trace(entry["spec"])


def read_recording(folder: Path) -> Recording:
    """Parse and check one recording folder (the JSON against RECORDING_SPEC; every race trace file present)."""
    folder = Path(folder)
    check = Checker(RecordingError, f"recording {folder.name}", noun=f"recording {folder.name}: {RECORDING_FILE}", max_text=400)
    try:
        raw = (folder / RECORDING_FILE).read_bytes()
    except OSError as exc:
        raise RecordingError(f"recording {folder.name}: {RECORDING_FILE} cannot be read ({exc.strerror or exc})") from None
    data = check.parse(raw, MAX_RECORDING_BYTES, RECORDING_FILE)
    check.spec(data, RECORDING_SPEC, "recording")
    for race in data["races"]:
        for key in ("ar", "spec"):
            if not (folder / "traces" / race[key]).is_file():
                raise RecordingError(f"recording {folder.name}: trace {race[key]} is missing")
    return Recording(folder, data)


def list_recordings(root: Path | None = None, include_dry_runs: bool = False) -> tuple[list[Recording], list[str]]:
    """(recordings, refusals): every valid recording folder (one holding recording.json) under `root`
    (default assets/recordings/), newest first; dry runs only when asked. Refusals are one line each, for
    the page to show."""
    root = RECORDINGS if root is None else Path(root)
    found, refused = [], []
    if not root.is_dir():
        return found, refused
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and (p / RECORDING_FILE).exists()):
        try:
            rec = read_recording(folder)
        except (RecordingError, TraceError) as exc:
            refused.append(str(exc))
            continue
        if rec.dry_run and not include_dry_runs:
            refused.append(f"recording {folder.name}: a CPU dry run, not a GPU recording (left out)")
            continue
        found.append(rec)
    found.sort(key=lambda r: r.data["date"], reverse=True)
    return found, refused


def race_label(rec: Recording, index: int) -> str:
    """'batch 16, k = 3, CUDA graphs — recorded on <GPU>, <date>' for a picker."""
    race = rec.data["races"][index]
    how = {"cuda_graphs": "CUDA graphs", "torch": "eager", "cuda_graphs_padded": "padded eager", "cuda_graphs_static": "static eager"}
    how = how.get(race["backend"], race["backend"])
    return f"batch {race['batch']}, k = {race['depth']}, {how} — {rec.label}"


def recordings_note(recordings: list[Recording]) -> str:
    """One line for the pages: which GPU recordings ship, or that they wait on a lent GPU."""
    if not recordings:
        return (
            "No full GPU recording (the real model's races and grid, scripts/record/gpu_record.py) ships yet: it waits on "
            "a lent GPU. SpecLab's H200 pass-cost curves (random weights in real shapes, docs/measurements/h200-*.json) "
            "are drawn in the Lessons' GPU panels and the Predictor. What this page shows ran on a CPU: live on this "
            "machine, or a recording labelled with its machine and date."
        )
    names = sorted({r.label for r in recordings})
    return "GPU recordings available in Replay: " + "; ".join(names) + "."
