#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite: engine, views, AppTest pages, real browser.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
if ! command -v chromium >/dev/null 2>&1; then
  # Debian's Chromium for the real-browser tests (Playwright's own browser download does not work offline).
  if [ "$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium chromium-driver; \
  else sudo apt-get update -q && sudo apt-get install -y -q chromium chromium-driver; fi
fi
exec .venv/bin/python -m pytest -q tests "$@"
