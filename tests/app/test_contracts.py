"""Architecture contracts of app/ (docs/design.md §2), checked on the source with `ast`: nothing is imported or run.

- the UI never imports torch (it talks to the engine's public API only);
- views are pure (no streamlit), pages build no figures (no plotly: figures come from app/views);
- one catch-all handler in the whole app (no import-path edits: tests/engine/test_layout.py checks every package);
- every page file is in the navigation (tests/app/test_layout_app.py: each page in its own folder).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"
PAGE_FOLDERS = ("playground", "lessons", "sweep", "predictor", "replay", "serving")  # app/<folder>/<folder>.py
PAGES = [APP / folder / f"{folder}.py" for folder in PAGE_FOLDERS]
CATCH_ALL_HOME = APP / "common" / "page_helpers.py"  # `last_resort`, the app's one catch-all


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _imported(path: Path) -> set[str]:
    """Top-level package names `path` imports (import x.y -> x; from x.y import z -> x; relative imports skipped)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_app_modules_exist():
    assert len(_modules(APP)) >= 10 and all(p.is_file() for p in PAGES)


def test_no_app_module_imports_torch():
    offenders = [str(p.relative_to(ROOT)) for p in _modules(APP) if "torch" in _imported(p)]
    assert not offenders, f"app/ must reach torch only through the engine: {offenders}"


def test_views_are_pure_and_pages_build_no_figures():
    impure = [str(p.relative_to(ROOT)) for p in _modules(APP / "views") if "streamlit" in _imported(p)]
    assert not impure, f"views must not call streamlit: {impure}"
    plotting = [str(p.relative_to(ROOT)) for p in PAGES if "plotly" in _imported(p)]
    assert not plotting, f"pages must take their figures from app/views: {plotting}"


def test_one_catch_all_handler():
    """Pages catch the errors the engine raises; only page_helpers.last_resort catches everything."""
    found = []
    for path in _modules(APP):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ExceptHandler):
                names = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
                if node.type is None or any(getattr(n, "id", None) in ("Exception", "BaseException") for n in names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert len(found) == 1 and found[0].startswith(str(CATCH_ALL_HOME.relative_to(ROOT))), found


def test_every_page_file_is_in_the_navigation():
    """Each room's page file (app/x/x.py) is opened by app/main.py (tests/app/test_layout_app.py checks what it names)."""
    text = (APP / "main.py").read_text(encoding="utf-8")
    files = [p for p in sorted(APP.glob("*/*.py")) if p.stem == p.parent.name]
    orphans = [str(p.relative_to(ROOT)) for p in files if f'"{p.stem}" / "{p.name}"' not in text]
    assert not orphans, f"page files no navigation entry reaches: {orphans}"


def test_pages_need_no_streamlit_magic_and_it_is_off():
    """Magic is off (.streamlit/config.toml: CPython 3.11 can fail building page ASTs in concurrent sessions), so
    no app file may rely on it: no bare expression or string statement other than a docstring."""
    import tomllib

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["runner"]["magicEnabled"] is False
    for path in (ROOT / "app").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            body = getattr(node, "body", None)
            if not isinstance(body, list):
                continue
            for i, stmt in enumerate(body):
                if not isinstance(stmt, ast.Expr) or isinstance(stmt.value, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom)):
                    continue
                docstring = i == 0 and isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                assert docstring and isinstance(stmt.value, ast.Constant), f"{path.name}:{stmt.lineno} relies on magic"
