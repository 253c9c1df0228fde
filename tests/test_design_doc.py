"""docs/design.md stays current: every path, function, test name, layer rule and CLI flag it names exists.

Checked on the source with `ast` (nothing from the app is imported, nothing is run but the CLI's parser):
- every repository path (`engine/...py`, `app/...py`, `tests/...`, `scripts/...`, `training/...`, `lessons/`, `docs/...`);
- every dotted reference `engine.x.y.name` / `app.x.name` / `training.x.name`: a module, then a name defined in it;
- every backticked `Class.attribute` whose class is SpecLab's, every backticked `function()` and `test_name`;
- the layer table equals tests/engine/test_layout.py's LAYER_RULES;
- the CLI block names exactly the flags `python -m engine` takes, per subcommand.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "design.md"
PACKAGES = ("engine", "app", "training")
SOURCE_FOLDERS = ("engine", "app", "training", "scripts", "tests")
PATH = re.compile(r"(?<![\w/.$-])((?:engine|app|tests|scripts|training|lessons|docs)/[\w/.*-]*)")
DOTTED = re.compile(r"(?<![\w.])((?:engine|app|training)(?:\.\w+)+)")
BACKTICKED = re.compile(r"`([^`\n]+)`")
# Names outside SpecLab that the doc cites as Class.attribute (another project's API)
OUTSIDE_CLASSES = {"CandidateGenerator", "LlamaForCausalLM", "DynamicCache"}


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def cited_paths(text: str) -> set[str]:
    return {m.rstrip(".,:;)") for m in PATH.findall(text)}


def missing_paths(text: str) -> list[str]:
    missing = []
    for path in sorted(cited_paths(text)):
        found = any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()
        if not found:
            missing.append(path)
    return missing


@cache
def _module_tree(relpath: str) -> ast.Module:
    return ast.parse((ROOT / relpath).read_text(encoding="utf-8"))


def _defined(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """Names a module or class body defines: functions, classes, assignments, imports, and the names a literal
    `__all__` declares (engine/__init__.py loads its API's names at their first use)."""
    names: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node
                if isinstance(target, ast.Name) and target.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                    names.update({e.value: node for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)})
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
    return names


def _module_file(parts: list[str]) -> str | None:
    base = "/".join(parts)
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if (ROOT / candidate).exists():
            return candidate
    return None


def dotted_exists(ref: str) -> bool:
    """engine.decoding.decode.Decoder.step: the longest prefix that is a module, then names defined inside it."""
    parts = ref.split(".")
    for cut in range(len(parts), 0, -1):
        relpath = _module_file(parts[:cut])
        if relpath is None:
            continue
        rest = parts[cut:]
        if rest and rest[0] == "py":  # a file name written with dots (engine/foo.py seen as engine.foo.py)
            return cut == len(parts) - 1
        body = _module_tree(relpath).body
        for name in rest:
            node = _defined(body).get(name)
            if node is None:
                # a submodule of a package (engine.drafters.tree) is reached by the longer prefix above
                return False
            body = node.body if isinstance(node, ast.ClassDef) else []
        return True
    return False


@cache
def repo_definitions() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """SpecLab's classes (name -> attributes they define: methods and fields) and functions (name -> parameters)."""
    classes: dict[str, set[str]] = {}
    functions: dict[str, set[str]] = {}
    for folder in SOURCE_FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    attrs = classes.setdefault(node.name, set())
                    attrs |= set(_defined(node.body))
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    args = node.args
                    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
                    functions.setdefault(node.name, set()).update(params)
    return classes, functions


def call_arguments(text: str, name: str) -> list[tuple[list[str], list[str]]]:
    """Each `name(...)` in text: (bare identifiers, keyword names) at the call's own depth, comments dropped."""
    calls = []
    for match in re.finditer(rf"(?<![\w.]){name}\(", text):
        depth, i, inner = 1, match.end(), []
        while i < len(text) and depth:
            ch = text[i]
            if ch == "#":  # a comment inside a multi-line call runs to the end of its line
                i = text.find("\n", i)
                i = len(text) if i < 0 else i
                continue
            depth += {"(": 1, ")": -1}.get(ch, 0)
            inner.append(ch if depth == 1 or ch in "()" else " ")
            i += 1
        parts = [p.strip() for p in re.sub(r"\([^()]*\)", "", "".join(inner[:-1])).split(",")]
        calls.append(([p for p in parts if p.isidentifier()], [p.split("=")[0].strip() for p in parts if re.match(r"\w+\s*=", p)]))
    return calls


def missing_references(text: str) -> list[str]:
    missing = [ref for ref in sorted(set(DOTTED.findall(text))) if not dotted_exists(ref)]
    classes, functions = repo_definitions()
    for cls, name in sorted(set(re.findall(r"(?<![\w.])([A-Z]\w*)\.([a-z_]\w*)", text))):
        if cls in classes and name not in classes[cls]:  # Class.attribute anywhere, the diagrams included
            missing.append(f"{cls}.{name}")
    for name in sorted(set(re.findall(r"(?<![\w.])(\w+)\(", text)) & (set(classes) | set(functions))):
        fields = classes.get(name, set()) | functions.get(name, set())
        for bare, keywords in call_arguments(text, name):
            unknown = keywords + (bare if name in classes else [])
            missing += [f"{name}({arg}=)" for arg in unknown if arg not in fields]
    for span in sorted(set(BACKTICKED.findall(text))):
        attr = re.fullmatch(r"([A-Z]\w*)\.(\w+)(?:\(.*\))?", span)
        call = re.fullmatch(r"(\w+)\((?:\.\.\.|[^()]*)\)", span)
        if attr and attr.group(1) not in OUTSIDE_CLASSES:
            cls, name = attr.groups()
            if cls not in classes or name not in classes[cls]:
                missing.append(span)
        elif call and call.group(1) not in functions:
            missing.append(span)
        elif re.fullmatch(r"test_\w+", span) and span not in functions:
            missing.append(span)
    return sorted(set(missing))


def test_every_cited_path_exists():
    assert len(cited_paths(doc_text())) >= 30
    assert missing_paths(doc_text()) == []


def test_every_cited_function_class_and_test_exists():
    text = doc_text()
    assert len(set(DOTTED.findall(text))) >= 20
    assert missing_references(text) == []


def test_the_checks_catch_a_stale_reference():
    """The checkers on text naming things that do not exist (so the tests above can fail)."""
    stale = (
        "`engine/decoding/gone.py` `app/views/nothing.py` engine.decoding.decode.Decoder.nostep "
        "engine.sampling.accept_everything `RaggedCache.truncate` `rewind_caches()` `test_nothing_at_all`\n"
        "  4. ROLL BACK  RaggedCache.rewind -> Draft(ids, bogus)  DecodeConfig(depth=4,  # k\n  width=2)"
        "  load_pair(size=1)"
    )
    assert missing_paths(stale) == ["app/views/nothing.py", "engine/decoding/gone.py"]
    assert missing_references(stale) == [
        "DecodeConfig(width=)",
        "Draft(bogus=)",
        "RaggedCache.rewind",
        "RaggedCache.truncate",
        "engine.decoding.decode.Decoder.nostep",
        "engine.sampling.accept_everything",
        "load_pair(size=)",
        "rewind_caches()",
        "test_nothing_at_all",
    ]
    fine = (
        "engine/decoding/decode.py engine.decoding.decode.Decoder.step `RaggedCache.keep` `verify_tree()` "
        "Draft(ids, q_x) DecodeConfig(depth=4, tree_nodes=0) load_pair(dtype='auto')"
    )
    assert missing_paths(fine) == [] and missing_references(fine) == []


def doc_layer_rules(text: str) -> dict[str, set[str]]:
    """The '| layer | never imports from |' table of section 2."""
    table = text.split("| layer | never imports from |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| (\w+) \| ([\w, ]+) \|$", table, flags=re.M)
    return {layer: {name.strip() for name in names.split(",")} for layer, names in rows}


def test_the_layer_table_is_the_enforced_one():
    spec = importlib.util.spec_from_file_location("_layout", ROOT / "tests" / "engine" / "test_layout.py")
    layout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layout)
    assert len(layout.LAYER_RULES) >= 5
    assert doc_layer_rules(doc_text()) == layout.LAYER_RULES


def doc_cli_flags(text: str) -> dict[str, set[str]]:
    """Flags per subcommand in the CLI block of section 4 (a line 'run, bench, passes also:' adds to those three)."""
    block = text.split("python -m engine run     ", 1)[1].split("```", 1)[0]
    block = "python -m engine run     " + block
    flags: dict[str, set[str]] = {}
    current: list[str] = []
    for line in block.splitlines():
        head = re.match(r"python -m engine ([\w-]+)", line)
        also = re.match(r"([\w, ]+) also:", line)
        if head:
            current = [head.group(1)]
        elif also:
            current = [c.strip() for c in also.group(1).split(",")]
        for command in current:
            flags.setdefault(command, set()).update(re.findall(r"(--[\w-]+)", line))
    return flags


def parser_flags() -> dict[str, set[str]]:
    import argparse

    from engine.cli.parser import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {
        name: {s for action in parser._actions for s in action.option_strings if s.startswith("--") and s != "--help"}
        for name, parser in sub.choices.items()
    }


def test_the_cli_block_names_exactly_the_flags_the_cli_takes():
    assert doc_cli_flags(doc_text()) == parser_flags()


@pytest.mark.parametrize("section", ["## 1.", "## 2.", "## 3.", "## 4.", "## 5.", "## 6.", "## 7.", "## 8."])
def test_every_section_is_there(section):
    assert any(line.startswith(section) for line in doc_text().splitlines())
