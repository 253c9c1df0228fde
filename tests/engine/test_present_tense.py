"""Present-tense engine code: its comments and docstrings say what the code does and why; dates, measured timings
and issue numbers live in docs/journal.md ("Code history moved out of engine/"), linked by name."""

from __future__ import annotations

import ast
import calendar
import io
import re
import tokenize
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine"
HISTORY = {
    "a date": re.compile(r"\b20\d\d-\d\d-\d\d\b|\b(?:" + "|".join(calendar.month_name[1:]) + r") 20\d\d\b"),
    "an issue number": re.compile(r"\bissues? \d+|\bPR #\d+|\(#\d+\)"),
    "a timing": re.compile(r"\d[\d.,]*(?:-\d[\d.,]*)?\s*(?:ms|us|µs|ns)\b|\d[\d.]*(?:-\d[\d.]*)?\s+s\b"),
}


def notes(source: str, suffix: str):
    """(line, text) of every comment and docstring line of a Python or C source."""
    if suffix == ".c":
        for m in re.finditer(r"/\*.*?\*/|//[^\n]*", source, re.S):
            first = source.count("\n", 0, m.start()) + 1
            yield from ((first + i, line) for i, line in enumerate(m.group().splitlines()))
        return
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                yield from ((first.lineno + i, line) for i, line in enumerate(first.value.value.splitlines()))


def history(sources: dict[str, str]) -> list[str]:
    found = []
    for name, source in sorted(sources.items()):
        for line, text in sorted(notes(source, Path(name).suffix)):
            for what, pattern in HISTORY.items():
                for match in pattern.finditer(text):
                    found.append(f"{name}:{line}: {what} ({match.group()!r})")
    return found


def test_no_engine_comment_or_docstring_carries_a_date_a_timing_or_an_issue_number():
    sources = {str(p.relative_to(ENGINE.parent)): p.read_text() for p in ENGINE.rglob("*") if p.suffix in (".py", ".c")}
    assert len(sources) > 50
    assert history(sources) == []


def test_the_check_finds_history_where_there_is_some():
    planted = {
        "a.py": '"""Measured 2026-12-02 (issue 31): 0.53-0.56 ms a step."""\nx = 1  # ~45 us, 5-20 s, removed February 2026\n',
        "b.c": "/* 19 us on the EPYC\n * (vllm PR #35060) */\nint x = 10; // 'ms' alone is fine: 2 ms is not\n",
        "c.py": 'FMT = "{:.1f} ms"  # a format, not a timing: the code itself may print units\n',
    }
    assert history(planted) == [
        "a.py:1: a date ('2026-12-02')",
        "a.py:1: an issue number ('issue 31')",
        "a.py:1: a timing ('0.53-0.56 ms')",
        "a.py:2: a date ('February 2026')",
        "a.py:2: a timing ('45 us')",
        "a.py:2: a timing ('5-20 s')",
        "b.c:1: a timing ('19 us')",
        "b.c:2: an issue number ('PR #35060')",
        "b.c:3: a timing ('2 ms')",
    ]
