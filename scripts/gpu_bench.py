"""The bench grid on a GPU, with random-weight models of real architectures (no hub, no downloads).

Step timing does not depend on weight values, so a target shaped like SmolLM2-1.7B or Qwen2.5-7B built
from its config, with random weights, measures the same forward-pass times as the real model. Random
weights do make acceptance arbitrary, so the main result is the *pass-cost curve* (one target forward
vs tokens per pass, i.e. the roofline, measured with CUDA events). The AR vs speculative grid after it
uses the n-gram drafter (no draft model, c ~ 0) with whatever acceptance the random model gives;
read its speedups together with the acceptance column.

    python scripts/gpu_bench.py [--shape smollm2-1.7b|qwen2.5-7b] [--batch 1,8,32,64] [--depth 0,2,4,8]

Uses the tokenizer shipped in assets/draft (or the cached embedded model) so the engine's chat
template path is exercised; no network access is needed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.bench import bench, format_passes, format_table, pass_costs  # noqa: E402
from engine.hardware import pick_device, pick_dtype, probe  # noqa: E402
from engine.models import ModelPair  # noqa: E402

SHAPES = {  # hidden, intermediate, layers, heads, kv heads, vocab, tied
    "smollm2-1.7b": (2048, 8192, 24, 32, 32, 49152, True),
    "qwen2.5-7b": (3584, 18944, 28, 28, 4, 152064, False),
}


def random_llama(shape: str, dtype, device):
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, inter, layers, heads, kv, vocab, tied = SHAPES[shape]
    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=4096,
        tie_word_embeddings=tied, eos_token_id=2, pad_token_id=2,
    )  # fmt: skip
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(dtype)
    return model.eval()


def tokenizer():
    from transformers import AutoTokenizer

    for folder in (ROOT / "assets" / "draft", Path.home() / ".cache" / "speclab" / "smollm2-135m-instruct"):
        if (folder / "tokenizer.json").exists():
            return AutoTokenizer.from_pretrained(folder)
    raise SystemExit("no tokenizer found: carry assets/draft (it ships one)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="smollm2-1.7b", choices=sorted(SHAPES))
    ap.add_argument("--batch", default="1,8,32,64")
    ap.add_argument("--depth", default="0,2,4,8")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    batches = [int(b) for b in args.batch.split(",")]
    depths = [int(d) for d in args.depth.split(",")]

    device = pick_device()
    dtype = pick_dtype("auto", device)
    t = time.perf_counter()
    target = random_llama(args.shape, dtype, device)
    tok = tokenizer()
    if target.config.vocab_size != len(tok):  # keep ids valid for a larger-vocab shape
        target.resize_token_embeddings(max(len(tok), target.config.vocab_size))
    pair = ModelPair(
        target=target, draft=None, tokenizer=tok, device=device, dtype=dtype,
        target_name=f"random-weight {args.shape}", draft_name=None, eos_ids=frozenset(),
    )  # fmt: skip
    peaks = probe(device, dtype)
    print(f"{peaks.device_name}: {peaks.peak_bandwidth / 1e9:.0f} GB/s, {peaks.peak_flops / 1e12:.0f} TFLOP/s "
          f"({peaks.dtype}), ridge {peaks.ridge_point:.0f} FLOP/byte; models built in {time.perf_counter() - t:.0f} s")
    rows = pass_costs(pair, batches, [1, 2, 4, 8, 16, 32, 64], context=256, repeats=5)
    print(format_passes(rows, peaks.peak_flops, peaks.peak_bandwidth))
    result = bench(pair, batches, depths, drafter="ngram", max_new_tokens=args.max_new_tokens, repeats=args.repeats)
    print(format_table(result))


if __name__ == "__main__":
    main()
