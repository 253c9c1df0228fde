"""The EAGLE head's distillation at GPU scale, in one time-boxed run on a lent GPU.

On the 2-core CPU the data are the limit: the target writes ~340 tokens/s, so each round of prompts
(~480k response tokens) costs ~40 minutes, and the features pass and one epoch of training cost ~1.5 h
more for all six rounds. On a GPU the engine decodes thousands of prompts per pass. This script runs the
same pipeline as `python -m training.distill` + `python -m training.eagle`, in memory, within a time budget:

1. generate: the target's greedy responses to the training prompts of all six rounds (the same prompts
   and the same held-out split as `training.distill --prompt-rounds 6`), then, while the generation budget
   lasts (it can stop any pass early), more passes that *sample* at --temperature: new contexts from the
   same prompts, since greedy data stop growing once every prompt has its one greedy response;
2. features: one teacher-forcing pass of the target over all of it (EAGLE-3 fusion of --fuse-layers);
3. train: continue the --init head (the shipped one) over everything, the cosine schedule fitted into the
   time left; hard labels are the target's own argmax (`--hard-labels argmax`), since sampled rows' next
   tokens are not greedy ones;
4. save the head to <out>/head (with the --init head's vocabulary, or with --head-vocab N the N tokens the
   greedy pass emits most often) and the generated tokens to <out>/tokens-pass<N>.npz, and print
   teacher-forced held-out top-1 for the --init head and the new one on the same held-out responses
   (--heldout-dir: the distillation's heldout/ shards).

The engine's acceptance of the new head is then measured on the CPU, where the product runs:
`python -m training.eagle --stage eval --out <out>/head`.

    python scripts/investigate/gpu_eagle.py --out OUT --budget-s 480 [--device cuda] [--gen-batch 2048]

A CPU dry run of every stage, in about a minute:

    python scripts/investigate/gpu_eagle.py --device cpu --out /tmp/dry --max-prompts 12 --gen-batch 6 \\
        --max-new-tokens 12 --sample-passes 1 --heldout-rows 4 --budget-s 240
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch

from engine import DecodeConfig, generate
from engine.formats import DRAFT_VOCAB_FILE as VOCAB_FILE
from engine.model.eagle_head import load_head
from engine.model.pair import embedded_model_dir, load_pair
from training.data import TeeLog, read_shards
from training.eagle_card import frequent_tokens, save_head
from training.eagle_head import EagleHead
from training.eagle_train import FeatureData, evaluate, train
from training.features import extract_features
from training.prompts import build_prompts

ROOT = Path(__file__).resolve().parents[2]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", required=True, help="folder for the log, the tokens and head/")
    p.add_argument("--device", default="cuda")
    p.add_argument("--budget-s", type=float, default=480.0, help="the whole run's time budget")
    p.add_argument("--gen-share", type=float, default=0.45, help="share of the budget generation may use")
    p.add_argument("--gen-batch", type=int, default=2048)
    p.add_argument("--max-new-tokens", type=int, default=160, help="as training.distill's default")
    p.add_argument("--sample-passes", type=int, default=2, help="sampled passes after the greedy one (budget allowing)")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument(
        "--tokens",
        default="",
        help="comma-separated tokens-pass<N>.npz of an earlier run: their rows join the training data "
        "(the generation budget then goes to new sampled passes)",
    )
    p.add_argument("--first-seed", type=int, default=1, help="sampling seed of the first new sampled pass (+1 per pass)")
    p.add_argument(
        "--prompt-start",
        type=int,
        default=0,
        help="sampled passes start at this training prompt and wrap around (to cover the prompts an "
        "earlier, budget-stopped pass did not reach first)",
    )
    p.add_argument("--max-prompts", type=int, default=0, help="use only the first N training prompts (0 = all)")
    p.add_argument("--heldout-dir", default="distill_work/heldout", help="held-out responses for teacher-forced top-1")
    p.add_argument("--heldout-rows", type=int, default=0, help="use only the first N held-out rows (0 = all)")
    p.add_argument("--init", default=str(ROOT / "assets" / "eagle"))
    p.add_argument(
        "--head-vocab",
        type=int,
        default=0,
        help="the saved draft_vocab.json: 0 keeps the --init head's; N > 0 takes the N tokens the target "
        "emits most often in the greedy pass (pass 0, generated or from --tokens)",
    )
    p.add_argument("--fuse-layers", default="2,15")
    p.add_argument("--feat-batch", type=int, default=128, help="rows per features pass")
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--batch-tokens", type=int, default=8192)
    p.add_argument("--epochs", type=float, default=2.0, help="upper bound; the schedule is fitted into the time left")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--reserve-s", type=float, default=45.0, help="seconds kept for the final evaluation and saving")
    return p.parse_args(argv)


def save_tokens(path: Path, rows: list[dict]) -> None:
    """One pass's responses: token ids (uint16: the vocabulary is 49,152) with row lengths and prompt index."""
    ids = np.fromiter((t for r in rows for t in r["output_ids"]), dtype=np.uint16)
    np.savez_compressed(
        path,
        output_ids=ids,
        lengths=np.array([len(r["output_ids"]) for r in rows], dtype=np.int32),
        prompt_index=np.array([r["prompt_index"] for r in rows], dtype=np.int32),
    )


def load_tokens(path: Path, train_prompts: list[dict], encode, encoded: dict[int, list[int]]) -> list[dict]:
    """Rows of an earlier run's tokens-pass<N>.npz, with their prompts re-encoded."""
    match = re.fullmatch(r"tokens-pass(\d+)\.npz", path.name)
    if not match:
        raise ValueError(f"{path}: expected a tokens-pass<N>.npz file of an earlier run (pass 0 is the greedy one)")
    pass_number = int(match.group(1))
    blob = np.load(path)
    ids, lengths, index = blob["output_ids"].astype(np.int64), blob["lengths"], blob["prompt_index"]
    rows, at = [], 0
    for n, i in zip(lengths.tolist(), index.tolist()):
        if i not in encoded:
            encoded[i] = encode(train_prompts[i]["prompt"])
        rows.append({"prompt_index": i, "prompt_ids": encoded[i], "output_ids": ids[at : at + n].tolist(), "pass": pass_number})
        at += n
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = TeeLog(out / "gpu_eagle.log")
    elapsed = lambda: time.perf_counter() - t0  # noqa: E731
    fuse = tuple(int(x) for x in args.fuse_layers.split(",") if x)
    if torch.cuda.is_available():
        log(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    heldout_rows = read_shards(Path(args.heldout_dir))[: args.heldout_rows or None]  # checked before any GPU work
    if not heldout_rows:
        log(f"error: no held-out responses in {args.heldout_dir} (the distillation's heldout/ shards)")
        return 2

    # 1. generate ----------------------------------------------------------------------------------
    pair = load_pair(draft=None, eagle=None, device=args.device)
    log(f"loaded the target on {pair.device} ({pair.dtype_name}) in {elapsed():.0f} s")
    prompts = build_prompts(seed=0, rounds=6)
    train_prompts = prompts["train"][: args.max_prompts or None]
    heldout_topics = set(prompts["heldout_topics"])
    assert not any(r["topic"] in heldout_topics for r in train_prompts)
    encoded: dict[int, list[int]] = {}
    rows: list[dict] = []
    gen_deadline = args.budget_s * args.gen_share
    stats = {"passes": []}
    for path in [Path(x) for x in args.tokens.split(",") if x]:
        try:
            earlier = load_tokens(path, train_prompts, pair.encode_prompt, encoded)
        except (OSError, ValueError, KeyError, IndexError) as exc:
            log(f"error: --tokens {path}: {exc}")
            return 2
        stats["passes"].append({"from": path.name, "rows": len(earlier), "tokens": sum(len(r["output_ids"]) for r in earlier)})
        log(f"tokens: {path}: {len(earlier)} rows, {stats['passes'][-1]['tokens']} tokens ({elapsed():.0f} s)")
        rows += earlier
    passes = [0] if not rows else []  # the greedy pass, unless earlier tokens are given
    passes += [args.first_seed + k for k in range(args.sample_passes)]
    start = args.prompt_start % max(len(train_prompts), 1)
    for p in passes:
        if p and elapsed() > gen_deadline:
            break
        cfg = DecodeConfig(
            mode="autoregressive", max_new_tokens=args.max_new_tokens, temperature=0.0 if p == 0 else args.temperature, seed=p
        )
        order = list(range(len(train_prompts)))
        order = order if p == 0 else order[start:] + order[:start]
        tp, made = time.perf_counter(), []
        for b in range(0, len(order), args.gen_batch):
            if elapsed() > gen_deadline:  # a slow machine still leaves time for the features and training
                log(f"generate: pass {p} stopped by the budget after {len(made)} rows")
                break
            batch = order[b : b + args.gen_batch]
            trace = generate(pair, [train_prompts[i]["prompt"] for i in batch], cfg)
            for i, ids in zip(batch, trace.output_ids):
                if i not in encoded:
                    encoded[i] = pair.encode_prompt(train_prompts[i]["prompt"])
                made.append({"prompt_index": i, "prompt_ids": encoded[i], "output_ids": list(ids), "pass": p})
            log(f"generate: pass {p} rows {b + len(batch)}/{len(order)}  {trace.summary['tokens_per_s']:.0f} tok/s  {elapsed():.0f} s")
        n_tok = sum(len(r["output_ids"]) for r in made)
        stats["passes"].append(
            {"pass": p, "temperature": cfg.temperature, "rows": len(made), "tokens": n_tok, "seconds": time.perf_counter() - tp}
        )
        log(f"generate: pass {p} (temperature {cfg.temperature}): {len(made)} rows, {n_tok} tokens in {time.perf_counter() - tp:.0f} s")
        if made:
            save_tokens(out / f"tokens-pass{p}.npz", made)
        rows += made
    log(f"generate: {len(rows)} rows, {sum(len(r['output_ids']) for r in rows)} tokens, {elapsed():.0f} s")

    # 2. features ------------------------------------------------------------------------------------
    target = pair.target
    blob_h = extract_features(target, heldout_rows, 256, batch_size=args.feat_batch, log=log, fuse_layers=fuse)
    blob = extract_features(target, rows, 256, batch_size=args.feat_batch, log=log, fuse_layers=fuse)
    stats["features_seconds"] = blob.pop("seconds")
    blob_h.pop("seconds")
    log(
        f"features: {blob['features'].shape[0]} positions ({blob['features'].dtype}) in "
        f"{stats['features_seconds']:.0f} s, {elapsed():.0f} s"
    )
    del pair, target
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

    # 3. train -----------------------------------------------------------------------------------------
    from transformers import AutoModelForCausalLM

    device = torch.device(args.device)
    target = AutoModelForCausalLM.from_pretrained(embedded_model_dir(), dtype=torch.float32)  # as training.eagle
    embed = target.get_input_embeddings().weight.detach()
    vocab_ids = sorted({t for r in rows for t in r["output_ids"]})
    vocab = torch.tensor(vocab_ids)
    out_head = target.get_output_embeddings().weight.detach()[vocab].contiguous().to(device)
    to_local = torch.full((embed.shape[0],), -1, dtype=torch.long)
    to_local[vocab] = torch.arange(len(vocab))
    to_local = to_local.to(device)
    config, state, _ = load_head(Path(args.init), target)
    head = EagleHead(config)
    head.load_state_dict({k: v.float() for k, v in state.items()})
    head = head.to(device)
    data, heldout = FeatureData(blob), FeatureData(blob_h)
    before = evaluate(head, heldout, embed, out_head, to_local, 3, args.batch_tokens)
    log(
        f"held-out top-1 of --init ({args.init}) by depth: {[round(x, 4) for x in before['top1']]} "
        f"({before['positions']} positions; {len(vocab_ids)}-token training vocabulary)"
    )
    minutes = max(0.5, (args.budget_s - args.reserve_s - elapsed()) / 60)
    log(f"train: {len(data)} rows, up to {minutes:.1f} min")
    result = train(
        head,
        data,
        heldout,
        embed,
        out_head,
        to_local,
        epochs=args.epochs,
        lr=args.lr,
        batch_tokens=args.batch_tokens,
        depths=3,
        seed=0,
        eval_every=args.eval_every,
        autocast=True,
        max_minutes=minutes,
        hard_weight=0.5,
        reg_weight=1.0,
        hard_labels="argmax",
        log=log,
    )
    head = head.cpu()
    if args.head_vocab > 0:
        keep = frequent_tokens([r for r in rows if r["pass"] == 0], args.head_vocab)
        log(f"head vocabulary: the {len(keep)} tokens the greedy pass emits most often")
    else:
        keep = json.loads((Path(args.init) / VOCAB_FILE).read_text())["ids"]
    init_name = str(Path(args.init).resolve().relative_to(ROOT)) if Path(args.init).resolve().is_relative_to(ROOT) else args.init
    info = {
        "params": sum(p.numel() for p in head.parameters()),
        "train_rows": len(data),
        "train_minutes": result["seconds"] / 60,
        "heldout_top1_by_depth": result["heldout"]["top1"],
        "seed": 0,
        "lr": args.lr,
        "depths": 3,
        "reg_weight": 1.0,
        "init": init_name,
        "head_vocab": len(keep),
        "vocab_from": "greedy pass" if args.head_vocab > 0 else init_name,
        "hard_labels": "argmax",
        "batch_tokens": args.batch_tokens,
        "steps": result["steps"],
        "gpu_run": stats,
    }
    save_head(head, out / "head", keep, info)
    log(
        f"train: {result['steps']} steps in {result['seconds']:.0f} s; held-out top-1 by depth "
        f"{[round(x, 4) for x in result['heldout']['top1']]} (--init: {[round(x, 4) for x in before['top1']]}); "
        f"history {[(h['step'], round(h['top1'][0], 4)) for h in result['history']]}"
    )
    log(f"done in {elapsed():.0f} s; wrote {out / 'head'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
