"""Device recordings shipped under assets/recordings/: listing, schema check and loading.

A recording is one folder written by `scripts/record/gpu_record.py` on a lent GPU: `recording.json` (the
machine, torch/CUDA versions and date; pass-cost curves graph-captured and eager; the batch x depth grid;
the graph-vs-eager exactness check; random-weight pass curves of larger shapes and a labelled
projection) and the race traces it names (engine/trace/'s format). The JSON is checked against
RECORDING_SCHEMA (JSON Schema, validated with `jsonschema`) before anything reads it, after the same
size and NaN/Infinity caps as the trace loader; every trace goes through `Trace.from_json`, the strict
loader. A CPU dry run of the script writes the same files with `dry_run: true` and a label saying so:
`list_recordings` leaves those out unless asked (tests), so a dry run is never shown as a recording.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from engine.trace.file import Trace
from engine.trace.records import TraceError

RECORDING_SCHEMA_ID = "speclab.gpu_recording/1"
RECORDING_FILE = "recording.json"
MAX_RECORDING_BYTES = 16 << 20
ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "assets" / "recordings"
TRACE_NAME = r"^[a-z0-9][a-z0-9_.-]{0,80}\.json$"  # a plain file name inside the recording's traces/ folder

_NUM = {"type": "number"}
_OPT_NUM = {"type": ["number", "null"]}
_STR = {"type": "string", "maxLength": 400}
_OPT_STR = {"type": ["string", "null"], "maxLength": 400}
_INT = {"type": "integer", "minimum": 0}
_PASS_ROW = {
    "type": "object",
    "required": ["batch", "new_tokens", "tokens_per_pass", "ms"],
    "properties": {
        "batch": _INT,
        "new_tokens": _INT,
        "tokens_per_pass": _INT,
        "context": _INT,
        "ms": _NUM,
        "flops": _NUM,
        "bytes": _NUM,
        "achieved_flops": _NUM,
        "achieved_bandwidth": _NUM,
    },
}
RECORDING_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": [
        "schema",
        "label",
        "dry_run",
        "device",
        "device_name",
        "torch",
        "cuda",
        "date",
        "dtype",
        "probe",
        "pass_curves",
        "grid",
        "races",
        "exactness",
        "projection",
    ],
    "properties": {
        "schema": {"const": RECORDING_SCHEMA_ID},
        "label": _STR,
        "dry_run": {"type": "boolean"},
        "device": {"enum": ["cuda", "cpu", "mps"]},
        "device_name": _STR,
        "torch": _STR,
        "cuda": _OPT_STR,
        "date": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
        "dtype": _STR,
        "elapsed_s": _NUM,
        "probe": {
            "type": "object",
            "required": ["peak_bandwidth", "peak_flops"],
            "properties": {"peak_bandwidth": _NUM, "peak_flops": _NUM, "ridge_point": _NUM},
        },
        "pair": {"type": "object", "additionalProperties": _OPT_STR},
        "pass_curves": {
            "type": "array",
            "maxItems": 64,
            "items": {
                "type": "object",
                "required": ["model", "weights", "cuda_graphs", "rows"],
                "properties": {
                    "model": _STR,
                    "weights": {"enum": ["real", "random"]},
                    "cuda_graphs": {"enum": ["auto", "off", "static", "padded"]},
                    "graphs_used": {"type": "boolean"},
                    "context": _INT,
                    "role": _STR,
                    "rows": {"type": "array", "maxItems": 512, "items": _PASS_ROW},
                },
            },
        },
        "grid": {
            "type": "array",
            "maxItems": 16,
            "items": {
                "type": "object",
                "required": ["cuda_graphs", "drafter", "rows"],
                "properties": {
                    "cuda_graphs": _STR,
                    "drafter": _STR,
                    "rows": {
                        "type": "array",
                        "maxItems": 512,
                        "items": {
                            "type": "object",
                            "required": ["batch", "depth", "ar_tokens_per_s", "spec_tokens_per_s", "speedup"],
                            "properties": {
                                "batch": _INT,
                                "depth": _INT,
                                "ar_tokens_per_s": _NUM,
                                "spec_tokens_per_s": _NUM,
                                "speedup": _NUM,
                                "alpha": _OPT_NUM,
                            },
                        },
                    },
                },
            },
        },
        "races": {
            "type": "array",
            "maxItems": 64,
            "items": {
                "type": "object",
                "required": ["batch", "depth", "cuda_graphs", "ar", "spec"],
                "properties": {
                    "batch": _INT,
                    "depth": _INT,
                    "cuda_graphs": _STR,
                    "drafter": _STR,
                    "ar": {"type": "string", "pattern": TRACE_NAME},
                    "spec": {"type": "string", "pattern": TRACE_NAME},
                    "speedup": _OPT_NUM,
                },
            },
        },
        "exactness": {
            "type": "object",
            "required": ["dtype", "all_equal", "runs"],
            "properties": {
                "dtype": _STR,
                "all_equal": {"type": "boolean"},
                "runs": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["drafter", "equal"],
                        "properties": {"drafter": _STR, "equal": {"type": "boolean"}, "tokens": _INT},
                    },
                },
            },
        },
        "projection": {
            "type": "object",
            "required": ["label", "rows"],
            "properties": {
                "label": _STR,
                "alpha": _OPT_NUM,
                "rows": {
                    "type": "array",
                    "maxItems": 2048,
                    "items": {
                        "type": "object",
                        "required": ["shape", "batch", "k", "speedup"],
                        "properties": {"shape": _STR, "batch": _INT, "k": _INT, "speedup": _NUM},
                    },
                },
            },
        },
        "comparisons": {"type": "array"},
        "notes": {"type": "array", "items": _STR},
        "errors": {"type": "array", "items": _STR},
    },
}


class RecordingError(ValueError):
    """A recording folder that is missing, malformed or refers to files it does not hold; one line."""


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
        if not re.match(TRACE_NAME, name):
            raise RecordingError(f"recording {self.folder.name}: {name!r} is not a trace file name")
        return Trace.from_json(self.folder / "traces" / name)

    def race(self, index: int) -> tuple[Trace, Trace]:
        entry = self.data["races"][index]
        return self.trace(entry["ar"]), self.trace(entry["spec"])


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not allowed")


def read_recording(folder: Path) -> Recording:
    """Parse and check one recording folder (the JSON against the schema; every race trace file present)."""
    import jsonschema

    folder = Path(folder)
    path = folder / RECORDING_FILE
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RecordingError(f"recording {folder.name}: {RECORDING_FILE} cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_RECORDING_BYTES:
        raise RecordingError(f"recording {folder.name}: {RECORDING_FILE} is over {MAX_RECORDING_BYTES >> 20} MB")
    try:
        data = json.loads(raw, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise RecordingError(f"recording {folder.name}: not valid JSON ({str(exc).splitlines()[0]})") from None
    try:
        jsonschema.validate(data, RECORDING_SCHEMA)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "top level"
        raise RecordingError(f"recording {folder.name}: {where}: {exc.message[:200]}") from None
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
    """'batch 16, k = 3, CUDA graphs — recorded on NVIDIA H200, 2026-12-02' for a picker."""
    race = rec.data["races"][index]
    how = {"auto": "CUDA graphs", "off": "eager", "padded": "padded eager", "static": "static eager"}.get(
        race["cuda_graphs"], race["cuda_graphs"]
    )
    return f"batch {race['batch']}, k = {race['depth']}, {how} — {rec.label}"


def recordings_note(recordings: list[Recording]) -> str:
    """One line for the pages: which GPU recordings ship, or that they wait on a lent GPU."""
    if not recordings:
        return (
            "No GPU recording ships yet: the recordings (scripts/record/gpu_record.py) wait on a lent GPU. "
            "Everything on this page is measured live on this machine."
        )
    names = sorted({r.label for r in recordings})
    return "GPU recordings available in Replay: " + "; ".join(names) + "."
