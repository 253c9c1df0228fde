"""The engine's own source text for the step-through, read from the files without importing them.

The app never imports torch (tests/app/test_contracts.py), and the engine's decode loop does, so the
functions are found by parsing the engine's files with `ast` and cutting out their lines (the way
`inspect.getsource` would, from the file the engine runs). `numbered_block` cuts one numbered step
("# 1. draft", "# 2. verify", ...) out of Decoder.step, the loop written after Leviathan et al. 2023,
Algorithm 1. No streamlit.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
import threading
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine"


class SourceError(LookupError):
    """The engine file or the function in it was not found (the engine was changed; a test catches this)."""


_PARSE = threading.Lock()  # CPython 3.11 can fail building ASTs in two threads at once (python/cpython#106905)


@functools.lru_cache(maxsize=32)
def _tree(relpath: str) -> tuple[str, ast.Module]:
    with _PARSE:
        return _parse(relpath)


def _parse(relpath: str) -> tuple[str, ast.Module]:
    path = ENGINE / relpath
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SourceError(f"engine/{relpath} could not be read ({exc.strerror or exc})") from None
    return text, ast.parse(text)


def source_of(relpath: str, qualname: str) -> str:
    """The source of `qualname` ("Decoder.step", "verify") in engine/`relpath`, dedented, decorators included."""
    text, node = _tree(relpath)
    for name in qualname.split("."):
        found = next(
            (
                n
                for n in ast.iter_child_nodes(node)
                if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and n.name == name
            ),
            None,
        )
        if found is None:
            raise SourceError(f"{qualname} was not found in engine/{relpath}")
        node = found
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    lines = text.splitlines()[first - 1 : node.end_lineno]
    return textwrap.dedent("\n".join(lines))


_STEP = re.compile(r"^\s*# (\d+)\. ")


def numbered_block(source: str, number: int) -> str:
    """The lines of step `number` in a loop whose steps open with '# N. ...' comments (up to the next one)."""
    lines = source.splitlines()
    starts = [(i, int(m.group(1))) for i, line in enumerate(lines) if (m := _STEP.match(line))]
    for j, (i, n) in enumerate(starts):
        if n == number:
            end = starts[j + 1][0] if j + 1 < len(starts) else len(lines)
            return textwrap.dedent("\n".join(lines[i:end])).rstrip()
    raise SourceError(f"no '# {number}.' step in this source")


# The code beside each stage of the step-through (app/views/stepthrough.py STAGES): (engine file, function,
# numbered step of Decoder.step or None for the whole function).
STAGE_SOURCES = [  # per stage: (engine file, function, numbered block of Decoder.step or None)
    [("decoding/decode.py", "Decoder.step", 1)],
    [("decoding/decode.py", "Decoder.step", 2), ("decoding/decode.py", "Decoder.target_pass", None)],
    [
        ("decoding/decode.py", "Decoder.step", 3),
        ("sampling.py", "verify", None),
        ("sampling.py", "accept_greedy", None),
        ("sampling.py", "first_rejection", None),
    ],
    [("sampling.py", "accept_greedy", None), ("sampling.py", "accept_or_resample", None)],
    [
        ("decoding/decode.py", "Decoder.step", 4),
        ("decoding/decode.py", "Decoder.roll_back", None),
        ("model/kvcache.py", "RaggedCache.keep", None),
    ],
]
TREE_STAGE_SOURCES = [  # the same for a draft-tree step (engine/decoding/verify_tree.py, engine/drafters/tree.py)
    [
        ("decoding/decode.py", "Decoder.step", 1),
        ("drafters/eagle.py", "EagleDrafter.propose_tree", None),
        ("drafters/tree.py", "grow_tree", None),
    ],
    [
        ("decoding/decode.py", "Decoder.step", 2),
        ("decoding/decode.py", "Decoder.target_pass", None),
        ("drafters/tree.py", "DraftTree.attention", None),
    ],
    [
        ("decoding/decode.py", "Decoder.step", 3),
        ("decoding/verify_tree.py", "verify_tree", None),
        ("decoding/verify_tree.py", "accept_tree_greedy", None),
    ],
    [("decoding/verify_tree.py", "accept_tree_greedy", None), ("decoding/verify_tree.py", "accept_tree_sampling", None)],
    [
        ("decoding/decode.py", "Decoder.step", 4),
        ("decoding/decode.py", "Decoder.roll_back", None),
        ("model/kvcache.py", "RaggedCache.keep_path", None),
    ],
]


def drafter_sources() -> dict[str, tuple[str, str]]:
    """kind -> (file, "Class.propose") of every drafter in engine/drafters/: each class that declares `kind = "..."`
    (engine/drafters/base.py, Drafter), found by parsing, so a new drafter's module is enough."""
    found = {}
    for path in sorted((ENGINE / "drafters").glob("*.py")):
        relpath = f"drafters/{path.name}"
        for node in _tree(relpath)[1].body:
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                targets = [t.id for t in getattr(item, "targets", []) if isinstance(t, ast.Name)]
                if "kind" in targets and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str):
                    found[item.value.value] = (relpath, f"{node.name}.propose")
    return found


DRAFTER_SOURCES = drafter_sources()
