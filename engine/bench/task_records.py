"""A task bench recording (engine/bench/tasks.py's rows, labelled with machine, date and settings) as a JSON file:
written by `python -m engine bench --prompts-file … --json FILE` and scripts/record/record_tasks.py, read by the
Benchmarks page. Reading checks every field and judges each row again from its rounds by the one rule
(engine/verdict.py), so a file cannot state a verdict its own rounds do not support. A bad file: TaskRecordingError,
one line.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from engine import verdict

FORMAT = "speclab-task-bench/1"


MAX_BYTES = 4 * 1024 * 1024


LABEL = {"machine": str, "date": str, "dtype": str, "seconds": (int, float), "settings": dict, "prompts": dict}


ROW = {"task": str, "batch": int, "contender": str, "decode_tokens_per_s": (int, float), "decode_tokens_per_s_runs": list}


OPTIONAL = ("tau", "per_position_acceptance", "whole_run_speedup", "ttft_s", "other_cores", "rows_differ")


class TaskRecordingError(ValueError):
    """A task bench recording that cannot be used, in one line."""


def _fail(where: str, what: str):
    raise TaskRecordingError(f"{where}: {what}")


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_row(row, i: int) -> dict:
    where = f"row {i}"
    if not isinstance(row, dict):
        _fail(where, "must be an object")
    for key, kind in ROW.items():
        if not isinstance(row.get(key), kind) or isinstance(row.get(key), bool):
            _fail(where, f"'{key}' is missing or not a {getattr(kind, '__name__', 'number')}")
    runs = row["decode_tokens_per_s_runs"]
    if not runs or not all(_number(r) and r > 0 for r in runs):
        _fail(where, "'decode_tokens_per_s_runs' must list positive rates, one per round")
    if row["batch"] < 1:
        _fail(where, "'batch' must be ≥ 1")
    for key in OPTIONAL:
        value = row.get(key)
        ok = value is None or _number(value) or (isinstance(value, list) and all(_number(v) for v in value))
        if not ok:
            _fail(where, f"'{key}' must be a number, a list of numbers or null")
    return {k: row.get(k) for k in (*ROW, *OPTIONAL)}


def judged(rows: list[dict]) -> list[dict]:
    """Each row with its speedup over the same task and batch's plain row, judged by the one rule from the rounds:
    speedup, speedup_lo, speedup_hi and verdict ("baseline" for plain)."""
    plain = {(r["task"], r["batch"]): r for r in rows if r["contender"] == "plain"}
    out = []
    for r in rows:
        base = plain.get((r["task"], r["batch"]))
        if base is None:
            raise TaskRecordingError(f"no plain row for task {r['task']!r} at batch {r['batch']}: nothing to compare with")
        if r is base:
            out.append(r | {"speedup": 1.0, "speedup_lo": None, "speedup_hi": None, "verdict": "baseline"})
            continue
        v = verdict.judge(r["decode_tokens_per_s_runs"], base["decode_tokens_per_s_runs"])
        out.append(r | {"speedup": v.ratio, "speedup_lo": v.lo, "speedup_hi": v.hi, "verdict": v.kind})
    return out


def check(data) -> dict:
    """A parsed recording, checked field by field, its rows judged again (TaskRecordingError, one line)."""
    if not isinstance(data, dict):
        _fail("recording", "must be a JSON object")
    if data.get("format") != FORMAT:
        _fail("recording", f"format must be {FORMAT!r}, not {str(data.get('format'))[:40]!r}")
    for key, kind in LABEL.items():
        if not isinstance(data.get(key), kind) or isinstance(data.get(key), bool):
            _fail("recording", f"'{key}' is missing or has the wrong type")
    rows = data.get("rows")
    if not isinstance(rows, list) or not rows:
        _fail("recording", "'rows' must be a non-empty list")
    checked = [_check_row(r, i) for i, r in enumerate(rows)]
    return {k: data[k] for k in LABEL} | {"format": FORMAT, "rows": judged(checked)}


def make(rows: list[dict], *, machine: str, dtype: str, seconds: float, settings: dict, prompts: dict, date: str) -> dict:
    """A recording of task bench rows, checked."""
    keep = [{k: r.get(k) for k in (*ROW, *OPTIONAL)} for r in rows]
    label = {"machine": machine, "date": date, "dtype": dtype, "seconds": round(seconds, 1), "settings": settings}
    return check({"format": FORMAT, **label, "prompts": prompts, "rows": keep})


def save(record: dict, path) -> None:
    """Write a checked recording (its judged fields left out: reading judges again), never half-written."""
    check(record)
    rows = [{k: r.get(k) for k in (*ROW, *OPTIONAL)} for r in record["rows"]]
    text = json.dumps({**record, "rows": rows}, allow_nan=False, indent=None, separators=(",", ":"))
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)


def load(path) -> dict:
    """Read and check a recording (TaskRecordingError, one line, for a missing, large or malformed file)."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise TaskRecordingError(f"{path.name} is larger than {MAX_BYTES // 1024} KB: not a task bench recording")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskRecordingError(f"no task bench recording at {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskRecordingError(f"{path.name} could not be read ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskRecordingError(f"{path.name} is not JSON ({exc.msg}, line {exc.lineno})") from None
    return check(data)
