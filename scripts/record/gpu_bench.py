"""The bench grid on a GPU, with random-weight models of real architectures (no hub, no downloads).

Step timing does not depend on weight values, so a target shaped like SmolLM2-1.7B or Qwen2.5-7B built
from its config, with random weights, measures the same forward-pass times as the real model. Random
weights do make acceptance arbitrary, so the main result is the *pass-cost curve* (one target forward
vs tokens per pass, i.e. the roofline, measured with CUDA events). The AR vs speculative grid after it
uses the n-gram drafter (no draft model, c ~ 0) with whatever acceptance the random model gives;
read its speedups together with the acceptance column.

    python scripts/record/gpu_bench.py [--shape smollm2-135m,smollm2-1.7b,qwen2.5-7b] [--batch 1,8,32,64]
                                [--depth 0,2,4,8] [--grid-shapes smollm2-1.7b] [--json out.json]

Each shape runs in turn; one that fails prints its traceback and the next still runs (a lent GPU's
minutes are scarce). `--json` writes every measured row, with the probe's peaks, for the README.

Uses the tokenizer shipped in assets/draft (or the cached embedded model) so the engine's chat
template path is exercised; no network access is needed.
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from pathlib import Path

import torch

from engine.bench.harness import bench, format_passes, format_table
from engine.decoding.passcurve import pass_costs
from engine.formats import cache_dir
from engine.hardware import pick_device, pick_dtype, probe
from engine.model.pair import ModelPair

ROOT = Path(__file__).resolve().parents[2]

SHAPES = {  # hidden, intermediate, layers, heads, kv heads, vocab, tied
    "smollm2-135m": (576, 1536, 30, 9, 3, 49152, True),  # the embedded target's own shape
    "smollm2-1.7b": (2048, 8192, 24, 32, 32, 49152, True),
    "qwen2.5-7b": (3584, 18944, 28, 28, 4, 152064, False),
}


def random_llama(shape: str, dtype, device):
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, inter, layers, heads, kv, vocab, tied = SHAPES[shape]
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        max_position_embeddings=4096,
        tie_word_embeddings=tied,
        eos_token_id=2,
        pad_token_id=2,
    )
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(dtype)
    return model.eval()


def tokenizer():
    from transformers import AutoTokenizer

    for folder in (ROOT / "assets" / "draft", cache_dir() / "smollm2-135m-instruct"):
        if (folder / "tokenizer.json").exists():
            return AutoTokenizer.from_pretrained(folder)
    raise SystemExit("no tokenizer found: carry assets/draft (it ships one)")


def random_pair(shape: str, dtype, device) -> ModelPair:
    """A ModelPair around a random-weight target of this shape, no draft model (the n-gram drafter works)."""
    target = random_llama(shape, dtype, device)
    tok = tokenizer()
    if target.config.vocab_size != len(tok):  # keep ids valid for a larger-vocab shape
        target.resize_token_embeddings(max(len(tok), target.config.vocab_size))
    return ModelPair(
        target=target,
        tokenizer=tok,
        device=device,
        dtype=dtype,
        target_name=f"random-weight {shape}",
        eos_ids=frozenset(),
    )


def run_shape(shape, args, batches, depths, tokens, grid: bool) -> dict:
    device = pick_device()
    dtype = pick_dtype("auto", device)
    t = time.perf_counter()
    pair = random_pair(shape, dtype, device)
    target = pair.target
    params = sum(p.numel() for p in target.parameters())
    print(f"\n== {shape}: {params / 1e9:.2f} B parameters, {dtype}, built in {time.perf_counter() - t:.0f} s", flush=True)
    rows = pass_costs(pair, batches, tokens, context=args.context, repeats=5)
    print(format_passes(rows, args.peaks.peak_flops, args.peaks.peak_bandwidth), flush=True)
    out = {"shape": shape, "parameters": params, "dtype": str(dtype), "context": args.context, "passes": rows}
    if grid:
        result = bench(pair, batches, depths, drafter="ngram", max_new_tokens=args.max_new_tokens, repeats=args.repeats)
        print(format_table(result), flush=True)
        out["grid"] = result
    del pair, target
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def parse_shapes(ap: argparse.ArgumentParser, value: str) -> list[str]:
    """Comma-separated shape names; an unknown one is a usage error naming the choices."""
    shapes = [s for s in value.split(",") if s]
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        ap.error(f"unknown shape(s) {', '.join(unknown)}; choose from {', '.join(SHAPES)}")
    return shapes


def probe_report(device, dtype):
    """Probe the device's peaks, print them, and start the JSON report every GPU script writes."""
    peaks = probe(device, dtype)
    print(
        f"{peaks.device_name}: {peaks.peak_bandwidth / 1e9:.0f} GB/s, {peaks.peak_flops / 1e12:.1f} TFLOP/s "
        f"({peaks.dtype}), ridge {peaks.ridge_point:.0f} FLOP/byte; torch {torch.__version__}",
        flush=True,
    )
    report = {
        "device": peaks.device_name,
        "dtype": peaks.dtype,
        "peak_bandwidth": peaks.peak_bandwidth,
        "peak_flops": peaks.peak_flops,
        "ridge_point": peaks.ridge_point,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "shapes": [],
    }
    return peaks, report


def run_shapes(shapes: list[str], report: dict, json_path: str | None, measure) -> None:
    """measure(shape) -> dict for each shape; a failing shape records its traceback and the next still runs
    (a lent GPU's minutes are scarce). The report is rewritten after every shape."""
    for shape in shapes:
        try:
            report["shapes"].append(measure(shape))
        except Exception:
            traceback.print_exc()
            report["shapes"].append({"shape": shape, "error": traceback.format_exc(limit=3)})
        if json_path:
            Path(json_path).write_text(json.dumps(report, indent=1, default=str))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="smollm2-135m,smollm2-1.7b,qwen2.5-7b", help="comma-separated: " + ", ".join(SHAPES))
    ap.add_argument("--grid-shapes", default="smollm2-1.7b", help="shapes that also run the AR vs speculative grid")
    ap.add_argument("--batch", default="1,8,32,64")
    ap.add_argument("--depth", default="0,2,4,8")
    ap.add_argument("--tokens", default="1,2,4,8,16,32,64", help="new tokens per row in the pass-cost curve")
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None, help="write every measured row here")
    args = ap.parse_args()
    shapes = parse_shapes(ap, args.shape)
    batches = [int(b) for b in args.batch.split(",")]
    depths = [int(d) for d in args.depth.split(",")]
    tokens = [int(n) for n in args.tokens.split(",")]

    device = pick_device()
    dtype = pick_dtype("auto", device)
    args.peaks, report = probe_report(device, dtype)
    grid = args.grid_shapes.split(",")
    run_shapes(shapes, report, args.json, lambda shape: run_shape(shape, args, batches, depths, tokens, shape in grid))


if __name__ == "__main__":
    main()
