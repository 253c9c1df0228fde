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
    code = (
        "import sys, engine, engine.__main__, engine.cli.parser, engine.bench, engine.drafters; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN_IN_ENGINE!r}))"
    )
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


def test_every_drafter_implements_the_interface_and_declares_itself():
    from engine.drafters import DRAFTERS, Drafter

    hooks = [name for name in vars(Drafter) if not name.startswith("_")]
    assert {"prefill", "propose", "commit", "select", "take_counts", "token_flops", "build", "label"} <= set(hooks)
    declared = {"kind": str, "display": str, "about": str, "branches": bool, "confident": bool}
    for kind, cls in DRAFTERS.items():
        assert cls.kind == kind
        missing = [h for h in hooks if not hasattr(cls, h)]
        assert not missing, f"{cls.__name__} lacks {missing}"
        for name, kind_of in declared.items():
            assert isinstance(vars(cls).get(name), kind_of), f"{cls.__name__} does not declare {name}"
        assert "loads" in vars(cls) and cls.loads in (None, "draft", "eagle"), cls.__name__
    assert len({cls.display for cls in DRAFTERS.values()}) == len(DRAFTERS)  # the app's labels name one drafter each


def test_decode_loop_never_asks_which_drafter_it_holds():
    source = (ROOT / "engine" / "decoding" / "decode.py").read_text()
    for name in ("ModelDrafter", "EagleDrafter", "NgramDrafter", "isinstance(drafter", "isinstance(self.drafter"):
        assert name not in source


def test_speculative_step_fits_on_one_screen():
    """docs/design.md §3: the draft -> verify -> accept -> roll back step reads on one screen (<= 80 lines)."""
    import inspect

    from engine.decoding.decode import Decoder

    lines = inspect.getsource(Decoder.step).splitlines()
    assert len(lines) <= 80
    body = "\n".join(lines)
    for marker in ("# 1. draft", "# 2. verify", "# 3. accept", "# 4. roll back"):
        assert marker in body


# --- the layers inside engine/ (docs/design.md §2, "The layers in a page") ----------------------------------------
ENGINE = ROOT / "engine"
LAYER_RULES = {  # subpackage -> subpackages it must never import (at any depth of a file: function-level too)
    "model": {"drafters", "decoding", "bench", "roofline", "cli"},
    "drafters": {"decoding", "bench", "cli"},
    "decoding": {"bench", "roofline", "cli"},
    "trace": {"model", "drafters", "decoding", "bench", "cli"},
    "roofline": {"model", "drafters", "decoding", "bench", "cli"},
    "serving": {"model", "drafters", "decoding", "roofline", "trace", "cli"},  # a server elsewhere decodes; only the prompt sets
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def engine_import_graph() -> dict[str, set[str]]:
    """engine module -> the engine modules it imports anywhere in its file (relative imports resolved)."""
    modules = {_module_name(p): p for p in ENGINE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    if f"{module}.{alias.name}" in modules:
                        targets.add(f"{module}.{alias.name}")
                    elif module in modules:
                        targets.add(module)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names if alias.name in modules)
        targets.discard(name)
        graph[name] = targets
    return graph


def test_no_import_cycle_anywhere_in_the_engine():
    """Tarjan's strongly connected components over the import graph: every component is one module."""
    graph = engine_import_graph()
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert cycles == [], f"import cycles in engine/: {cycles}"


def test_the_cycle_check_sees_a_cycle(tmp_path, monkeypatch):
    """The checker itself on a two-module circle written to a temporary tree (so the test above can fail)."""
    pkg = tmp_path / "engine"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from engine.b import g\n")
    (pkg / "b.py").write_text("from .a import f\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "ENGINE", pkg)
    graph = engine_import_graph()
    assert graph["engine.a"] == {"engine.b"} and graph["engine.b"] == {"engine.a"}
    with pytest.raises(AssertionError, match="import cycles"):
        test_no_import_cycle_anywhere_in_the_engine()


@pytest.mark.parametrize("layer", sorted(LAYER_RULES))
def test_each_engine_layer_imports_only_what_is_below_it(layer):
    graph = engine_import_graph()
    bad = [
        f"{module} imports {target}"
        for module, targets in graph.items()
        if module == f"engine.{layer}" or module.startswith(f"engine.{layer}.")
        for target in targets
        if target.split(".")[1:2] and target.split(".")[1] in LAYER_RULES[layer]
    ]
    assert bad == [], bad


def test_every_engine_subpackage_has_a_layer_rule_or_is_a_top_module():
    """A new folder in engine/ must say where it sits (add it to LAYER_RULES and docs/design.md)."""
    folders = {p.name for p in ENGINE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders - {"bench", "cli"} == set(LAYER_RULES)  # the top floor: the bench and the command line use every layer


def test_the_api_is_the_contract_and_a_torch_free_module_loads_without_torch():
    """`from engine import ...` gives the contract's names (engine/__init__.py loads them at first use); importing
    engine.formats (the app's class store reads its data folder there) loads no torch."""
    import engine

    assert sorted(engine.__all__) == sorted(engine._API)
    code = "import sys, engine.formats, engine.options, engine.config; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
    from engine import DecodeConfig, Trace, generate, generate_steps, load_pair

    assert callable(load_pair) and callable(generate) and callable(generate_steps) and DecodeConfig().depth >= 0
    assert Trace.__module__ == "engine.trace.file"
