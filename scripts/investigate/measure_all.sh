#!/usr/bin/env bash
# Every measurement quoted in the README, in one sequential run (nothing else should be running).
# Output: artifacts/measure/*.txt and *.json
set -euo pipefail
cd "$(dirname "$0")/../.."
out=artifacts/measure; mkdir -p "$out"
py=.venv/bin/python
run() { local name=$1; shift; echo "== $name: $*"; "$@" 2>"$out/$name.log" | tee "$out/$name.txt"; }
run probe        $py -m engine probe
run passes_bf16  $py -m engine passes --batch 1,8 --tokens 1,2,4,8,16,32,64 --json "$out/passes_bf16.json"
run passes_fp32  $py -m engine passes --dtype float32 --batch 1 --tokens 1,2,3,4,8,16,64
run grid_model   $py -m engine bench --batch 1,4,8,16 --depth 0,2,3,4 --drafter model --baseline --json "$out/grid_model.json"
run ngram_copy   $py -m engine bench --batch 1 --depth 2,4,6 --drafter ngram --prompts extractive --baseline --json "$out/ngram_copy.json"
run app          $py scripts/investigate/measure_app.py --tokens 64 --depth 4
