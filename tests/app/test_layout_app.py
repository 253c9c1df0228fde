"""The app's rooms (issue 43, docs/design.md section 2): each page is a folder app/<page>/ holding <page>.py (the page
script Streamlit runs) and the code only that page uses; what pages share lives below them, in app/common/, app/views/ and app/classroom/.

- a page folder never imports another page's folder, and app/common/, app/views/, app/classroom/ never import a
  page folder (no upward import);
- app/views/ stays pure: from app/ it imports only app/views/ and the streamlit-free modules of app/common/;
- app/ holds no module besides main.py and __init__.py, every folder with code is a page or a shared layer, and
  no folder is called `pages` (next to the entry script that name switches Streamlit to its old multipage mode);
- every st.Page in app/main.py opens app/<page>/<page>.py, one per page folder, in order, with no url_path: the
  file's name gives the URL it had before (/sweep), and AppTest.switch_page finds the page before a first run.
Checked on the source with `ast` (function-level and relative imports count); planted imports show the checker
catches a sideways and an upward one.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"
PAGES = ("playground", "lessons", "sweep", "benchmarks", "predictor", "replay", "serving")  # navigation order
BELOW = ("common", "views", "classroom")


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def app_imports(path: Path, root: Path = ROOT) -> set[str]:
    """Every app.* name path `path` imports, relative imports resolved; `from app.x import y` gives app.x and app.x.y."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_pkg = parts[-1] == "__init__"
    own = parts[:-1] if is_pkg else parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = own if is_pkg else own[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return {m for m in found if m.startswith("app.")}


def crossings(root: Path = ROOT) -> list[str]:
    """'file imports module' for every import of a page folder from outside it (app/main.py aside)."""
    out = []
    for path in _modules(root / "app"):
        rel = path.relative_to(root / "app").parts
        if len(rel) == 1:
            continue  # main.py navigates; __init__.py is empty
        for module in sorted(app_imports(path, root)):
            there = module.split(".")[1]
            if there in PAGES and there != rel[0]:
                out.append(f"{path.relative_to(root).as_posix()} imports {module}")
    return out


def _module_file(module: str, root: Path = ROOT) -> Path | None:
    """The file of the longest prefix of `module` that is a module (app.common.x.NAME -> app/common/x.py)."""
    parts = module.split(".")
    for cut in range(len(parts), 1, -1):
        base = root.joinpath(*parts[:cut])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def uses_streamlit(path: Path, seen: set[Path] | None = None) -> bool:
    """Whether `path` imports streamlit, itself or through the app modules it imports."""
    seen = set() if seen is None else seen
    if path in seen:
        return False
    seen.add(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        if any(n.split(".")[0] == "streamlit" for n in names):
            return True
    return any(f is not None and uses_streamlit(f, seen) for f in map(_module_file, app_imports(path)))


def test_no_page_folder_is_imported_from_outside_it():
    assert crossings() == [], "a page's code used elsewhere belongs in app/common (or app/views when it is a pure view)"


def test_views_import_only_views_and_streamlit_free_common_modules():
    bad = []
    for path in _modules(APP / "views"):
        for module in sorted(app_imports(path)):
            room, target = module.split(".")[1], _module_file(module)
            if room == "views":
                continue
            if room == "common" and target is not None and target.parent == APP / "common" and not uses_streamlit(target):
                continue
            bad.append(f"{path.relative_to(ROOT).as_posix()} imports {module}")
    assert bad == []


def test_every_module_is_in_a_room_and_no_folder_is_called_pages():
    assert sorted(p.name for p in APP.glob("*.py")) == ["__init__.py", "main.py"]
    folders = {p.name for p in APP.iterdir() if p.is_dir() and _modules(p)}
    assert folders == set(PAGES) | set(BELOW), "a new folder in app/ is a page (in main.py's navigation) or a shared layer"
    for folder in (*PAGES, *BELOW):
        assert (APP / folder / "__init__.py").is_file(), f"app/{folder} is a package"
    assert [p for p in ROOT.rglob("pages") if p.is_dir() and ".git" not in p.parts and ".venv" not in p.parts] == []


def _path_parts(node: ast.AST) -> list[str]:
    """The string parts of a path join `APP / "x" / "x.py"`, left to right."""
    if isinstance(node, ast.Call) and node.args:  # str(...)
        return _path_parts(node.args[0])
    if isinstance(node, ast.BinOp):
        return _path_parts(node.left) + _path_parts(node.right)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    return []


def navigation() -> list[tuple[list[str], str | None]]:
    """(path parts, url_path) of each st.Page(...) in app/main.py, in order."""
    tree = ast.parse((APP / "main.py").read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "Page"]
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    out = []
    for call in calls:
        url = next((k.value.value for k in call.keywords if k.arg == "url_path" and isinstance(k.value, ast.Constant)), None)
        out.append((_path_parts(call.args[0]), url))
    return out


def test_every_page_in_main_is_its_folders_page_script():
    nav = navigation()
    assert [parts for parts, _ in nav] == [[page, f"{page}.py"] for page in PAGES]
    assert [url for _, url in nav] == [None] * len(PAGES), "the file name gives each page its URL (/lessons, /sweep, ...)"
    assert [page for page in PAGES if not (APP / page / f"{page}.py").is_file()] == []


def test_the_checks_catch_a_sideways_and_an_upward_import(tmp_path):
    files = {
        "app/__init__.py": "",
        "app/main.py": "from app.playground import playground\n",
        "app/common/__init__.py": "",
        "app/common/ok.py": "import streamlit\n",
        "app/views/__init__.py": "",
        "app/views/sweep.py": "def f():\n    from app.lessons.measurement import check\n",
        "app/lessons/__init__.py": "",
        "app/lessons/lessons.py": "from ..playground import controls\nfrom . import measurement\nfrom app.common import ok\n",
        "app/playground/__init__.py": "",
        "app/playground/controls.py": "import app.sweep.sweep\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert crossings(tmp_path) == [
        "app/lessons/lessons.py imports app.playground",
        "app/lessons/lessons.py imports app.playground.controls",
        "app/playground/controls.py imports app.sweep.sweep",
        "app/views/sweep.py imports app.lessons.measurement",
        "app/views/sweep.py imports app.lessons.measurement.check",
    ]
    assert uses_streamlit(tmp_path / "app/common/ok.py")
