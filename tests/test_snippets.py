"""The Python the Dockerfile and the shell scripts run inline (`python -c "from engine... import ..."`) names
modules and functions that exist: a moved module fails here, not in an image build or on a lent GPU."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IMPORT = re.compile(r"from ((?:engine|app|training)(?:\.\w+)*) import ([\w, ]+)")
FILES = [ROOT / "Dockerfile", *sorted((ROOT / "scripts").rglob("*.sh"))]


def snippets() -> list[tuple[str, str, str]]:
    found = []
    for path in FILES:
        for module, names in IMPORT.findall(path.read_text(encoding="utf-8")):
            found += [(path.name, module, name.strip()) for name in names.split(",") if name.strip()]
    return found


def test_the_inline_snippets_are_found():
    """The pattern sees the Dockerfile's and gpu_record.sh's model-path lookups (so the test below checks something)."""
    files = {f for f, _, _ in snippets()}
    assert {"Dockerfile", "gpu_record.sh"} <= files


@pytest.mark.parametrize("where,module,name", snippets())
def test_inline_import_resolves(where, module, name):
    assert hasattr(importlib.import_module(module), name), f"{where}: {module} has no {name}"
