"""EAGLE-style draft head: a one-layer drafter that reads the target's own hidden states.

EAGLE (Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty") drafts at
the feature level. The target's last hidden state f_i (after its final norm; the target's logits are
lm_head(f_i)) already summarises the whole context, so a single decoder layer is enough to guess the
next one:

    entry i = (f_i, token t_{i+1})  ->  fc([embed(t_{i+1}); f_i])  ->  1 Llama decoder layer  ->  norm  ->  g_i
    g_i ~ f_{i+1}, and lm_head(g_i) ~ the target's distribution of t_{i+2}

The head reuses the target's embedding and output head (not shipped: only fc, the layer and a norm,
~4.2 M parameters). With EAGLE-3's feature fusion (`--fuse-layers`), f_i is the outputs of some inner
target layers (standardised per dimension) plus the final feature, mapped back to H by one more linear
layer (`fuse`, +1 M parameters for two layers); the head's own guesses g feed back unfused. Drafting k
tokens: the first step reads true target features; later steps feed the head's own g back in
(feature-level autoregression). Training unrolls that loop (EAGLE-3's "training-time test"): at depth s
a query attends to true-feature keys up to s entries back and to the keys its own earlier draft steps
produced, exactly what it sees when drafting.

    python -m training.eagle --help
    python -m training.eagle --work-dir distill_work --out assets/eagle   # features, train, save, eval

The training data are the distillation's target-generated responses (`python -m training.distill`
stages prompts + generate, in the same --work-dir); the features come from one batched target pass.
`--device cuda` runs that pass and the training on a GPU (features and batches stay in CPU memory);
`scripts/investigate/gpu_eagle.py` runs generation, features and training there in one time-boxed process, which is
how run 14 was trained; the shipped head (run 16) continues it here on the broad mix of tasks (`--prompt-rounds 7`,
`--add-vocab`; assets/eagle/README.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from engine.formats import DRAFT_VOCAB_FILE, EAGLE_CONFIG_FILE
from engine.model.eagle_head import load_head

from .data import read_shards
from .eagle_card import (
    frequent_tokens,
    save_head,
    widened_vocab,
    write_card,
)
from .eagle_head import EagleHead
from .eagle_train import FeatureData, train
from .features import concat_features, covers_prefix, extract_features
from .pipeline import Run, add_eval_options, measure_heldout

STAGES = ("features", "train", "eval", "all")


def _layer_list(text: str) -> tuple[int, ...]:
    try:
        layers = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated layer numbers, got {text!r}") from None
    if any(i < 0 for i in layers) or len(set(layers)) != len(layers):
        raise argparse.ArgumentTypeError(f"layers must be distinct and >= 0; got {text!r}")
    return layers


def _noise_level(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (a fraction of each feature's RMS); got {text!r}")
    return value


def features_file(feat_dir: Path, name: str, fuse_layers: tuple[int, ...]) -> Path:
    """features-{train,heldout}.safetensors, or features-…-fuse2-15.safetensors for fused features."""
    suffix = "-fuse" + "-".join(str(i) for i in fuse_layers) if fuse_layers else ""
    return feat_dir / f"features-{name}{suffix}.safetensors"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m training.eagle",
        description="Train an EAGLE head for the embedded target on the distillation data (python -m training.distill).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--stage", choices=STAGES, default="all", help="run one stage, or all of them")
    p.add_argument(
        "--work-dir",
        default="distill_work",
        help="the distillation work folder (its shards/ and heldout/ responses); features go to <work-dir>/eagle",
    )
    p.add_argument("--out", default="assets/eagle", help="where the head is written")
    p.add_argument("--target", default=None, help="target model folder (default: embedded SmolLM2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    p.add_argument(
        "--device",
        default="cpu",
        help="where the features pass and the training run: cpu, cuda, mps or auto (features and batches are kept on the CPU either way)",
    )
    p.add_argument("--max-len", type=int, default=256, help="truncate prompt+response to this many tokens")
    t = p.add_argument_group("training")
    t.add_argument("--epochs", type=float, default=2.0)
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--batch-tokens", type=int, default=2048, help="padded tokens per training batch")
    t.add_argument("--depths", type=int, default=3, help="draft steps unrolled in training (training-time test)")
    t.add_argument("--hard-weight", type=float, default=0.5, help="weight of CE on the greedy token vs soft CE")
    t.add_argument("--reg-weight", type=float, default=0.0, help="weight of the feature regression (smooth L1)")
    t.add_argument(
        "--hard-labels",
        choices=("data", "argmax"),
        default="data",
        help="the greedy token the hard CE aims at: the row's next token (data: greedy responses) or the "
        "target's own argmax there (argmax: for sampled responses)",
    )
    t.add_argument(
        "--feature-noise",
        type=_noise_level,
        default=0.0,
        help="EAGLE-1's augmentation: add uniform noise of up to this fraction of each target feature's "
        "RMS to the (fused) target features while training (0 = off)",
    )
    t.add_argument(
        "--init",
        default=None,
        help="continue from a saved head folder instead of the pass-through start "
        "(an unfused head can start a fused one: fuse starts as a pass-through)",
    )
    p.add_argument(
        "--fuse-layers",
        type=_layer_list,
        default=(),
        help="EAGLE-3 feature fusion: comma-separated target decoder layers (0-based) whose outputs join "
        "the final feature, e.g. 2,15 (features and training both use it; default: final only)",
    )
    _vocab_options(t)
    t.add_argument("--eval-every", type=int, default=0, help="teacher-forced held-out eval every N steps (0 = end)")
    t.add_argument("--max-minutes", type=float, default=0.0, help="stop training after this many minutes (0 = no cap)")
    t.add_argument("--no-autocast", action="store_true", help="train in float32 instead of bfloat16 autocast")
    add_eval_options(p)
    return p.parse_args(argv)


def _vocab_options(t) -> None:
    """The draft vocabulary's options: how many tokens the saved head proposes, and which."""
    t.add_argument(
        "--head-vocab",
        type=int,
        default=8192,
        help="the saved draft_vocab.json keeps the N most frequent emitted tokens (0 = all of them; "
        "training always uses all): a smaller output head makes every draft step cheaper",
    )
    t.add_argument(
        "--keep-init-vocab",
        action="store_true",
        help="with --init: save the --init head's draft_vocab.json instead of ranking the tokens of this "
        "run's data (when continuing on new data only, the earlier, larger data ranked them better)",
    )
    t.add_argument(
        "--add-vocab",
        type=int,
        default=0,
        metavar="N",
        help="with --keep-init-vocab: also keep the N most frequent tokens of this run's data that the --init "
        "head's vocabulary lacks (continuing on new kinds of text)",
    )


def main(argv=None) -> int:
    from engine.hardware import pick_device

    args = parse_args(argv)
    work = Path(args.work_dir)
    feat_dir, out = work / "eagle", Path(args.out)
    run = Run(feat_dir, "eagle.log", args.stage, args.threads)
    log, stats = run.log, run.stats
    try:
        pick_device(None if args.device == "auto" else args.device)
    except (ValueError, RuntimeError) as exc:
        return run.finish(2, f"--device {args.device}: {exc}")
    if not (work / "shards").exists():
        return run.finish(
            2,
            f"{work / 'shards'} not found: run `python -m training.distill --work-dir {work}` first (its "
            "prompts and generate stages write the target's responses)",
        )
    train_rows, heldout_rows = read_shards(work / "shards"), read_shards(work / "heldout")
    ok = (not run.wants("features") or _features_stage(args, feat_dir, train_rows, heldout_rows, stats, log)) and (
        not run.wants("train") or _train_stage(args, feat_dir, train_rows, out, stats, log)
    )
    if not ok:
        return run.finish(2)
    if run.wants("eval"):
        prompts = json.loads((work / "prompts.json").read_text())
        measure_heldout(args, prompts["heldout"], out, "eagle", stats, log)
        config = json.loads((out / EAGLE_CONFIG_FILE).read_text())
        write_card(out, config, stats, "python -m training.eagle " + " ".join(argv if argv is not None else sys.argv[1:]))
    return run.finish(0)


def _features_stage(args, feat_dir: Path, train_rows: list, heldout_rows: list, stats, log) -> bool:
    """The target's hidden states for every row, extended where the data grew; False after a logged error."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from engine.model.pair import load_pair

    pair = load_pair(target=args.target, draft=None, eagle=None, device=None if args.device == "auto" else args.device)
    bad = [i for i in args.fuse_layers if i >= pair.target.config.num_hidden_layers]
    if bad:
        log(f"error: --fuse-layers {bad}: the target has layers 0..{pair.target.config.num_hidden_layers - 1}")
        return False
    # which target computed a features file: only its own files are extended instead of rebuilt
    made_by = {"target": str(args.target or "embedded"), "dtype": pair.dtype_name}
    for name, rows in (("heldout", heldout_rows), ("train", train_rows)):
        path = features_file(feat_dir, name, args.fuse_layers)
        old = None
        if path.exists():
            with safe_open(str(path), "pt") as f:
                same_target = (f.metadata() or {}) == made_by
            old = load_file(str(path)) if same_target else None
        if old is not None and covers_prefix(old, rows, args.max_len):  # the data grew: extract the new rows only
            done = len(old["starts"])
            if done == len(rows):
                log(f"features: {name}: {done} rows already extracted")
                continue
            log(f"features: {name}: {done} rows already extracted, adding {len(rows) - done}")
            new = extract_features(pair.target, rows[done:], args.max_len, log=log, fuse_layers=args.fuse_layers)
            stats[f"features_{name}_seconds"] = stats.get(f"features_{name}_seconds", 0.0) + new.pop("seconds")
            blob = concat_features(old, new)
            del old, new
        else:
            blob = extract_features(pair.target, rows, args.max_len, log=log, fuse_layers=args.fuse_layers)
            stats[f"features_{name}_seconds"] = blob.pop("seconds")
        save_file(blob, str(path), metadata=made_by)
        log(f"features: {name}: {len(rows)} rows, {blob['features'].shape[0]} positions")
        del blob
    stats["features_dtype"] = pair.dtype_name
    stats.save()
    return True


def _train_stage(args, feat_dir: Path, train_rows: list, out: Path, stats, log) -> bool:
    """Train (or continue, --init) the head on the saved features and save it; False after a logged error."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from engine.hardware import pick_device
    from engine.model.pair import embedded_model_dir

    if args.keep_init_vocab and not args.init:
        log("error: --keep-init-vocab needs --init (the head whose vocabulary to keep)")
        return False
    if args.add_vocab and not args.keep_init_vocab:
        log("error: --add-vocab widens the --init head's vocabulary: it needs --keep-init-vocab")
        return False
    target = AutoModelForCausalLM.from_pretrained(args.target or embedded_model_dir(), dtype=torch.float32)
    embed = target.get_input_embeddings().weight.detach()
    vocab_ids = sorted({t for r in train_rows for t in r["output_ids"]})
    vocab = torch.tensor(vocab_ids)
    out_head = target.get_output_embeddings().weight.detach()[vocab].contiguous()
    to_local = torch.full((embed.shape[0],), -1, dtype=torch.long)
    to_local[vocab] = torch.arange(len(vocab))
    head = EagleHead.from_target(target, seed=args.seed, fuse_layers=args.fuse_layers)
    state = {}
    if args.init:
        init_config, state, _ = load_head(Path(args.init), target)
        if tuple(init_config.get("fuse_layers", ())) not in ((), tuple(args.fuse_layers)):
            log(f"error: --init {args.init} fuses layers {init_config['fuse_layers']}, not {list(args.fuse_layers)}")
            return False
        head.load_state_dict({k: v.float() for k, v in state.items()}, strict=not (args.fuse_layers and "fuse.weight" not in state))
        log(f"train: continuing from {args.init}")
    paths = [features_file(feat_dir, name, args.fuse_layers) for name in ("train", "heldout")]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        log(f"error: {missing[0]} not found: run `--stage features` with the same --fuse-layers first")
        return False
    data, heldout = (FeatureData(load_file(str(p))) for p in paths)
    if args.fuse_layers and not (args.init and "fuse.weight" in state):
        head.set_fuse_stats(data.features)
        log(
            f"train: standardising the fused layers' {head.fuse_mean.numel()} columns "
            f"(std from {float(head.fuse_std.min()):.3g} to {float(head.fuse_std.max()):.3g})"
        )
    log(f"train: {sum(p.numel() for p in head.parameters())} parameters, {len(data)} rows, {len(vocab_ids)}-token head")
    device = pick_device(None if args.device == "auto" else args.device)
    head, out_head, to_local = head.to(device), out_head.to(device), to_local.to(device)
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
        depths=args.depths,
        seed=args.seed,
        eval_every=args.eval_every,
        autocast=not args.no_autocast,
        max_minutes=args.max_minutes,
        hard_weight=args.hard_weight,
        reg_weight=args.reg_weight,
        noise=args.feature_noise,
        hard_labels=args.hard_labels,
        log=log,
    )
    _save_trained(args, head.cpu(), result, len(data), train_rows, out, stats, log)
    return True


def _save_trained(args, head, result: dict, n_rows: int, train_rows: list, out: Path, stats, log) -> None:
    stats["train"] = result
    info = {
        "params": sum(p.numel() for p in head.parameters()),
        "train_rows": n_rows,
        "train_minutes": result["seconds"] / 60,
        "heldout_top1_by_depth": result["heldout"]["top1"],
        "seed": args.seed,
        "epochs": args.epochs,
        "lr": args.lr,
        "depths": args.depths,
        "reg_weight": args.reg_weight,
        "feature_noise": args.feature_noise,
        "init": args.init,
        "head_vocab": args.head_vocab,
    }
    if args.keep_init_vocab and args.init:
        keep = json.loads((Path(args.init) / DRAFT_VOCAB_FILE).read_text())["ids"]
        if args.add_vocab > 0:
            keep = widened_vocab(keep, train_rows, args.add_vocab)
            info["vocab_added"] = args.add_vocab
        info["head_vocab"] = len(keep)
        info["vocab_from"] = args.init
    else:
        keep = frequent_tokens(train_rows, args.head_vocab)
    stats["bytes"] = save_head(head, out, keep, info)
    stats.save()
    log(
        f"train: {result['steps']} steps in {result['seconds']:.0f} s; held-out top-1 by depth "
        f"{[round(x, 3) for x in result['heldout']['top1']]}; wrote {out} ({stats['bytes'] / 1e6:.1f} MB)"
    )


if __name__ == "__main__":
    sys.exit(main())
