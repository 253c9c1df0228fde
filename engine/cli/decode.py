"""The decoding commands: `run` (decode prompts once, print text and summary) and `bench` (AR against speculative over a
batch x depth grid), and which drafter weights each loads."""

from __future__ import annotations

import sys

from engine.cli.files import write_json
from engine.cli.parser import POLICIES


def run(args) -> None:
    from engine import ConfigError, DecodeConfig, generate, load_pair
    from engine.bench.context import check_context, with_context

    cfg = DecodeConfig(
        mode=args.mode,
        depth=args.depth,
        drafter=args.drafter,
        policy=args.policy,
        disable_by_batch_size=args.disable_by_batch_size,
        temperature=args.temperature,
        top_p=args.top_p,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
        confidence_threshold=args.confidence,
        batch_table=args.batch_table,
        cuda_graphs=args.cuda_graphs,
        backend=args.backend,
        tree_nodes=args.tree_nodes,
        tree_topk=args.tree_topk,
    )
    check_context(args.context)  # before any model loads
    for note in unused_notes(args):
        print(note, file=sys.stderr)
    if any(not p.strip() for p in args.prompt):
        raise ConfigError("--prompt: every prompt needs some text")
    loaded = weights(args, cfg.drafter if cfg.speculative else None, keep_unused=False)
    pair = load_pair(target=args.target, device=args.device, dtype=args.dtype, **loaded)
    trace = generate(pair, with_context(pair, args.prompt, args.context, cfg.max_new_tokens + cfg.depth + 1), cfg)
    if args.context:
        lengths = [seq["prompt_tokens"] for seq in trace.sequences]
        shared = trace.meta["shared_prefix"]
        print(f"--- context: the document before every prompt, {min(lengths)}-{max(lengths)} tokens per row", end="")
        print(f"; {shared} tokens shared by the rows, prefilled once" if shared else "")
    for i, seq in enumerate(trace.sequences):
        print(f"--- [{i + 1}] {shown(args.prompt[i][:70])}\n{seq['text']}")
    print("--- summary")
    for key, value in trace.summary.items():
        if isinstance(value, float):
            value = f"{value:.4g}"
        elif isinstance(value, list):
            value = "[" + ", ".join(f"{v:.2f}" for v in value) + "]"
        print(f"{key:<24} {value}")
    if args.json:
        try:
            trace.to_json(args.json)
        except OSError as exc:  # the summary above is already printed
            raise ConfigError(f"could not write the trace to {args.json}: {exc.strerror or exc}") from None
        print(f"trace written to {args.json}")


def unused_notes(args) -> list[str]:
    """Options given that this command line does not use (it runs, and says so, rather than ignore them silently)."""
    notes = []
    policies = args.policy if isinstance(args.policy, list) else [args.policy]
    if args.batch_table is not None and "batch_table" not in policies:
        notes.append("--batch-table is read by --policy batch_table only")
    if getattr(args, "mode", "speculative") == "autoregressive":
        drafting = [f for f, v in (("--depth", args.depth != 4), ("--tree-nodes", args.tree_nodes), ("--confidence", args.confidence)) if v]
        if drafting:
            notes.append(f"{', '.join(drafting)} {'drafts' if len(drafting) == 1 else 'draft'} nothing with --mode autoregressive")
    return [f"note: {n}" for n in notes]


def shown(text: str) -> str:
    """A prompt in a one-line header: control characters (a newline, a terminal's escape codes) as spaces."""
    return "".join(c if c.isprintable() else " " for c in text)


def bench(args) -> None:
    from engine import ConfigError, DecodeConfig, load_pair
    from engine.bench.harness import bench as bench_grid
    from engine.bench.harness import format_table

    bad = [d for d in args.depth if not 0 <= d <= 16] + [b for b in args.batch if not 1 <= b <= MAX_BATCH]
    if bad:
        raise ConfigError(f"batch sizes must be 1..{MAX_BATCH} and depths 0..16; got {bad}")
    if args.repeats < 1 or args.max_new_tokens < 1:
        raise ConfigError(f"--repeats and --max-new-tokens must be >= 1; got {args.repeats} and {args.max_new_tokens}")
    bad = [c for c in args.confidence if not 0 <= c <= 1]
    if bad:
        raise ConfigError(f"confidence thresholds must be between 0 and 1; got {bad}")
    unknown = [p for p in args.policy if p not in POLICIES]
    if unknown:
        raise ConfigError(f"unknown policy {unknown[0]!r}: choose from {', '.join(POLICIES)}")
    if args.sequential < 1 or args.baseline_prompts < 1:
        raise ConfigError("--sequential and --baseline-prompts must be >= 1")
    from engine.bench.context import check_context

    check_context(args.context)
    if args.context and (args.prompts_file is not None or args.baseline):
        raise ConfigError("--context goes with the batch x depth grid, not with --prompts-file or --baseline")
    grid_only = [flag for flag, used in GRID_ONLY.items() if used(args)]
    if args.prompts_file is not None and grid_only:
        verb = "goes" if len(grid_only) == 1 else "go"
        raise ConfigError(
            f"{', '.join(grid_only)} {verb} with the batch x depth grid, not with --prompts-file (its prompts are the file's)"
        )
    trees = tree_settings(args.tree_nodes, args.tree_topk, args.drafter, args.depth, DecodeConfig)
    for note in unused_notes(args):
        print(note, file=sys.stderr)
    if args.prompts_file is not None:  # the task bench: per category, on the file's prompts
        from engine.cli import tasks

        tasks.prompts_of(args), tasks.contenders(args, trees)  # a bad file or cell is refused before any model loads
        pair = load_pair(target=args.target, device=args.device, dtype=args.dtype, **weights(args, args.drafter, keep_unused=False))
        tasks.task_bench(args, pair, trees)
        return
    if args.category is not None or args.per_category is not None:
        raise ConfigError("--category and --per-category go with --prompts-file")
    pair = load_pair(target=args.target, device=args.device, dtype=args.dtype, **weights(args, args.drafter, keep_unused=True))
    print(f"benchmarking on {pair.device.type}, {pair.dtype_name} ...", file=sys.stderr)
    result = bench_grid(
        pair,
        args.batch,
        args.depth,
        drafter=args.drafter,
        prompt_set=args.prompts,
        policy=args.policy,
        disable_by_batch_size=args.disable_by_batch_size,
        batch_table=args.batch_table,
        max_new_tokens=args.max_new_tokens,
        repeats=args.repeats,
        baseline=args.baseline,
        baseline_prompts=args.baseline_prompts,
        sequential=args.sequential,
        confidences=args.confidence,
        trees=trees,
        log=lambda s: print(s, file=sys.stderr),
        cuda_graphs=args.cuda_graphs,
        backend=args.backend,
        context=args.context,
    )
    print(format_table(result))
    if args.json:
        write_json(args.json, result)


MAX_BATCH = 1024  # rows a bench or passes batch may hold: the batch-table's largest range; more only exhausts memory


GRID_ONLY = {  # bench options the task bench (--prompts-file) has no use for, and whether a command line set them
    "--prompts": lambda a: a.prompts != "chat",
    "--sequential": lambda a: a.sequential != 1,
    "--baseline": lambda a: a.baseline,
}


def tree_settings(nodes: list[int], topks: list[int], drafter: str, depths: list[int], config) -> list[tuple[int, int]]:
    """bench --tree-nodes/--tree-topk -> (nodes, topk) settings: the chain (node 0) and every tree size with
    every top-k that fits some --depth; each checked by DecodeConfig before any model loads."""
    from engine import ConfigError
    from engine.bench.harness import tree_fits
    from engine.options import MAX_TREE_NODES

    if any(not 0 <= n <= MAX_TREE_NODES for n in nodes):
        raise ConfigError(f"--tree-nodes must be between 0 (the chain) and {MAX_TREE_NODES}; got {nodes}")
    trees = [(0, 0)] if 0 in nodes else []
    for n in (n for n in nodes if n):
        fitting = [(n, k) for k in topks if k and any(tree_fits((n, k), d) for d in depths)]
        if not fitting:
            raise ConfigError(f"--tree-nodes {n}: no --tree-topk (>0) and --depth can hold it (k + (depth-1) k^2 >= nodes)")
        for k in (k for k in topks if k and (n, k) not in fitting):
            print(f"note: tree {n} nodes, top-k {k} left out: no --depth holds it (k + (depth-1) k^2 >= nodes)", file=sys.stderr)
        for tree in fitting:
            depth = max(d for d in depths if tree_fits(tree, d))
            config(drafter=drafter, depth=depth, tree_nodes=tree[0], tree_topk=tree[1])  # one-line ConfigError
            trees.append(tree)
    if not trees:
        raise ConfigError("--tree-nodes: give at least one size (0 = the chain)")
    return trees


def weights(args, kind: str | None, keep_unused: bool) -> dict[str, str | None]:
    """load_pair's drafter weights (draft=, eagle=) from --draft and --eagle. A weight left at "default" is skipped
    ("none") where the run's drafter `kind` (None: plain decoding) does not load it, so a run loads only what it
    drafts with; keep_unused keeps the defaults for any drafter that loads something (the bench's baseline times
    transformers' assisted generation with the draft model)."""
    from engine.drafters import DRAFTERS

    loads = DRAFTERS[kind].loads if kind is not None else None
    given = {"draft": args.draft, "eagle": args.eagle}
    return {
        slot: "none" if value == "default" and slot != loads and not (keep_unused and loads is not None) else value
        for slot, value in given.items()
    }
