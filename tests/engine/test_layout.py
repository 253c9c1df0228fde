"""Architecture contracts: the runtime never imports training code, streamlit or plotly; every drafter
implements the one interface and the registry matches DecodeConfig's choices; no import-path edits."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_IN_ENGINE = ("training", "streamlit", "plotly", "app")


def imported_modules(path: Path) -> set[str]:
    """Top-level names of every module a file imports (at any depth of the file: function-level too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted((ROOT / "engine").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_engine_never_imports_training_streamlit_or_plotly(path):
    bad = imported_modules(path) & set(FORBIDDEN_IN_ENGINE)
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_importing_engine_loads_no_training_or_ui_module():
    """The same contract at run time, in a fresh interpreter: import the runtime and its CLI."""
    code = ("import sys, engine, engine.__main__, engine.bench, engine.drafters; "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN_IN_ENGINE!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_no_sys_path_edits_anywhere():
    """The project is installed (pip install -e .), so no module touches the interpreter's import path."""
    offenders = []
    for folder in ("engine", "training", "app", "tests", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys":
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], f"the import path is edited in {offenders} (the project is installed editable)"


def test_every_drafter_implements_the_interface_and_the_registry_matches_the_config():
    from engine.config import DrafterKind
    from engine.drafters import DRAFTERS, Drafter

    assert set(DRAFTERS) == {k.value for k in DrafterKind}
    hooks = [name for name in vars(Drafter) if not name.startswith("_")]
    assert {"prefill", "propose", "commit", "select", "take_counts", "token_flops", "build", "label"} <= set(hooks)
    for kind, cls in DRAFTERS.items():
        assert cls.kind == kind
        missing = [h for h in hooks if not hasattr(cls, h)]
        assert not missing, f"{cls.__name__} lacks {missing}"


def test_decode_loop_never_asks_which_drafter_it_holds():
    source = (ROOT / "engine" / "decode.py").read_text()
    for name in ("ModelDrafter", "EagleDrafter", "NgramDrafter", "isinstance(drafter", "isinstance(self.drafter"):
        assert name not in source


def test_speculative_step_fits_on_one_screen():
    """DESIGN: the draft -> verify -> accept -> roll back step reads on one screen (<= 80 lines)."""
    import inspect

    from engine.decode import Decoder

    lines = inspect.getsource(Decoder.step).splitlines()
    assert len(lines) <= 80
    body = "\n".join(lines)
    for marker in ("# 1. draft", "# 2. verify", "# 3. accept", "# 4. roll back"):
        assert marker in body
