"""scripts/ is indexed and unambiguous: every script is named in docs/benchmarks.md, no two scripts share a file name,
the llama.cpp build is written once (scripts/llama_cpp.sh) and the Streamlit server is launched from one place
(app/common/server.py)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in (ROOT / "scripts").rglob("*") if p.is_file() and p.suffix in (".py", ".sh") and "__pycache__" not in p.parts)


def test_every_script_is_indexed_in_benchmarks_md():
    index = (ROOT / "docs" / "benchmarks.md").read_text()
    assert len(SCRIPTS) > 20
    assert [str(p.relative_to(ROOT)) for p in SCRIPTS if f"`{p.name}`" not in index and f"{p.name}`" not in index] == []


def test_no_two_scripts_share_a_name():
    assert [name for name, n in Counter(p.name for p in SCRIPTS).items() if n > 1] == []


def test_one_llama_cpp_build_and_one_server_launcher():
    cmake = [str(p.relative_to(ROOT)) for p in SCRIPTS if re.search(r"^\s*cmake -S", p.read_text(), re.M)]
    assert cmake == ["scripts/llama_cpp.sh"]
    for script in ("scripts/record/llama_cpp_bench.sh", "scripts/serving/llama_server.sh"):
        assert "source scripts/llama_cpp.sh" in (ROOT / script).read_text()
    sources = [*SCRIPTS, *(ROOT / "tests").rglob("*.py"), *(ROOT / "app").rglob("*.py")]
    launch = re.compile(r'"-m",\s*"streamlit"|"streamlit",\s*"run"')
    launches = sorted(str(p.relative_to(ROOT)) for p in sources if launch.search(p.read_text()))
    assert launches == ["app/common/server.py"]
