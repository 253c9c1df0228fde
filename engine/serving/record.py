"""A recorded serving run as the app ships it (assets/serving/*.json): the sweeps of `python -m engine serve-bench`
at each draft length against one plain server, labelled with the server's version, the machine and the date; read
back with the project's strict checker (a file that is not one is refused with one line, never half-drawn)."""

from __future__ import annotations

from pathlib import Path

from engine.checks import Checker

FORMAT = "speclab.serving_recording/1"
MAX_BYTES = 2 << 20


class RecordingError(ValueError):
    """A serving recording that is not one."""


CHECK = Checker(RecordingError, "serving recording", noun="serving recording", max_text=2000)


def make(sweeps: dict[int, dict], *, server: str, machine: str, date: str, note: str, speclab: dict) -> dict:
    """One file from the sweeps by draft length K; `speclab`: SpecLab's own acceptance per position for the same
    draft and prompts ({"per_pos_rate", "source"})."""
    return {
        "format": FORMAT,
        "server": server,
        "machine": machine,
        "date": date,
        "note": note,
        "speclab": speclab,
        "sweeps": [{"k": k} | s for k, s in sorted(sweeps.items())],
    }


def load(path: Path) -> dict:
    raw = Path(path).read_bytes()
    return check(CHECK.parse(raw, MAX_BYTES, Path(path).name))


def check(data) -> dict:
    CHECK.obj(data, "file", ("format", "server", "machine", "date", "note", "speclab", "sweeps"))
    if data["format"] != FORMAT:
        CHECK.fail("format", f"must be {FORMAT}", data["format"])
    for key in ("server", "machine", "date", "note"):
        CHECK.str(data[key], key)
    CHECK.obj(data["speclab"], "speclab", ("per_pos_rate", "source"))
    _rates(data["speclab"]["per_pos_rate"], "speclab.per_pos_rate")
    CHECK.str(data["speclab"]["source"], "speclab.source")
    for i, sweep in enumerate(CHECK.list(data["sweeps"], "sweeps", 8, 1)):
        where = f"sweeps[{i}]"
        CHECK.obj(sweep, where, ("k", "rows"), open=True)
        CHECK.int(sweep["k"], f"{where}.k", 1, 64)
        for j, row in enumerate(CHECK.list(sweep["rows"], f"{where}.rows", 64, 1)):
            _row(row, f"{where}.rows[{j}]")
    return data


def _row(row, where: str) -> None:
    CHECK.obj(row, where, ("concurrency", "spec", "plain", "speedup", "acceptance"), open=True)
    CHECK.int(row["concurrency"], f"{where}.concurrency", 1, 64)
    for side in ("spec", "plain"):
        lane = CHECK.obj(row[side], f"{where}.{side}", ("tokens_per_s", "tokens_per_s_runs", "ttft_ms", "tpot_ms"))
        CHECK.positive(lane["tokens_per_s"], f"{where}.{side}.tokens_per_s")
        for k, v in enumerate(CHECK.list(lane["tokens_per_s_runs"], f"{where}.{side}.tokens_per_s_runs", 20, 1)):
            CHECK.positive(v, f"{where}.{side}.tokens_per_s_runs[{k}]")
        CHECK.num(lane["ttft_ms"], f"{where}.{side}.ttft_ms", 0.0)
        CHECK.opt_num(lane["tpot_ms"], f"{where}.{side}.tpot_ms", 0.0)
    sp = CHECK.obj(row["speedup"], f"{where}.speedup", ("median", "lo", "hi", "rounds"))
    for key in ("median", "lo", "hi"):
        CHECK.positive(sp[key], f"{where}.speedup.{key}")
    if not sp["lo"] <= sp["median"] <= sp["hi"]:
        CHECK.fail(f"{where}.speedup", "must have lo ≤ median ≤ hi", sp)
    CHECK.int(sp["rounds"], f"{where}.speedup.rounds", 1, 20)
    acc = CHECK.obj(row["acceptance"], f"{where}.acceptance", ("drafts", "draft_tokens", "accepted", "alpha", "per_pos_rate"), open=True)
    for key in ("drafts", "draft_tokens", "accepted"):
        CHECK.num(acc[key], f"{where}.acceptance.{key}", 0.0)
    CHECK.opt_num(acc["alpha"], f"{where}.acceptance.alpha", 0.0, 1.0)
    _rates(acc["per_pos_rate"], f"{where}.acceptance.per_pos_rate")


def _rates(values, where: str) -> None:
    for i, v in enumerate(CHECK.list(values, where, 64)):
        CHECK.num(v, f"{where}[{i}]", 0.0, 1.0)
