"""The house format and lint, checked by the README's test command (so by CI): `ruff format` leaves every
file as it is and `ruff check` finds nothing (pyproject.toml [tool.ruff])."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ["engine", "training", "app", "tests", "scripts"]


def _ruff() -> list[str]:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if exe is None:
        pytest.fail("ruff is not installed: it is pinned in requirements-dev.txt (scripts/setup.sh --dev installs it)")
    return [exe]


def test_every_file_is_formatted():
    out = subprocess.run([*_ruff(), "format", "--check", *FOLDERS], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, f"run `ruff format {' '.join(FOLDERS)}`:\n{out.stdout}{out.stderr}"


def test_lint_is_clean():
    out = subprocess.run([*_ruff(), "check", *FOLDERS], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_formatter_escapes_left():
    """`# fmt: skip` / `# fmt: off` were removed with the formatter's arrival; new ones need a data table's reason."""
    offenders = [
        f"{path.relative_to(ROOT)}:{i}"
        for folder in FOLDERS
        for path in (ROOT / folder).rglob("*.py")
        if path != Path(__file__).resolve()
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "fmt: skip" in line or "fmt: off" in line
    ]
    assert offenders == [], offenders
