"""A leaderboard the Benchmarks page cites beside its own recording: Spec-Bench's published speedups on a GPU
(assets/spec_bench/leaderboard.json, copied from the leaderboard at the commit it names), read with the project's
strict checks. Each method names the SpecLab drafter it corresponds to (prompt lookup: `ngram`; a draft model: `model`;
EAGLE: `eagle`), so the page can set the cited GPU run beside the CPU recording task by task. A bad file: CitedError,
one line. No streamlit.
"""

from __future__ import annotations

from pathlib import Path

from engine.checks import Checker

FORMAT = "speclab-cited-leaderboard/1"


LEADERBOARD = Path(__file__).resolve().parents[2] / "assets" / "spec_bench" / "leaderboard.json"


MAX_BYTES = 64 * 1024


MAX_METHODS = 16


MAX_SPEEDUP = 20.0  # a cited speedup beyond this is a typo, not a measurement


class CitedError(ValueError):
    """A cited leaderboard that cannot be used, in one line."""


CHECK = Checker(CitedError, "cited leaderboard", noun="cited leaderboard")


def _method(m, i: int) -> dict:
    where = f"methods[{i}]"
    CHECK.obj(m, where, ("method", "drafter", "about", "speedup", "tau", "overall"))
    for key in ("method", "drafter", "about"):
        CHECK.str(m[key], f"{where}.{key}")
    speedup = CHECK.obj(m["speedup"], f"{where}.speedup", open=True)
    if not speedup:
        CHECK.fail(f"{where}.speedup", "names no task")
    for task, x in speedup.items():
        CHECK.num(x, f"{where}.speedup.{task}", low=0.01, high=MAX_SPEEDUP)
    CHECK.num(m["tau"], f"{where}.tau", low=1.0, high=MAX_SPEEDUP * 10)
    CHECK.num(m["overall"], f"{where}.overall", low=0.01, high=MAX_SPEEDUP)
    return m


def check(data) -> dict:
    CHECK.obj(data, "the file", ("format", "source", "device", "model", "settings", "timing", "methods"))
    if data["format"] != FORMAT:
        CHECK.fail("format", f"must be {FORMAT!r}", data["format"])
    CHECK.obj(data["source"], "source", ("title", "url", "commit", "license"))
    for key in ("title", "url", "commit", "license"):
        CHECK.str(data["source"][key], f"source.{key}")
    for key in ("device", "model", "settings", "timing"):
        CHECK.str(data[key], key)
    methods = CHECK.list(data["methods"], "methods", MAX_METHODS, min_len=1)
    for i, m in enumerate(methods):
        _method(m, i)
    return data


def load(path: Path | None = None) -> dict:
    """The cited leaderboard at `path` (default LEADERBOARD), checked (CitedError, one line, for a missing, large or
    malformed file)."""
    path = LEADERBOARD if path is None else path
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise CitedError(f"cited leaderboard: cannot read {path} ({exc.strerror or exc})") from None
    return check(CHECK.parse(raw, MAX_BYTES, name=Path(path).name))


def label(cited: dict) -> str:
    """Where the cited numbers come from, in one line for a chart."""
    s = cited["source"]
    return f"cited, not measured here: {s['title']}, {cited['device']} (commit {s['commit'][:7]})"
