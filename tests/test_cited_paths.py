"""Every source file, script or document that the code and the docs name by its path exists.

The lessons moved into one record per lesson (app/lessons/l<N>_*.py) and a kit (app/lessons/kit/); docstrings that
still named the old modules sent a reader to files that were gone. The journal (docs/journal.md) is history and may
name files as they were; data paths (JSON outputs in usage lines) are not checked."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITED = re.compile(r"(?<![\w/.-])((?:app|engine|scripts|training|tests|docs)/[A-Za-z0-9_/-]*\.(?:py|md|sh|c))\b")
READ = ("app/", "engine/", "scripts/", "training/", "lessons/", "docs/", "README.md", "Dockerfile", ".ci/", ".streamlit/")
HISTORY = {"docs/journal.md"}


def cited_paths() -> dict[str, set[str]]:
    """{path cited: the files citing it} over the tracked files the check reads."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    cited: dict[str, set[str]] = {}
    for name in files:
        if not name.startswith(READ) or name in HISTORY or not (ROOT / name).is_file():
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for path in CITED.findall(text):
            cited.setdefault(path, set()).add(name)
    return cited


def test_every_path_the_code_and_docs_cite_exists():
    cited = cited_paths()
    assert len(cited) > 100  # the check reads what it should: the project cites hundreds of its files
    missing = {path: sorted(by) for path, by in cited.items() if not (ROOT / path).exists()}
    assert missing == {}


def test_the_check_finds_a_path_that_is_gone():
    assert CITED.findall("see app/lessons/numbers.py and assets/training/prompts.json, app/lessons/kit/numbers.py") == [
        "app/lessons/numbers.py",
        "app/lessons/kit/numbers.py",
    ]
