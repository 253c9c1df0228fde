"""Batch-1 tokens/s of plain decoding, interleaved in one run: llama.cpp's llama-bench against SpecLab's
autoregressive decoding (the backends "torch", "fused" and "native": engine/model/backend.py) and transformers'
generate(),
on the same weights (the embedded SmolLM2-135M-Instruct, bfloat16 here and a bf16 GGUF there).

scripts/record/llama_cpp_bench.sh builds llama-bench, converts the weights and calls this; run alone:

  python scripts/record/llama_cpp_bench.py --llama-bench BUILD/bin/llama-bench --gguf MODEL-bf16.gguf \
      [--rounds 5] [--threads 2] [--prompts 1] [--max-new-tokens 64] [--q4-gguf Q4_1.gguf] [--out log.txt]

Each round runs every contender once, one after another, so a shared machine's drift hits them alike.
SpecLab's contenders decode the first --prompts held-out prompts one at a time (engine.bench.harness's
`_ours` and `hf_generate`: new tokens / wall clock, the prompt's prefill pass included). llama-bench
runs `-p L -n 64 -r 1` in a subprocess, L the prompts' mean length in tokens: its tg rate times only
the 64 decoding passes (from an empty cache), its pp rate the prefill of L tokens; from the two this
prints llama.cpp's rate with the prefill counted the way SpecLab's is, 64 / (L / pp + 64 / tg).
With --q4-gguf llama-bench also runs the Q4_1 file SpecLab dequantises (llama.cpp's own format for it):
a reference row, not the same-weights comparison.
Ratios are printed of the medians and, paired round by round, as the median and range of per-round ratios.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess

import torch


def lscpu() -> dict:
    """lscpu's model name and CPU count (empty where lscpu is missing)."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {k: fields[k].strip() for k in ("Model name", "CPU(s)", "Thread(s) per core", "Flags") if k in fields}


def llama_bench(binary: str, gguf: str, prompt_len: int, new_tokens: int, threads: int) -> dict:
    """One llama-bench run (one repetition of pp and of tg); its rates and the raw JSON lines."""
    cmd = [binary, "-m", gguf, "-p", str(prompt_len), "-n", str(new_tokens), "-t", str(threads), "-r", "1", "-o", "jsonl"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    rate = {("tg" if r["n_gen"] else "pp"): r["avg_ts"] for r in rows}
    return rate | {"raw": rows}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--llama-bench", required=True, help="path of the built llama-bench")
    p.add_argument("--gguf", required=True, help="the target's weights as a bf16 GGUF")
    p.add_argument("--q4-gguf", default=None, help="also llama-bench this GGUF (the embedded Q4_1 file itself), for reference")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2, help="torch's intra-op threads and llama-bench's -t")
    p.add_argument("--prompts", type=int, default=1, help="held-out prompts SpecLab decodes per round (each to --max-new-tokens)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--out", default=None, help="also write everything printed to this file")
    args = p.parse_args()
    sink = open(args.out, "w") if args.out else None

    def log(line: str = "") -> None:
        print(line, flush=True)
        if sink:
            sink.write(line + "\n")
            sink.flush()

    os.environ["SPECLAB_THREADS"] = str(args.threads)  # load_pair sizes torch's pool from it
    from engine import DecodeConfig, load_pair
    from engine.bench.harness import backend_lane, hf_generate
    from engine.bench.prompts import prompt_set_list
    from engine.bench.rates import rate_lines, ratio_lines

    pair = load_pair(dtype="bfloat16", draft="none", eagle="none")
    prompts = prompt_set_list("heldout")[: args.prompts]
    lengths = [len(pair.encode_prompt(q)) for q in prompts]
    plen = round(statistics.mean(lengths))
    m = args.max_new_tokens
    cpu = lscpu()
    log(f"date {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    name, cores, per_core = (
        cpu.get("Model name", platform.processor()),
        cpu.get("CPU(s)", os.cpu_count()),
        cpu.get("Thread(s) per core", "?"),
    )
    flags = cpu.get("Flags", "").split()
    log(
        f"machine: {name}, {cores} CPUs, {per_core} thread(s) per core; avx512_bf16 {'avx512_bf16' in flags} amx_bf16 {'amx_bf16' in flags}"
    )
    log(f"python {platform.python_version()}, torch {torch.__version__} threads {torch.get_num_threads()}, llama-bench -t {args.threads}")
    log(f"SpecLab: {pair.target_name}, {pair.dtype_name}, {len(prompts)} held-out prompts of {lengths} tokens, {m} new tokens, batch 1")
    log(f"llama.cpp: {args.llama_bench} -m {args.gguf} -p {plen} -n {m} -t {args.threads} -r 1")
    log(f"load before {os.getloadavg()}")

    ar = DecodeConfig(mode="autoregressive", max_new_tokens=m)

    def ours(backend):
        return backend_lane(pair, ar, backend)

    contenders = {
        "hf_generate": lambda ps, n: hf_generate(pair, ps, n, 1),
        "speclab_eager": ours("torch"),
        "speclab_fused": ours("fused"),
        "speclab_native": ours("native"),
        "llama_cpp": lambda ps, n: llama_bench(args.llama_bench, args.gguf, plen, n, args.threads),
    }
    if args.q4_gguf:
        contenders["llama_cpp_q4_1"] = lambda ps, n: llama_bench(args.llama_bench, args.q4_gguf, plen, n, args.threads)
    for run in contenders.values():  # warm-up: first calls, allocations, page cache
        run(prompts[:1], 8)
    keys = ["hf_generate", "speclab_eager", "speclab_fused", "speclab_native", "llama_cpp_tg", "llama_cpp_pp", "llama_cpp_e2e"]
    keys += ["llama_cpp_q4_1_tg", "llama_cpp_q4_1_pp", "llama_cpp_q4_1_e2e"] if args.q4_gguf else []
    rates: dict[str, list[float]] = {k: [] for k in keys}
    last = {}
    for r in range(args.rounds):
        for key, run in contenders.items():
            last[key] = got = run(prompts, m)
            if key.startswith("llama_cpp"):
                rates[f"{key}_tg"].append(got["tg"])
                rates[f"{key}_pp"].append(got["pp"])
                rates[f"{key}_e2e"].append(m / (plen / got["pp"] + m / got["tg"]))
                log(f"  llama-bench ({key}): {json.dumps(got['raw'])}")
            else:
                rates[key].append(got["tokens_per_s"])
        log(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in rates.items()) + f"; load {os.getloadavg()}")
    new = {k: last[k]["new_tokens"] for k in ("hf_generate", "speclab_eager", "speclab_fused", "speclab_native")}
    same = {
        "speclab_eager == hf_generate": last["speclab_eager"]["outputs"] == last["hf_generate"]["outputs"],
        "speclab_fused == speclab_eager": last["speclab_fused"]["outputs"] == last["speclab_eager"]["outputs"],
        "speclab_native == speclab_eager": last["speclab_native"]["outputs"] == last["speclab_eager"]["outputs"],
    }
    log(f"new tokens per round (SpecLab, of {m * len(prompts)} asked; llama-bench always decodes {m}): {new}; same tokens: {same}")
    log()
    for line in rate_lines(rates):
        log(line)
    pairs = [("speclab_native", "llama_cpp_e2e"), ("speclab_native", "llama_cpp_tg"), ("speclab_fused", "llama_cpp_e2e")]
    pairs += [("speclab_native", "hf_generate"), ("speclab_fused", "hf_generate"), ("speclab_eager", "hf_generate")]
    pairs += [("speclab_native", "speclab_fused"), ("speclab_fused", "speclab_eager"), ("hf_generate", "llama_cpp_e2e")]
    pairs += [("speclab_native", "llama_cpp_q4_1_e2e")]
    for line in ratio_lines(rates, pairs):
        log(line)
    log(f"load after {os.getloadavg()}")
    if sink:
        sink.close()


if __name__ == "__main__":
    main()
