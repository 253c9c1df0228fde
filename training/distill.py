"""Distil a small draft model for the embedded target (SmolLM2-135M-Instruct), on a CPU, reproducibly.

Knowledge distillation on the target's own greedy outputs (sequence-level KD, Kim & Rush 2016; the
recipe of DistillSpec, Zhou et al. 2024, in its simplest form: the draft learns to predict exactly what
the target will emit, which is what speculative acceptance rewards):

    1. prompts   a varied, seeded prompt set: topics x task templates (explain, story, list, compare,
                 how-to, summarise, answer, email, ...). Whole topics are held out for evaluation.
    2. generate  the target's greedy responses, batched through `engine.generate` (ragged batch; several
                 times faster than batch 1), written in shards so a time cap can stop it cleanly.
    3. soft      (optional) one teacher-forcing forward of the target over each prompt+response keeps its
                 top-k next-token distribution at every response position (cheap next to generation).
    4. train     a small Llama (same tokenizer and vocabulary): tied embedding initialised from the target's
                 embedding projected to the draft width by PCA; loss on response tokens only:
                 (1 - w) * CE(target's greedy token) + w * soft CE(target's top-k distribution).
    5. save      safetensors + config.json + tokenizer files + README.md model card, loadable with
                 `load_pair(draft=dir)`; held-out acceptance is measured with the engine itself.

    python -m training.distill --help
    python -m training.distill --work-dir distill_work --out assets/draft           # the shipped draft
    python -m training.distill --stage eval --out assets/draft                     # re-measure a draft

Every stage is seeded (prompts, shuffles, init, batches). Generation is greedy; in bfloat16 the engine's
batched decoding is deterministic for a fixed batch composition on a given machine.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

from .data import read_shards
from .draft_card import save_draft, write_card, write_draft_vocab
from .draft_model import make_draft, train
from .pipeline import Run, Stats, add_eval_options, measure_heldout
from .prompts import ROUNDS, build_prompts
from .responses import generate_data, soft_matches, soft_targets, soft_targets_from_features

STAGES = ("prompts", "generate", "soft", "train", "eval", "all")


def _worker(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected K/N, e.g. 0/2; got {text!r}") from None
    if not 0 <= k < n:
        raise argparse.ArgumentTypeError(f"need 0 <= K < N; got {text!r}")
    return k, n


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m training.distill",
        description="Distil a draft model for the embedded target from the target's own greedy responses.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--stage", choices=STAGES, default="all", help="run one stage (each reads the previous stage's files in --work-dir) or all of them"
    )
    p.add_argument("--work-dir", default="distill_work", help="generated prompts, shards, checkpoints, logs")
    p.add_argument("--out", default="assets/draft", help="where the draft (HF folder) is written")
    p.add_argument("--target", default=None, help="target model folder or hub id (default: embedded SmolLM2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    _data_options(p.add_argument_group("data"))
    _model_options(p.add_argument_group("draft architecture"))
    _train_options(p.add_argument_group("training"))
    add_eval_options(p)
    return p.parse_args(argv)


def _data_options(g) -> None:
    g.add_argument("--max-prompts", type=int, default=0, help="use only the first N (shuffled) training prompts; 0 = all")
    g.add_argument(
        "--extended-prompts",
        action="store_true",
        help="add the second round of prompts (MORE_TOPICS x all tasks, first-round topics x MORE_TASKS) "
        "after the first; rerun `--stage prompts` then `--stage generate` to extend existing shards",
    )
    g.add_argument(
        "--prompt-rounds",
        type=int,
        choices=range(1, len(ROUNDS) + 1),
        default=1,
        help="rounds of prompts (assets/training/prompts.json): 2 = --extended-prompts; each round N after "
        "that adds its new topics x every task after round N-1 (rerun `--stage prompts`, then `--stage "
        "generate` extends existing shards); round 7 is the broad mix of tasks (assets/training/mix.json)",
    )
    g.add_argument(
        "--gen-from-round",
        type=int,
        default=1,
        metavar="N",
        help="generate only the training prompts of round N and later (e.g. 5 with --prompt-rounds 5: "
        "new data to continue a shipped drafter on, without regenerating rounds 1-4)",
    )
    g.add_argument("--heldout-every", type=int, default=10, help="every N-th topic is held out")
    g.add_argument("--heldout-prompts", type=int, default=32, help="held-out prompts given target responses")
    g.add_argument("--gen-batch", type=int, default=64, help="generation batch size (ragged)")
    g.add_argument(
        "--gen-worker",
        type=_worker,
        default=(0, 1),
        metavar="K/N",
        help="generate only shards b with b %% N == K (run N processes, e.g. 0/2 and 1/2 with --threads 1; "
        "worker 0 also writes the held-out responses)",
    )
    g.add_argument("--max-new-tokens", type=int, default=160, help="target response length cap")
    g.add_argument(
        "--gen-minutes", type=float, default=38.0, help="stop starting new generation batches after this many minutes (0 = no cap)"
    )
    g.add_argument("--gen-dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    g.add_argument("--soft-topk", type=int, default=0, help="keep the target's top-k distribution (0 = hard labels only)")
    g.add_argument(
        "--soft-features",
        default=None,
        metavar="PATH",
        help="take the soft targets from EAGLE features files of these rows (`python -m training.eagle "
        "--stage features`) instead of a new target pass; {split} in PATH stands for train / heldout, "
        "e.g. distill_work/eagle/features-{split}-fuse2-15.safetensors",
    )


def _model_options(m) -> None:
    m.add_argument("--hidden", type=int, default=256)
    m.add_argument("--layers", type=int, default=4)
    m.add_argument("--heads", type=int, default=4)
    m.add_argument("--kv-heads", type=int, default=4)
    m.add_argument("--intermediate", type=int, default=1024)


def _train_options(t) -> None:
    t.add_argument("--epochs", type=float, default=3.0)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--batch-tokens", type=int, default=4096, help="padded tokens per training batch")
    t.add_argument("--max-len", type=int, default=256, help="truncate prompt+response to this many tokens")
    t.add_argument("--soft-weight", type=float, default=0.5, help="weight of the soft loss when --soft-topk > 0")
    t.add_argument("--warmup", type=int, default=50)
    t.add_argument(
        "--negatives",
        type=int,
        default=2048,
        help="training softmax over the tokens the target emitted + this many random others per step "
        "(-1 = full vocabulary; the saved head always has the full vocabulary)",
    )
    t.add_argument(
        "--eval-every", type=int, default=0, help="teacher-forced held-out eval every N steps; the best weights are kept (0 = end only)"
    )
    t.add_argument("--no-autocast", action="store_true", help="train in float32 instead of bfloat16 autocast")
    t.add_argument(
        "--init",
        default=None,
        metavar="DIR",
        help="continue from a saved draft folder (its architecture replaces the options above, and its "
        "draft_vocab.json joins the new one) instead of a fresh PCA-initialised draft",
    )


def train_settings(args: argparse.Namespace) -> dict:
    """How a draft is trained, as its model card reports it (the train stage keeps these in stats.json)."""
    return {
        "lr": args.lr,
        "epochs": args.epochs,
        "batch_tokens": args.batch_tokens,
        "soft_weight": args.soft_weight if args.soft_topk else 0.0,
        "soft_topk": args.soft_topk,
        "seed": args.seed,
        "init": args.init,
        "soft_features": args.soft_features,
        "command": command_line(args),
    }


def command_line(args: argparse.Namespace) -> str:
    defaults = vars(parse_args([]))
    parts = ["python -m training.distill"]
    for key, value in vars(args).items():
        if key == "stage" or value == defaults[key]:
            continue
        flag = "--" + key.replace("_", "-")
        parts.append(flag if value is True else f"{flag} {value}")
    return " ".join(parts)


def main(argv=None) -> int:
    args = parse_args(argv)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    work, out = Path(args.work_dir), Path(args.out)
    run = Run(work, "distill.log", args.stage, args.threads)
    log, stats = run.log, run.stats
    prompts = _prompts_stage(args, work, run.wants, log)
    train_prompts = prompts["train"][: args.max_prompts or None]
    heldout_prompts = prompts["heldout"][: args.heldout_prompts]

    from engine.model.pair import embedded_model_dir

    target_dir = Path(args.target) if args.target else embedded_model_dir()
    if run.wants("generate"):
        _generate_stage(args, train_prompts, heldout_prompts, work, stats, log)
    train_rows, heldout_rows = read_shards(work / "shards"), read_shards(work / "heldout")
    log(
        f"data: {len(train_rows)} train sequences ({sum(len(r['output_ids']) for r in train_rows)} response tokens), "
        f"{len(heldout_rows)} held-out"
    )
    if args.soft_topk > 0:
        rows = _soft_stage(args, train_rows, heldout_rows, work, run.wants, stats, log)
        if rows is None:
            return run.finish(2)
        train_rows, heldout_rows = rows
    if run.wants("train") and not _train_stage(args, train_rows, heldout_rows, target_dir, out, stats, log):
        return run.finish(2)
    if run.wants("eval"):
        _eval_stage(args, prompts, train_rows, out, stats, log)
    return run.finish(0)


def _prompts_stage(args, work: Path, run, log) -> dict:
    prompts_path = work / "prompts.json"
    if run("prompts") or not prompts_path.exists():
        prompts = build_prompts(seed=args.seed, heldout_every=args.heldout_every, extended=args.extended_prompts, rounds=args.prompt_rounds)
        prompts_path.write_text(json.dumps(prompts, indent=1))
        log(
            f"prompts: {len(prompts['train'])} train, {len(prompts['heldout'])} held-out ({len(prompts['heldout_topics'])} held-out topics)"
        )
    return json.loads(prompts_path.read_text())


def _generate_stage(args, train_prompts: list, heldout_prompts: list, work: Path, stats: Stats, log) -> None:
    from engine.model.pair import load_pair

    pair = load_pair(target=args.target, draft=None, dtype=args.gen_dtype)
    cap = args.gen_minutes * 60 if args.gen_minutes > 0 else None
    g = generate_data(
        pair,
        train_prompts,
        work / "shards",
        args.gen_batch,
        args.max_new_tokens,
        cap,
        log,
        worker=args.gen_worker,
        from_round=args.gen_from_round,
    )
    h = generate_data(
        pair, heldout_prompts if args.gen_worker[0] == 0 else [], work / "heldout", args.gen_batch, args.max_new_tokens, None, log
    )
    if stats.path.exists():  # re-read: other --gen-worker processes may have added their time meanwhile
        stats.update(json.loads(stats.path.read_text()))
    stats["gen_seconds"] = stats.get("gen_seconds", 0.0) + g["seconds"] + h["seconds"]
    stats["gen_dtype"] = pair.dtype_name
    stats.save()


def _soft_stage(args, train_rows: list, heldout_rows: list, work: Path, run, stats: Stats, log) -> tuple[list, list] | None:
    """The rows with the target's top-k soft targets (cached in the work folder); None after a logged error."""
    soft_path = work / f"soft-top{args.soft_topk}.jsonl"
    soft_rows = None
    if soft_path.exists() and not run("soft"):
        with open(soft_path) as f:
            soft_rows = [json.loads(line) for line in f]
        if not soft_matches(soft_rows, train_rows + heldout_rows):
            log(f"soft: {soft_path} was made for other data ({len(soft_rows)} rows); recomputing")
            soft_rows = None
    if soft_rows is None:
        from engine.model.pair import load_pair

        pair = load_pair(target=args.target, draft=None, dtype=args.gen_dtype)
        t0 = time.perf_counter()
        if args.soft_features:
            from safetensors import SafetensorError

            lm_head = pair.target.get_output_embeddings().weight.detach()
            for rows, name in ((train_rows, "train"), (heldout_rows, "heldout")):
                path = Path(args.soft_features.replace("{split}", name))
                try:
                    soft_targets_from_features(path, rows, args.soft_topk, lm_head, args.max_len, log=log)
                except (OSError, ValueError, SafetensorError) as exc:
                    log(f"error: --soft-features {path}: {exc}")
                    return None
        else:
            soft_targets(pair.target, train_rows + heldout_rows, args.soft_topk, args.max_len, log=log)
        stats["soft_seconds"] = time.perf_counter() - t0
        stats.save()
        with open(soft_path, "w") as f:
            for r in train_rows + heldout_rows:
                f.write(json.dumps(r) + "\n")
        soft_rows = train_rows + heldout_rows
    return soft_rows[: len(train_rows)], soft_rows[len(train_rows) :]


def _train_stage(args, train_rows: list, heldout_rows: list, target_dir: Path, out: Path, stats: Stats, log) -> bool:
    """Train (or continue, --init) the draft and save it; False after a logged error."""
    from transformers import AutoModelForCausalLM

    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32)
    if args.init:
        try:
            draft = AutoModelForCausalLM.from_pretrained(args.init, dtype=torch.float32)
        except (OSError, ValueError) as exc:
            log(f"error: --init {args.init}: not a draft model folder ({exc})")
            return False
        if draft.config.vocab_size != target.config.vocab_size:
            log(f"error: --init {args.init} has vocab_size {draft.config.vocab_size}, the target {target.config.vocab_size}")
            return False
        c = draft.config
        args.hidden, args.layers, args.heads = c.hidden_size, c.num_hidden_layers, c.num_attention_heads
        args.kv_heads, args.intermediate = c.num_key_value_heads, c.intermediate_size
        log(f"train: continuing from {args.init}")
    else:
        draft = make_draft(target, args.hidden, args.layers, args.heads, args.kv_heads, args.intermediate, args.seed)
    del target
    result = train(
        draft,
        train_rows,
        heldout_rows,
        epochs=args.epochs,
        lr=args.lr,
        batch_tokens=args.batch_tokens,
        soft_weight=args.soft_weight if args.soft_topk else 0.0,
        max_len=args.max_len,
        seed=args.seed,
        warmup=args.warmup,
        log=log,
        eval_every=args.eval_every,
        autocast=not args.no_autocast,
        negatives=args.negatives,
    )
    stats["train"] = result
    # how this draft was trained, for the card an `--stage eval` run writes later with its own arguments
    stats["train_args"] = train_settings(args)
    stats["params"] = sum(p.numel() for p in draft.parameters())
    stats["embedding_params"] = draft.get_input_embeddings().weight.numel()
    stats["bytes"] = save_draft(draft, target_dir, out)
    init_vocab = []
    if args.init and (Path(args.init) / "draft_vocab.json").exists():
        init_vocab = json.loads((Path(args.init) / "draft_vocab.json").read_text())["ids"]
    stats["draft_vocab"] = write_draft_vocab(out, train_rows, init_vocab)
    stats.save()
    log(
        f"train: {result['steps']} steps in {result['seconds']:.0f} s; held-out top1 "
        f"{result.get('heldout', {}).get('top1', float('nan')):.3f}; wrote {out} ({stats['bytes'] / 1e6:.1f} MB)"
    )
    return True


def _eval_stage(args, prompts: dict, train_rows: list, out: Path, stats: Stats, log) -> None:
    """Measure the saved draft in the engine and write its card."""
    ev = measure_heldout(args, prompts["heldout"], out, "model", stats, log)
    tr = stats.get("train", {})
    saved = json.loads((out / "config.json").read_text())
    info = {
        "architecture": {
            "hidden": saved["hidden_size"],
            "layers": saved["num_hidden_layers"],
            "heads": saved["num_attention_heads"],
            "kv_heads": saved["num_key_value_heads"],
            "intermediate": saved["intermediate_size"],
        },  # the saved draft's (--init may differ)
        "params": stats.get("params", 0),
        "embedding_params": stats.get("embedding_params", 0),
        "bytes": sum(p.stat().st_size for p in out.iterdir() if p.is_file()),
        "prompts_train": len(train_rows),
        "heldout_topics": len(prompts["heldout_topics"]),
        "max_new_tokens": args.max_new_tokens,
        "gen_batch": args.gen_batch,
        "gen_dtype": stats.get("gen_dtype", "?"),
        "train_tokens": tr.get("train_tokens", 0),
        "gen_minutes": stats.get("gen_seconds", 0.0) / 60,
        "soft_minutes": stats.get("soft_seconds", 0.0) / 60,
        "steps": tr.get("steps", 0),
        "train_minutes": tr.get("seconds", 0.0) / 60,
        "engine_eval": ev,
        "heldout_top1": tr.get("heldout", {}).get("top1", float("nan")),
    }
    # the training run's own settings (an eval-only call's arguments are not how the draft was trained)
    info |= stats.get("train_args") or train_settings(args)
    write_card(out, info)
    log(f"eval: wrote {out / 'README.md'}")


if __name__ == "__main__":
    sys.exit(main())
