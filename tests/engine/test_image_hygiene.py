"""What goes into the Space's image (issue 30, item 7): no GGUF parts from scripts/gpu_record.sh, no test-only
dependency among the runtime pins, and the Space's front matter names its license and models."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dockerignore_keeps_out_what_gpu_record_writes():
    ignored = {line.strip().rstrip("/").lstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()}
    script = (ROOT / "scripts" / "gpu_record.sh").read_text()
    made = set(re.findall(r"mkdir -p ((?:\.[\w]+ ?)+)", script)[0].split())
    assert made and made <= ignored, f"{sorted(made - ignored)} would be copied into the image"
    assert "*.gguf" in ignored


def _imports(folder: str) -> set[str]:
    names = set()
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_scipy_is_a_test_tool_not_a_runtime_pin():
    runtime = _imports("engine") | _imports("app") | _imports("training")
    assert "scipy" not in runtime
    pins = (ROOT / "requirements.txt").read_text()
    assert not re.search(r"^scipy", pins, re.M)
    assert re.search(r"^scipy==", (ROOT / "requirements-dev.txt").read_text(), re.M)


def test_space_front_matter_names_license_and_models():
    front = (ROOT / "README.md").read_text().split("---")[1]
    assert re.search(r"^license: apache-2.0$", front, re.M)
    models = re.findall(r"^  - (\S+)$", front, re.M)
    assert "HuggingFaceTB/SmolLM2-135M-Instruct" in models and "Qwen/Qwen2.5-7B-Instruct" in models
