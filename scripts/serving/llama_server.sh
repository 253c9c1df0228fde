#!/usr/bin/env bash
# A real speculative-decoding server on this machine: llama.cpp's llama-server (scripts/llama_cpp.sh, the one
# llama.cpp build the scripts share, the version scripts/record/llama_cpp_bench.sh measures), serving the embedded
# target with the shipped distilled draft, on 127.0.0.1 only.
#
#   bash scripts/serving/llama_server.sh build            # llama-server (Release, native, static; no UI, no TLS)
#   bash scripts/serving/llama_server.sh convert          # target and draft to bf16 GGUF (cached)
#   bash scripts/serving/llama_server.sh start PORT K NP  # K = draft tokens (0: plain), NP = parallel slots; prints its pid
#   bash scripts/serving/llama_server.sh stop PID         # stops that server (and only a llama-server)
#
# Outputs live in $SPECLAB_CACHE/llama.cpp (default ~/.cache/speclab/llama.cpp), shared with
# scripts/record/llama_cpp_bench.sh (the same sdist, the same converted target). Not part of CI or the tests; the
# tests use a server built here when one exists and skip with one line where not.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
source scripts/llama_cpp.sh  # the one llama.cpp build (LLAMA_CACHE, LLAMA_SRC, LLAMA_BUILD, llama_cpp_build)
CACHE=$LLAMA_CACHE
SRC=$LLAMA_SRC
SERVER=$LLAMA_BUILD/bin/llama-server
TARGET=$CACHE/smollm2-135m-instruct-bf16.gguf
DRAFT=$CACHE/speclab-distilled-draft-bf16.gguf

build() {
  llama_cpp_build llama-server
}

convert() {
  # The target: the converted GGUF scripts/record/llama_cpp_bench.sh makes (its convert step, the same cache).
  [ -f "$TARGET" ] || bash scripts/record/llama_cpp_bench.sh convert
  if [ -f "$DRAFT" ]; then
    echo "llama.cpp: $DRAFT already converted"
    return
  fi
  # The shipped distilled draft: a Llama in bf16 safetensors with the target's tokenizer (assets/draft). Its config
  # is transformers 5's (rope_parameters); the converter reads rope_theta, so a staged copy carries both.
  local stage=$CACHE/hf/SpecLab-distilled-draft
  rm -rf "$stage" && mkdir -p "$stage"
  ln -s "$PWD"/assets/draft/* "$stage"/ && rm "$stage/config.json"
  "$PY" - "$PWD/assets/draft/config.json" "$stage/config.json" <<'PYEOF'
import json, sys
config = json.load(open(sys.argv[1]))
rope = config.get("rope_parameters") or {}
if "rope_theta" in rope:
    config.setdefault("rope_theta", rope["rope_theta"])
json.dump(config, open(sys.argv[2], "w"), indent=2)
PYEOF
  "$CACHE/convert-venv/bin/python" "$SRC/convert_hf_to_gguf.py" "$stage" --outtype bf16 --outfile "$DRAFT.tmp"
  mv "$DRAFT.tmp" "$DRAFT"
}

start() {
  # PORT, K (draft tokens a step; 0 = plain decoding), NP (parallel slots, continuous batching across them).
  local port=${1:?port} k=${2:?draft tokens} np=${3:-8}
  [ -x "$SERVER" ] || { echo "no llama-server: run '$0 build' first" >&2; exit 1; }
  local spec=()
  if [ "$k" -gt 0 ]; then
    # Without --spec-type draft-simple llama-server loads the draft and does not speculate (b11434).
    spec=(-md "$DRAFT" --spec-type draft-simple --spec-draft-n-max "$k" --spec-draft-n-min 0 --spec-draft-p-min 0)
  fi
  local log=$CACHE/llama-server-$port.log
  "$SERVER" -m "$TARGET" "${spec[@]}" --host 127.0.0.1 --port "$port" -np "$np" -c $((np * 1024)) \
    -t "${THREADS:-2}" --metrics --no-webui >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 120); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
      echo "$pid"
      return
    fi
    kill -0 "$pid" 2>/dev/null || { echo "llama-server exited; its log: $log" >&2; tail -5 "$log" >&2; exit 1; }
    sleep 0.5
  done
  kill "$pid"; echo "llama-server did not become ready in 60 s; its log: $log" >&2; exit 1
}

stop() {
  local pid=${1:?pid}
  # Only a llama-server this script could have started: never another process that reused the number.
  if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "llama-server" ]; then
    kill "$pid" && wait "$pid" 2>/dev/null || true
  else
    echo "process $pid is not a llama-server; nothing stopped" >&2
  fi
}

case "${1:-}" in
  build) build ;;
  convert) convert ;;
  start) shift; start "$@" ;;
  stop) stop "${2:-}" ;;
  *) echo "usage: $0 build|convert|start PORT K NP|stop PID" >&2; exit 2 ;;
esac
