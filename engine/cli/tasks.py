"""`bench --prompts-file FILE`: the task bench (engine/bench/tasks.py) on your own prompts or Spec-Bench's, reported per
category: each contender's decode-only speedup over plain decoding with the one rule's 95% range, τ, per-position
acceptance, and the whole run's speedup beside it. The contenders are the bench's own cells: its --drafter at each
--depth above 0 (with --tree-nodes, a tree each), every --policy."""

from __future__ import annotations

import datetime as dt
import sys

from engine.bench.prompt_files import SPEC_BENCH, PromptFileError, read_prompts, select, task_name
from engine.bench.tasks import Contender, format_tasks, run_tasks

SPEC_BENCH_NAME = "spec-bench"  # --prompts-file's name for the shipped Spec-Bench prompts (assets/spec_bench/)


def prompts_of(args) -> list:
    """The prompts --prompts-file, --category and --per-category choose (ConfigError, one line, where they cannot)."""
    from engine import ConfigError

    path = SPEC_BENCH if args.prompts_file == SPEC_BENCH_NAME else args.prompts_file
    try:
        return select(read_prompts(path), task=args.category, per_task=args.per_category)
    except PromptFileError as exc:
        raise ConfigError(str(exc)) from None


def contenders(args, trees: list[tuple[int, int]]) -> list[Contender]:
    """The bench's cells as task bench contenders: --drafter at every --depth above 0, each --policy and tree."""
    from engine.drafters import DRAFTERS

    name = DRAFTERS[args.drafter].display
    out = []
    for depth in (d for d in args.depth if d > 0):
        for policy in args.policy:
            for nodes, topk in trees:
                spec = {"drafter": args.drafter, "depth": depth, "policy": policy, "disable_by_batch_size": args.disable_by_batch_size}
                spec |= {"tree_nodes": nodes, "tree_topk": topk, "batch_table": args.batch_table if policy == "batch_table" else None}
                label = f"{name}, k {depth}" + (f", tree {nodes}/{topk}" if nodes else "") + (f", {policy}" if policy != "fixed" else "")
                out.append(Contender(label, spec))
    if not out:
        from engine import ConfigError

        raise ConfigError("--prompts-file needs a speculative cell to set against plain decoding: give a --depth above 0")
    return out


def task_bench(args, pair, trees: list[tuple[int, int]]) -> None:
    """Measure, print the leaderboard per batch, and with --json write a task bench recording."""
    import time

    from engine.bench import task_records
    from engine.cli.files import write_json
    from engine.hardware import probe

    prompts, chosen = prompts_of(args), contenders(args, trees)
    print(
        f"{len(prompts)} prompt{'' if len(prompts) == 1 else 's'} from {args.prompts_file} on {pair.device.type}, {pair.dtype_name} ...",
        file=sys.stderr,
    )
    t0 = time.monotonic()
    rows = run_tasks(pair, prompts, args.batch, chosen, args.max_new_tokens, args.repeats, log=lambda s: print(s, file=sys.stderr))
    seconds = time.monotonic() - t0
    print(format_tasks(rows))
    for r in (r for r in rows if r["contender"] != "plain" and r["per_position_acceptance"]):
        acc = ", ".join(f"{a:.2f}" for a in r["per_position_acceptance"])
        print(f"  {task_name(r['task'])}, batch {r['batch']}, {r['contender']}: acceptance by position [{acc}]")
    if args.json:
        settings = {"max_new_tokens": args.max_new_tokens, "rounds": args.repeats, "batches": args.batch, "per_task": args.per_category}
        settings |= {"file": str(args.prompts_file), "category": args.category, "contenders": [c.name for c in chosen]}
        machine = probe(pair.device, pair.dtype, quick=True).device_name
        by_task = {t: [p.qid for p in prompts if p.task == t] for t in dict.fromkeys(p.task for p in prompts)}
        record = task_records.make(
            rows,
            machine=machine,
            dtype=pair.dtype_name,
            seconds=seconds,
            settings=settings,
            prompts=by_task,
            date=dt.date.today().isoformat(),
        )
        write_json(args.json, record)
