"""Why a drafter's first draft position is accepted less often than its average top-1 agreement.

Training reports teacher-forced top-1 agreement: at every response position, does the drafter's argmax
match the target's greedy token? The engine reports per-position acceptance: of the drafts it started,
how often was the first token kept? On the same tokens these differ, and not because of a bug:

    python -m training.agreement --drafter eagle --prompts 24 --depth 4

decodes held-out prompts speculatively (greedy), then teacher-forces the drafter over the very tokens
the engine produced, and prints top-1 agreement
  - at every generated position (the training metric),
  - at the positions where a draft started (what position-1 acceptance counts), split by what came just
    before: the target's correction of a rejected draft, or its bonus token after a full acceptance,
  - and, at every position, given whether the drafter was right one position earlier.

A draft starts right after the target's own token, and after a rejection that token is one the drafter
got wrong. Hard tokens come in runs (a name, a number, the first words of a new sentence), so the
positions where drafting restarts are harder than average. On the shipped EAGLE head (run 10,
bfloat16, 24 held-out prompts, depth 4) top-1 was 0.632 over all positions but 0.554 at draft starts
(0.534 one position after a miss, 0.689 after a hit), where the engine accepted 0.557; its first
drafted token was the teacher-forced argmax at 98% of them.

The match between the engine and teacher forcing is itself a check on the engine: the drafter's cache,
the features (EAGLE) and the rollback after each verify must give it the same inputs a full forward
would. tests/training/test_agreement.py checks it in float32.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.config import DecodeConfig


@dataclass
class StepStart:
    row: int  # index into the decoded prompts
    index: int  # position in the generated tokens that the draft's first token predicts
    after: str  # "prefill" | "correction" | "bonus" | "plain": what the target emitted just before
    accepted: bool  # the engine kept the first drafted token
    drafted_id: int


def decode_and_record(pair, prompts: list[str], cfg: DecodeConfig, batch: int) -> tuple[list[dict], list[StepStart]]:
    """Decode `prompts` in batches; return their rows ({"prompt_ids", "output_ids"}) and every draft start."""
    from engine.decoding.decode import generate

    rows, starts = [], []
    for b in range(0, len(prompts), batch):
        trace = generate(pair, prompts[b : b + batch], cfg)
        made = [0] * len(trace.sequences)  # tokens generated so far, per sequence
        last = ["prefill"] * len(trace.sequences)
        for step in trace.steps:
            for s in step.seqs:
                if step.kind == "decode" and s.drafted:
                    starts.append(StepStart(b + s.seq, made[s.seq], last[s.seq], s.drafted[0].accepted, s.drafted[0].id))
                made[s.seq] += len(s.emitted)
                if step.kind == "decode":
                    last[s.seq] = s.next_kind
        for prompt, seq in zip(prompts[b : b + batch], trace.sequences):
            rows.append({"prompt_ids": pair.encode_prompt(prompt), "output_ids": list(seq["output_ids"])})
    return rows, starts


@torch.no_grad()
def teacher_forced_argmax(pair, rows: list[dict], drafter: str, eagle_dir: Path | None = None) -> list[torch.Tensor]:
    """Per row, the drafter's greedy guess for each generated token given all true tokens before it, over
    the vocabulary it drafts from (EAGLE: its first draft step from the target's features). A draft model
    with a reduced vocabulary is scored over it, as the engine's lean forward drafts (ModelDrafter keeps
    the full vocabulary only for models the lean forward cannot run)."""
    if drafter == "eagle":
        from engine.model.eagle_head import load_head

        from .eagle_head import EagleHead
        from .eagle_train import FeatureData
        from .features import extract_features

        if eagle_dir is None:
            raise ValueError("the EAGLE head's folder is needed to teacher-force it")
        config, state, vocab = load_head(Path(eagle_dir), pair.target)
        head = EagleHead(config)
        head.load_state_dict({k: v.float() for k, v in state.items()})
        head.eval()
        blob = extract_features(pair.target, rows, max_len=10**9, fuse_layers=tuple(config.get("fuse_layers", ())), log=lambda *a: None)
        data = FeatureData(blob)
        embed = pair.target.get_input_embeddings().weight.float()
        out_head = pair.target.get_output_embeddings().weight.float()[vocab]
        out = []
        for r in range(len(rows)):  # one row at a time: no padding, the exact shapes a full forward has
            batch = data.batch([r], embed)
            g = head.unrolled(batch["embeds"], batch["features"], batch["positions"], 1)[0]
            out.append(vocab[(g[batch["rows"], batch["cols"]] @ out_head.T).argmax(-1)])
        return out
    if drafter == "model":
        if "draft" not in pair.loaded:
            raise ValueError("this pair has no draft model")
        model, vocab = pair.loaded["draft"].module, pair.loaded["draft"].vocab
        out = []
        for row in rows:
            ids = torch.tensor([row["prompt_ids"] + row["output_ids"]], device=pair.device)
            logits = model(input_ids=ids).logits[0, len(row["prompt_ids"]) - 1 : -1].float()  # predicts output j
            out.append(vocab.to(logits.device)[logits[:, vocab].argmax(-1)] if vocab is not None else logits.argmax(-1))
        return [o.cpu() for o in out]
    raise ValueError(f"drafter must be 'eagle' or 'model', got {drafter!r}")


def compare(rows: list[dict], starts: list[StepStart], guesses: list[torch.Tensor]) -> dict:
    """Top-1 agreement everywhere, at draft starts (by what preceded them) and after a hit / a miss,
    beside the engine's own first-position acceptance."""
    right = [(g == torch.tensor(r["output_ids"])).tolist() for r, g in zip(rows, guesses)]
    # the first generated token comes from the prefill, never from a draft: leave it out everywhere
    everywhere = [ok for r in right for ok in r[1:]]
    after_hit = [r[j] for r in right for j in range(1, len(r)) if r[j - 1]]
    after_miss = [r[j] for r in right for j in range(1, len(r)) if not r[j - 1]]

    def rate(xs):
        return {"top1": sum(xs) / len(xs) if xs else None, "n": len(xs)}

    by_kind = {k: rate([right[s.row][s.index] for s in starts if s.after == k]) for k in ("prefill", "correction", "bonus", "plain")}
    return {
        "all_positions": rate(everywhere),
        "draft_starts": rate([right[s.row][s.index] for s in starts]),
        "draft_starts_by_previous": {k: v for k, v in by_kind.items() if v["n"]},
        "after_a_hit": rate(after_hit),
        "after_a_miss": rate(after_miss),
        "engine_first_position_acceptance": rate([s.accepted for s in starts]),
        "engine_draft_equals_teacher_forced": rate([s.drafted_id == int(guesses[s.row][s.index]) for s in starts]),
    }


def measure(
    pair,
    prompts: list[str],
    depth: int = 4,
    max_new_tokens: int = 96,
    batch: int = 8,
    drafter: str = "eagle",
    eagle_dir: Path | None = None,
) -> dict:
    cfg = DecodeConfig(mode="speculative", depth=depth, drafter=drafter, temperature=0.0, max_new_tokens=max_new_tokens)
    rows, starts = decode_and_record(pair, prompts, cfg, batch)
    return {
        "depth": depth,
        "prompts": len(prompts),
        "dtype": pair.dtype_name,
        "drafter": drafter,
        **compare(rows, starts, teacher_forced_argmax(pair, rows, drafter, eagle_dir)),
    }


def format_report(res: dict) -> str:
    def line(name, r):
        return f"  {name:<44} {r['top1']:.3f}  ({r['n']} positions)" if r["n"] else f"  {name:<44} -"

    out = [
        f"{res['drafter']} drafter, depth {res['depth']}, {res['prompts']} prompts, {res['dtype']}, greedy",
        "teacher-forced top-1 agreement with the target:",
        line("at every generated position", res["all_positions"]),
        line("at the positions where a draft started", res["draft_starts"]),
    ]
    for kind, r in res["draft_starts_by_previous"].items():
        out.append(line(f"  ... right after the target's {kind}" if kind != "prefill" else "  ... the first draft after the prompt", r))
    out += [
        line("one position after a hit", res["after_a_hit"]),
        line("one position after a miss", res["after_a_miss"]),
        "the engine:",
        line("first drafted token accepted", res["engine_first_position_acceptance"]),
        line("first drafted token == teacher-forced argmax", res["engine_draft_equals_teacher_forced"]),
    ]
    return "\n".join(out)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m training.agreement", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--drafter", choices=["eagle", "model"], default="eagle")
    p.add_argument("--eagle", default="default", help="EAGLE head folder (default: the shipped one)")
    p.add_argument("--draft", default="default", help="draft model folder (default: the shipped one)")
    p.add_argument("--prompts", type=int, default=24, help="held-out prompts (the distillation's evaluation set)")
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16", "float16"],
        help="auto: the engine's default (bfloat16 on this CPU)",
    )
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    p.add_argument("--json", default=None, help="also write the numbers to this file")
    args = p.parse_args(argv)
    if args.prompts < 1 or args.depth < 1 or args.max_new_tokens < 2 or args.batch < 1:
        p.error("--prompts, --depth and --batch must be >= 1 and --max-new-tokens >= 2")
    return args


def main(argv=None) -> int:
    from engine.bench.prompts import heldout_prompts
    from engine.model.pair import SHIPPED_EAGLE, ModelLoadError, load_pair

    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        if args.drafter == "eagle":
            pair = load_pair(draft=None, eagle=args.eagle, dtype=args.dtype)
            eagle_dir = SHIPPED_EAGLE if args.eagle == "default" else Path(args.eagle)
            if "eagle" not in pair.loaded:
                raise ModelLoadError(f"no EAGLE head loaded from {eagle_dir}")
        else:
            pair = load_pair(draft=args.draft, eagle=None, dtype=args.dtype)
            eagle_dir = None
            if "draft" not in pair.loaded:
                raise ModelLoadError("no draft model loaded")
    except (ModelLoadError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    res = measure(pair, heldout_prompts(args.prompts), args.depth, args.max_new_tokens, args.batch, args.drafter, eagle_dir)
    print(format_report(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
