"""House rule (issue 27; training/ since issue 43): no file in engine/, app/ or training/ over 450 lines, no
function there over 80.

A long file or function is where a newcomer stops reading; the rule keeps each one to what a screen or
two can hold. Counted on the source as written (ruff format), decorators and docstrings included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 80


def sources() -> list[Path]:
    return sorted(path for folder in ("engine", "app", "training") for path in (ROOT / folder).rglob("*.py"))


def long_functions(path: Path) -> list[str]:
    """'name (N lines)' for every function or method longer than MAX_FUNCTION_LINES."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = node.end_lineno - first + 1
            if lines > MAX_FUNCTION_LINES:
                out.append(f"{node.name} ({lines} lines)")
    return out


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_file_over_450_lines_and_no_function_over_80(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_FILE_LINES, f"{path.relative_to(ROOT)} has {lines} lines (at most {MAX_FILE_LINES})"
    assert long_functions(path) == [], f"{path.relative_to(ROOT)}: functions over {MAX_FUNCTION_LINES} lines"


def test_the_rule_covers_every_package():
    """Every engine/, app/ and training/ subpackage is checked (no folder skipped by the glob)."""
    folders = {p.parent.relative_to(ROOT).as_posix() for p in sources()}
    assert {"engine/model", "engine/decoding", "engine/trace", "app/lessons", "app/classroom", "app/common", "training"} <= folders


def test_the_size_check_sees_a_long_function(tmp_path):
    path = tmp_path / "long.py"
    path.write_text("def short():\n    return 1\n\n\ndef long():\n" + "    x = 1\n" * MAX_FUNCTION_LINES + "    return x\n")
    assert long_functions(path) == [f"long ({MAX_FUNCTION_LINES + 2} lines)"]
