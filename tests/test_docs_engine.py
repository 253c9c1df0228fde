"""docs/engine.md stays current, as docs/design.md does (tests/test_design_doc.py), and the docs' links resolve.

Checked on the source with `ast`, nothing imported from the engine:
- every repository path, dotted reference (`engine.x.y.name`), backticked `Class.attribute`, `function()` and
  `test_name` docs/engine.md names exists (the checkers of tests/test_design_doc.py);
- every backticked short reference `module.name` (`sampling.greedy_stats`, `passes.Pass.body`) names a
  module of engine/ and a name defined in it;
- the `cuda_graphs` switch is described as `make_cache` decides it (on the CPU "off" runs the fast pass);
- docs/measurements.md is the current state: at most 300 lines (the dated history is docs/journal.md), and it and
  docs/benchmarks.md name only files, scripts and functions that exist;
- every relative link in docs/*.md and README.md resolves to a file or folder, and every anchor into a Markdown
  page to one of its headings.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "engine.md"
MAX_MEASUREMENTS_LINES = 300
# Backticked `name.attr` spans that are variables of the doc's examples, not modules: name -> the class it holds
INSTANCES = {"pair": "ModelPair"}
LINK = re.compile(r"(?<!\\)\[[^\]]*(?<!\\)\]\(([^)\s]+)\)")  # [text](target); an escaped \[x\](y) is no link


def _design_checks():
    spec = importlib.util.spec_from_file_location("_design_doc_checks", ROOT / "tests" / "test_design_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHECKS = _design_checks()


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


@cache
def engine_modules() -> dict[str, list[Path]]:
    """Module basename -> its files under engine/ (engine/model/fastllama.py -> "fastllama")."""
    found: dict[str, list[Path]] = {}
    for path in (ROOT / "engine").rglob("*.py"):
        name = path.parent.name if path.name == "__init__.py" else path.stem
        found.setdefault(name, []).append(path)
    return found


def _defined_in(path: Path, names: list[str]) -> bool:
    body = ast.parse(path.read_text(encoding="utf-8")).body
    for name in names:
        node = CHECKS._defined(body).get(name)
        if node is None:
            return False
        body = node.body if isinstance(node, ast.ClassDef) else []
    return True


def missing_short_references(text: str) -> list[str]:
    """Backticked `module.name[.attr]` (optionally called) whose module is one of engine/'s and whose name it lacks."""
    classes, _ = CHECKS.repo_definitions()
    missing = []
    for span in sorted(set(re.findall(r"`([a-z_]\w*(?:\.\w+)+)(?:\([^`]*\))?`", text))):
        head, *rest = span.split(".")
        if head in ("engine", "app", "training") or rest[-1] in ("py", "json", "md", "c", "txt", "log", "toml"):
            continue  # dotted references are CHECKS' job; file names are not references
        if head in INSTANCES:
            if rest[0] not in classes.get(INSTANCES[head], set()):
                missing.append(span)
        elif head in engine_modules() and not any(_defined_in(path, rest) for path in engine_modules()[head]):
            missing.append(span)
    return missing


def test_every_cited_path_exists():
    text = doc_text()
    assert len(CHECKS.cited_paths(text)) >= 20
    assert CHECKS.missing_paths(text) == []


def test_every_cited_function_class_and_test_exists():
    assert CHECKS.missing_references(doc_text()) == []


def test_every_short_module_reference_exists():
    text = doc_text()
    assert len(re.findall(r"`(?:sampling|cpukernels|fastllama)\.\w+", text)) >= 3  # so the check below checks something
    assert missing_short_references(text) == []


def test_the_short_reference_check_catches_a_stale_one():
    stale = "`fastpass.native_pass` `sampling.greedy_everything()` `fastllama.LeanLlama.nobody` `pair.nothing`"
    assert missing_short_references(stale) == [
        "fastllama.LeanLlama.nobody",
        "fastpass.native_pass",
        "pair.nothing",
        "sampling.greedy_everything",
    ]
    fine = (
        "`backend.choose_backend` `sampling.greedy_ids()` `fastllama.LeanLlama.prepared` `pair.loaded` `torch.compile` `draft_vocab.json`"
    )
    assert missing_short_references(fine) == []


def test_the_cuda_graphs_switch_is_described_as_make_cache_decides_it():
    """engine/model/static_cache.py `make_cache` applies the run's backend (engine/model/backend.py): with cuda_graphs
    "off" (and "auto" off CUDA) the CPU runs the fast pass over static buffers, trees included; the dynamic cache is
    the lean pass's (tests/engine/test_fastpass.py)."""
    text = doc_text()
    switch = text.split("- **Switch.**", 1)[1].split("- **Static buffers**", 1)[0]
    assert "make_cache" in switch and "backend" in switch and "static_tree.py" in switch
    assert "engine.model.backend.choose_backend" in text and "SPECLAB_BACKEND" in text
    off = switch.split('`"off"` (default)', 1)[1].split('- `"auto"`', 1)[0]
    assert "fast pass" in off and "dynamic cache" in off
    for stale in ("tree drafting always runs eager", "so CPU runs are unchanged", "eager passes over the dynamic cache, today's path"):
        assert stale not in text
    source = (ROOT / "engine" / "model" / "static_cache.py").read_text(encoding="utf-8")
    assert "def make_cache(" in source and "choose_backend(device, cfg.backend, cfg.cuda_graphs)" in source  # it still decides


@pytest.mark.parametrize("page", ["measurements.md", "benchmarks.md"])
def test_the_current_state_pages_cite_only_what_exists(page):
    """The pages that read as today name no removed file, script or function (docs/journal.md is history: it may)."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    assert len(CHECKS.cited_paths(text)) >= 10
    assert CHECKS.missing_paths(text) == []
    outside = {"engine.md"}  # a page name read as a dotted reference
    # transformers' own generate(assistant_model=..., prompt_lookup_num_tokens=...) is cited beside SpecLab's generate
    missing = [ref for ref in CHECKS.missing_references(text) if ref not in outside and not ref.startswith("generate(")]
    assert missing == []
    assert missing_short_references(text) == []


def test_measurements_is_the_current_state_not_a_notebook():
    lines = (ROOT / "docs" / "measurements.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_MEASUREMENTS_LINES, f"docs/measurements.md has {len(lines)} lines: dated history goes to docs/journal.md"
    assert (ROOT / "docs" / "journal.md").exists()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (word characters, spaces and hyphens kept),
    spaces to hyphens."""
    text = re.sub(r"`|\*\*", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not re.match(r"#{1,6} ", line):
            continue
        base = slug(line.lstrip("#"))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return frozenset(out)


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    broken = []
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{page.relative_to(root)}: {target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{page.relative_to(root)}: {target} (no such heading)")
    return broken


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_relative_link_in_the_docs_resolves():
    pages = doc_pages()
    assert len(pages) >= 10 and sum(len(LINK.findall(p.read_text(encoding="utf-8"))) for p in pages) >= 100
    assert [b for page in pages for b in broken_links(page)] == []


def test_the_link_check_catches_a_broken_link(tmp_path):
    (tmp_path / "a.md").write_text("# A page\n\n## Two `words` here\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md) [ok](a.md#two-words-here) [ok](#b) [web](https://example.org/x.md)\n"
        "[gone](missing.md) [bad anchor](a.md#nowhere)\n# B\n",
        encoding="utf-8",
    )
    assert broken_links(page, root=tmp_path) == ["b.md: missing.md (no such file)", "b.md: a.md#nowhere (no such heading)"]


def test_the_docs_index_lists_every_page():
    """docs/README.md's table names every page of docs/ (the journal and the benchmarks index included)."""
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name != "README.md":
            assert f"]({page.name})" in index, f"docs/README.md does not list {page.name}"
