"""Lesson measurements as plain JSON: what a lesson's experiment measured, in a small checked schema.

The Lessons page draws every conclusion from a *measurement*: a dict of numbers (and a few short
strings) that an experiment builds from its traces and pass timings. The same dict is what
scripts/record/record_lessons.py saves under assets/lessons/, so a recorded run and a live run go through the
same checks and the same drawing code. A recording is untrusted input like any file: it is parsed
with the caps every file format shares (engine/checks.py: size, nesting, number caps, no NaN), then
checked against the schema below with the same field checkers, and every refusal is one line naming the field. No streamlit, no
torch: a Trace goes in through `lane()`, which reads only its public fields.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path

from app.common.lane_stats import (  # re-exported: lessons read them as measurement.*
    SUMMARY_KEYS,
    decode_fields,
    decode_rate,
    draft_share,
    lane,
    lane_of_runs,
    median_index,
    plain_numbers,
    spread,
    tpot_ms,
    verified_slots,
)
from engine.checks import Checker

__all__ = [
    "SUMMARY_KEYS",
    "decode_fields",
    "decode_rate",
    "draft_share",
    "lane",
    "lane_of_runs",
    "median_index",
    "plain_numbers",
    "spread",
    "tpot_ms",
    "verified_slots",
]

RECORD_SCHEMA = "speclab.lesson/1"
MAX_RECORD_BYTES = 256 * 1024
MAX_TEXT = 300


class MeasurementError(ValueError):
    """A measurement or a recording that does not fit the schema; the message names the field."""


_CHECK = Checker(MeasurementError, "malformed lesson measurement", max_text=MAX_TEXT)
_FILE = Checker(MeasurementError, "malformed lesson recording", foreign="not a SpecLab lesson recording", noun="lesson recording")


# --- the schema ----------------------------------------------------------------------------------
# Specs as engine/checks.py's Checker.spec reads them: "num" (finite number), "num?" (or null), "int",
# "str", "bool", "date", a tuple (one of its strings), a dict (exactly these keys; a key ending in "?" may be
# absent), a one-item list [spec] (a list of them), or {"*": spec} (any identifier keys, each a spec).
SPREAD = {"values": ["num"], "median": "num", "min": "num", "max": "num"}
DECODE = {  # decoding apart from prefill (decode_fields): a lane's time to first token, decode time and tokens, its rate
    "ttft_s": "num",
    "decode_s": "num",
    "decode_tokens": "int",
    "decode_tokens_per_s": "num?",  # null: a run with no decode step
    "decode_tokens_per_s_runs": SPREAD,  # every interleaved round's rate (lane_of_runs)
    "passes": [["int"]],  # its decode passes as [tokens per pass, draft depth, steps] (the H200 re-timing)
}
# Lessons 6 and 7's rows (2026-12-05 on; optional, older recordings lack them): the median run's decode tokens and
# its decode passes as [tokens per pass, draft depth, steps], what app/views/h200.py prices on the H200.
SHAPES = {"decode_tokens?": "int", "passes?": [["int"]]}
LANE = {
    "summary": {
        **{
            k: "num"
            for k in (
                "new_tokens",
                "wall_s",
                "tokens_per_s",
                "target_forwards",
                "flops",
                "flops_wasted",
                "bytes",
                "drafted_tokens",
                "accepted_tokens",
            )
        },
        **{k: "num?" for k in ("alpha", "acceptance_rate", "tokens_per_step")},
        **{k: "num?" for k in ("ttft_s", "decode_tokens_per_s", "tpot_ms")},  # decoding alone (engine/trace/rates.py)
    },
    "drafter": "str",
    "depth": "int",
    "draft_share": "num",
    "verified_slots": ["int"],
    "decode_steps": "int",
    "speculated_steps": "int",
    # optional (added with the repeats; older recordings lack them): mean ms of a decode step, its verify pass
    # and its drafting; time per output token of a request; cores other processes kept busy; every run's tokens/s
    **{f"{k}?": "num?" for k in ("step_ms", "verify_ms", "draft_ms", "tpot_ms", "other_cores")},
    "tokens_per_s_runs?": SPREAD,
    **DECODE,
}
NUMBERS = {"*": "num?"}  # a metrics.compare dict
PASS_ROW = {
    k: "num"
    for k in (
        "batch",
        "new_tokens",
        "tokens_per_pass",
        "context",
        "ms",
        "ms_per_token",
        "flops",
        "bytes",
        "achieved_flops",
        "achieved_bandwidth",
    )
}
PASS_ROW_SPEC = PASS_ROW | {"ms_runs?": SPREAD}  # ms of each interleaved round (optional: added with the repeats)
CURVE = {"tokens": ["num"], "ms": ["num"], "knee_tokens": "num", "key": "str", "measured_at": "str", "other_cores?": "num?"}
PEAKS = {"peak_bandwidth": "num", "peak_flops": "num", "ridge_point": "num", "dtype": "str", "ridge_tokens": "num?"}
SEED_PASS = {
    "label": "str",
    "batch": "int",
    "new_tokens": "int",
    "tokens_per_pass": "int",
    "ms": "num",
    "flops": "num",
    "weight_bytes": "num",
    "kv_bytes": "num",
    "times_ms": ["num"],
}
PAIR_RUN = {"ar": LANE, "spec": LANE, "m": NUMBERS}
SETTINGS = {"*": "num"}
# Lessons 1-3 (2026-12-03 on; optional, older recordings lack them): the settings a run resolved from this machine's
# pass curve (app/lessons/kit/runs.py: room, depth, batch, largest, past), the curve itself, each contender's
# warm-up run (app/lessons/kit/runs.py warm_up: never inside a lane), and lesson 2's decode steps' FLOPs and bytes.
CHOSEN = {"chosen?": {"*": "int"}, "curve?": CURVE}
WARMUP = {"warmup?": [{"contender": "str", "s": "num", "decode_tokens_per_s": "num"}]}
DECODE_COSTS = {k: "num" for k in ("tokens", "flops", "bytes", "flops_wasted")}


def check(value, spec, where: str = "measurement") -> None:
    """Raise MeasurementError (naming the field) unless `value` fits `spec` (engine/checks.py: Checker.spec)."""
    _CHECK.spec(value, spec, where)


def check_measurement(experiment: str, measurement, schemas: dict) -> dict:
    """The measurement, after checking it against its experiment's schema in `schemas` (the lessons' records:
    app/lessons/registry.py), MeasurementError if it does not fit."""
    if experiment not in schemas:
        raise MeasurementError(f"unknown lesson experiment {experiment[:40]!r}")
    check(measurement, schemas[experiment], "measurement")
    return measurement


# --- how disturbed a run was -------------------------------------------------------------------------
_LOAD = re.compile(r"load average (\d+(?:\.\d+)?) to (\d+(?:\.\d+)?) on (\d+) cores")
DISTURBED = "DISTURBED: recorded beside other work, timings noisy"
BUSY_CORES = 0.25  # other processes kept more than a quarter of a core busy on average: disturbed (quiet recordings: 0.01-0.09)


def _lanes_in(value) -> list[dict]:
    """Every lane-like dict (one with other_cores) anywhere in a measurement."""
    if isinstance(value, dict):
        own = [value] if "other_cores" in value else []
        return own + [lane for v in value.values() for lane in _lanes_in(v)]
    if isinstance(value, list):
        return [lane for v in value for lane in _lanes_in(v)]
    return []


def other_cores(measurement: dict) -> float | None:
    """The most cores other processes kept busy during any one run of a measurement (None: not recorded)."""
    busy = [lane["other_cores"] for lane in _lanes_in(measurement) if lane.get("other_cores") is not None]
    return max(busy) if busy else None


def curve_busy(curve: dict | None) -> bool:
    """Whether a pass curve's rounds shared the cores with other work: more than BUSY_CORES kept busy meanwhile."""
    return ((curve or {}).get("other_cores") or 0.0) > BUSY_CORES


def note_load(note: str) -> tuple[float, int] | None:
    """(highest load average, cores) from a recording's note ("load average 1.2 to 3.4 on 2 cores"), or None."""
    found = _LOAD.search(note)
    return (max(float(found[1]), float(found[2])), int(found[3])) if found else None


def disturbed(record: dict) -> bool:
    """Was the recording made beside other work? Its load average above its core count (more runnable work
    than cores), or other processes keeping more than BUSY_CORES cores busy during a run; an old note that
    says so in words ("other work running") counts too."""
    load = note_load(record.get("note", ""))
    busy = other_cores(record.get("measurement", {}))
    return bool((load and load[0] > load[1]) or (busy is not None and busy > BUSY_CORES) or "other work running" in record.get("note", ""))


def recorded_label(record: dict) -> str:
    """The label a recording is shown with; a disturbed one says so first, in capitals the page looks for."""
    text = f"recorded on {record['machine']}, {record['dtype']}, {record['date']} ({record['note']})"
    return f"{DISTURBED}; {text}" if disturbed(record) and DISTURBED not in record["note"] else text


# --- recordings ----------------------------------------------------------------------------------
# The label of a recording; its "measurement" is checked against its experiment's spec.
RECORD = {
    "schema": (RECORD_SCHEMA,),
    "experiment": "str",
    "machine": "str",
    "date": "date",
    "dtype": "str",
    "note": "str",
    "settings": SETTINGS,
}


def make_record(
    experiment: str, measurement: dict, schemas: dict, *, machine: str, dtype: str, note: str, settings: dict, date: str | None = None
) -> dict:
    """A recording of one lesson experiment, labelled with the machine and date, after checking it."""
    record = {
        "schema": RECORD_SCHEMA,
        "experiment": experiment,
        "machine": machine,
        "date": date or dt.date.today().isoformat(),
        "dtype": dtype,
        "note": note,
        "settings": settings,
        "measurement": check_measurement(experiment, measurement, schemas),
    }
    return check_record(record, schemas)


def check_record(data, schemas: dict) -> dict:
    """Check a parsed recording: the label fields, its settings, then its measurement against its experiment."""
    if not isinstance(data, dict):
        _CHECK.fail("recording", "must be an object", data)
    header = {k: v for k, v in data.items() if k != "measurement"}
    check(header, RECORD, "recording")
    if "measurement" not in data:
        _CHECK.fail("recording", "is missing measurement")
    check_measurement(data["experiment"], data["measurement"], schemas)
    return data


def load_record(path: str | os.PathLike, schemas: dict) -> dict:
    """Read and check one recording; MeasurementError (one line) for a missing, oversized or malformed file."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            raise MeasurementError(f"{path.name} is larger than {MAX_RECORD_BYTES // 1024} KB: not a lesson recording")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise MeasurementError(f"no recording at {path.name}") from None
    except OSError as exc:
        raise MeasurementError(f"{path.name} could not be read ({exc.strerror or exc})") from None
    return check_record(_FILE.parse(raw, MAX_RECORD_BYTES, name=path.name), schemas)


def save_record(record: dict, path: str | os.PathLike, schemas: dict) -> None:
    """Write a checked recording as compact JSON (numbers rounded to 6 significant digits to keep files small)."""
    check_record(record, schemas)
    text = json.dumps(_rounded(record), allow_nan=False, separators=(",", ":"))
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)  # never a half-written recording


def _rounded(value):
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value
