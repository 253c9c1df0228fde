"""Command line: python -m engine run | bench | passes | probe | predict   (docs/design.md §4).

    python -m engine run   --prompt TEXT [--prompt TEXT ...] --mode {autoregressive,speculative} [--depth K]
                           [--drafter {model,ngram,eagle}] [--confidence C] [--temperature T] [--top-p P] [--max-new-tokens N] [--seed S]
                           [--dtype {auto,float32,bfloat16}] [--cuda-graphs {auto,off,static,padded}] [--json PATH]
    python -m engine bench --batch 1,4,16 --depth 0,2,4,8 [--confidence 0,0.3] [--drafter ...] [--dtype ...] [--json PATH]
    python -m engine passes [--batch 1,8] [--tokens 1,2,4,...] [--context 150]   # one forward's time vs tokens per pass
                            [--compare-backends torch,fused,native [--rounds 3]]   # backends' passes against each other
    python -m engine probe
    python -m engine predict --gpu H200 --model 8B [--context 1024] [--alpha 0.7] [--c 0.05] [--dtype bfloat16]
                             [--floor graph|eager|none]   # the roofline predictor's table: a model, not a measurement
Errors in the input are printed as one line and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

from engine.config import BackendKind, DrafterKind, GraphMode, Mode, PolicyKind

BACKEND_NAMES = tuple(kind.value for kind in BackendKind if kind is not BackendKind.AUTO)  # the config's, as the backend's
MODES, DRAFTERS, GRAPH_MODES, POLICIES = ([e.value for e in kinds] for kinds in (Mode, DrafterKind, GraphMode, PolicyKind))
FAST_ALIASES = {"off": "torch", "eager": "fused", "native": "native"}  # --fast's old values


def _list_of(convert, what: str):
    """An argparse type: comma-separated values, each read by `convert` (int: integers, float: numbers)."""

    def parse(text: str) -> list:
        try:
            values = [convert(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}s, got {text!r}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected at least one {what}")
        return values

    return parse


_int_list, _float_list = _list_of(int, "integer"), _list_of(float, "number")


def _batch_table(text: str) -> tuple[tuple[int, int, int], ...]:
    """--batch-table '1-4:4,5-16:2,17-1024:0' -> ((1, 4, 4), (5, 16, 2), (17, 1024, 0)); 'N:k' is N-N:k."""
    rows = []
    for part in text.split(","):
        try:
            span, k = part.strip().split(":")
            low, _, high = span.partition("-")
            rows.append((int(low), int(high or low), int(k)))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected MIN-MAX:K rows separated by commas (e.g. 1-4:4,5-16:2,17-1024:0); got {part.strip()!r}"
            ) from None
    return tuple(rows)


POLICY_HELP = (
    "fixed: always --depth; off_above_batch: the classic rule (vLLM V0's disable_by_batch_size), no "
    "speculation above --disable-by-batch-size; heuristic: transformers' +2/-1 schedule; batch_table: k per "
    "batch range (vLLM num_speculative_tokens_per_batch_size; --batch-table, else derived from this "
    "machine's measured pass cost); goodput: k maximising expected tokens/s from the measured pass cost and "
    "the run's acceptance (never above --depth; with --tree-nodes it also chooses plain, a chain or the tree cut to n nodes)"
)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"], help="model dtype (auto: bf16 where native)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1, mps (default: best available)")
    p.add_argument("--target", default=None, help="target hub id or folder (default: embedded SmolLM2-135M-Instruct)")
    p.add_argument("--draft", default="default", help="draft hub id, folder, truncated:N or none (default: shipped draft)")
    p.add_argument("--eagle", default="default", help="EAGLE head folder or none (default: the shipped head, embedded target only)")
    p.add_argument(
        "--cuda-graphs",
        default="off",
        choices=GRAPH_MODES,
        help="deprecated alias of --backend (static, padded: cuda_graphs_static, cuda_graphs_padded; auto: cuda_graphs on CUDA). "
        "off (default): no CUDA graphs, the --backend's own passes (on a CPU the native or fused pass over static KV buffers)",
    )
    p.add_argument(
        "--backend",
        default="auto",
        choices=["auto", *BACKEND_NAMES],
        help="how passes are computed (engine/model/backend.py): auto (default: $SPECLAB_BACKEND, else native on the CPU, fused there "
        "without the kernels, torch elsewhere), transformers, torch, fused, native, cuda_graphs (CUDA), cuda_graphs_static/_padded",
    )
    p.add_argument("--fast", dest="backend", type=_fast_alias, help=argparse.SUPPRESS)  # --backend's old alias


def _fast_alias(value: str) -> str:
    """--fast's old value -> the backend it named."""
    if value not in FAST_ALIASES:
        raise argparse.ArgumentTypeError(f"--fast is now --backend; its old values were {', '.join(FAST_ALIASES)}, got {value!r}")
    return FAST_ALIASES[value]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description="SpecLab decoding engine")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    _bench_parser(sub)
    _other_parsers(sub)
    from engine.serving import cli as serving_cli

    serving_cli.add_parser(sub)
    return parser


def _run_parser(sub) -> None:
    run = sub.add_parser("run", help="decode prompts once and print the text and summary")
    run.add_argument("--prompt", action="append", required=True, help="a user message; repeat for a batch")
    run.add_argument("--mode", default=Mode.SPECULATIVE.value, choices=MODES)
    run.add_argument("--depth", type=int, default=4, help="draft tokens per step, 0..16")
    run.add_argument("--drafter", default="model", choices=DRAFTERS, help="model: distilled draft; ngram: prompt lookup; eagle: EAGLE head")
    run.add_argument("--policy", default="fixed", choices=POLICIES, help=POLICY_HELP)
    run.add_argument(
        "--batch-table",
        type=_batch_table,
        default=None,
        help="batch_table policy: MIN-MAX:K rows, e.g. 1-4:4,5-16:2,17-1024:0 (K = 0: no speculation)",
    )
    run.add_argument("--disable-by-batch-size", type=int, default=8, help="off_above_batch: speculate only while batch <= N")
    run.add_argument(
        "--confidence",
        type=float,
        default=0.0,
        help="model drafters stop a row's draft once the product of their probabilities falls below this "
        "(0..1; 0 = always draft --depth tokens)",
    )
    run.add_argument(
        "--tree-nodes",
        type=int,
        default=0,
        help="tree drafting (eagle, model): verify this many draft-tree nodes per row (0 = a chain of --depth; "
        "with --policy goodput, the most a step verifies)",
    )
    run.add_argument("--tree-topk", type=int, default=0, help="tree drafting: children expanded per node")
    run.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    run.add_argument("--top-p", type=float, default=1.0)
    run.add_argument("--max-new-tokens", type=int, default=64)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--json", default=None, help="write the full trace here (speclab.trace/1)")
    _common(run)


def _bench_parser(sub) -> None:
    bench = sub.add_parser("bench", help="AR vs speculative tokens/s over a batch x depth grid (medians)")
    bench.add_argument("--batch", type=_int_list, default=[1, 4, 16], help="comma-separated batch sizes")
    bench.add_argument("--depth", type=_int_list, default=[0, 2, 4, 8], help="comma-separated depths")
    bench.add_argument("--drafter", default="model", choices=DRAFTERS)
    bench.add_argument(
        "--policy",
        type=_list_of(str, "policy name"),
        default=["fixed"],
        help="comma-separated policies, each measured at every batch and depth (" + ", ".join(POLICIES) + ")",
    )
    bench.add_argument("--batch-table", type=_batch_table, default=None, help="batch_table policy: MIN-MAX:K rows")
    bench.add_argument(
        "--confidence",
        type=_float_list,
        default=[0.0],
        help="comma-separated confidence thresholds (0..1), each run at every depth (0 = off)",
    )
    bench.add_argument(
        "--tree-nodes",
        type=_int_list,
        default=[0],
        help="comma-separated tree sizes (tree drafting; 0 = the chain), each with every --tree-topk",
    )
    bench.add_argument("--tree-topk", type=_int_list, default=[0], help="comma-separated children per tree node")
    bench.add_argument("--disable-by-batch-size", type=int, default=8)
    bench.add_argument(
        "--prompts",
        default="chat",
        choices=["chat", "extractive", "heldout"],
        help="built-in prompt set (heldout: topics the distilled draft never saw)",
    )
    bench.add_argument("--baseline-prompts", type=int, default=4, help="prompts in the --baseline comparison")
    bench.add_argument(
        "--sequential", type=int, default=1, help="at batch 1, decode this many prompts one after another per cell (less noisy alpha)"
    )
    bench.add_argument("--max-new-tokens", type=int, default=64)
    bench.add_argument("--repeats", type=int, default=3, help="runs per cell; the median is reported")
    bench.add_argument("--baseline", action="store_true", help="also time transformers generate() at batch 1")
    bench.add_argument("--json", default=None, help="write the results here")
    _common(bench)


def _other_parsers(sub) -> None:
    passes = sub.add_parser("passes", help="time ONE target forward vs tokens per pass: the roofline curve, measured")
    passes.add_argument("--batch", type=_int_list, default=[1], help="comma-separated batch sizes")
    passes.add_argument("--tokens", type=_int_list, default=[1, 2, 4, 8, 16, 32, 64], help="new tokens per row")
    passes.add_argument("--context", type=int, default=150, help="KV cache length per row")
    passes.add_argument("--repeats", type=int, default=5)
    passes.add_argument("--model", default="target", choices=["target", "draft"])
    passes.add_argument(
        "--compare-backends",
        type=_list_of(str, "backend"),
        default=None,
        help="comma-separated backends (e.g. torch,fused,native) timed against each other, interleaved over --rounds",
    )
    passes.add_argument("--rounds", type=int, default=3, help="--compare-backends: interleaved rounds (median, min-max over them)")
    passes.add_argument("--json", default=None)
    _common(passes)

    probe = sub.add_parser("probe", help="measure this machine's peak memory bandwidth and matmul FLOP/s")
    probe.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    probe.add_argument("--device", default=None)

    predict = sub.add_parser("predict", help="the roofline predictor for a named GPU (a model, not a measurement)")
    predict.add_argument("--gpu", default="H200", help="T4, L4, A10G, A100-40GB, A100-80GB, H100-SXM, H200, B200, RTX4090")
    predict.add_argument("--model", default="8B", help="135M, 1.7B, 7B, 8B, 27B, 70B")
    predict.add_argument("--context", type=int, default=1024, help="KV cache length per row")
    predict.add_argument("--alpha", type=float, default=0.7, help="per-token acceptance")
    predict.add_argument("--c", type=float, default=0.05, help="draft step cost / target step cost")
    predict.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    predict.add_argument("--floor", default="graph", choices=["graph", "eager", "none"])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve-bench":  # no model here: a server elsewhere does the decoding
        from engine.serving import cli as serving_cli

        try:
            return serving_cli.run(args)
        except (ValueError, *serving_cli.ERRORS) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.command == "predict":
        from engine.roofline.predictor import prediction_table

        try:
            print(prediction_table(args.gpu, args.model, args.context, args.alpha, args.c, args.dtype, args.floor))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    from engine import ConfigError, ModelLoadError, TraceError

    try:
        _check_json_path(getattr(args, "json", None))  # before any decoding: a bad path must not lose a run
        if getattr(args, "device", None):
            from engine.hardware import pick_device

            pick_device(args.device)
        command = {"probe": _probe, "passes": _passes, "run": _run, "bench": _bench}.get(args.command)
        if command is None:
            return 1
        command(args)
        return 0
    except (ConfigError, ModelLoadError, TraceError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _probe(args) -> None:
    from engine.hardware import probe

    result = probe(args.device, args.dtype)
    print(f"device        {result.device_name} ({result.device}), dtype {result.dtype}")
    print(f"bandwidth     {result.peak_bandwidth / 1e9:8.1f} GB/s (copy, measured)")
    print(f"matmul        {result.peak_flops / 1e9:8.1f} GFLOP/s (measured)")
    print(f"ridge point   {result.ridge_point:8.1f} FLOP/byte: above it a pass is compute-bound")


def _passes(args) -> None:
    from engine import load_pair
    from engine.bench.fastcompare import check_modes, compare_fast, format_fast_comparison
    from engine.bench.harness import format_passes
    from engine.decoding.passcurve import pass_costs
    from engine.hardware import probe

    modes = check_modes(args.compare_backends) if args.compare_backends else None
    if args.rounds < 1 or args.repeats < 1:
        raise ValueError("--rounds and --repeats must be >= 1")
    draft = args.draft if args.model == "draft" else "none"
    pair = load_pair(target=args.target, draft=draft, device=args.device, dtype=args.dtype)
    peaks = probe(pair.device, pair.dtype, quick=True)
    print(
        f"{args.model} forward passes on {peaks.device_name}, {pair.dtype_name}, context {args.context}; "
        f"peak {peaks.peak_bandwidth / 1e9:.1f} GB/s, {peaks.peak_flops / 1e9:.1f} GFLOP/s (probed)"
    )
    if modes:
        if args.model != "target":
            raise ValueError("--compare-backends times the target's passes (use --model target)")
        rows = compare_fast(pair, modes, args.batch, args.tokens, args.context, args.repeats, args.rounds)
        print(f"backends interleaved, {args.rounds} rounds x {args.repeats} passes; median over rounds [min-max]")
        print(format_fast_comparison(rows, modes, peaks.peak_bandwidth))
    else:
        a = args
        rows = pass_costs(pair, a.batch, a.tokens, a.context, a.repeats, a.model, cuda_graphs=a.cuda_graphs, backend=a.backend)
        print(format_passes(rows, peaks.peak_flops, peaks.peak_bandwidth))
    if args.json:
        _write_json(args.json, {"probe": peaks.to_dict(), "rows": rows, "compare_backends": modes})


def _run(args) -> None:
    from engine import ConfigError, DecodeConfig, generate, load_pair

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
    pair = load_pair(target=args.target, draft=_draft_arg(args, cfg), device=args.device, dtype=args.dtype, eagle=args.eagle)
    trace = generate(pair, args.prompt, cfg)
    for i, seq in enumerate(trace.sequences):
        print(f"--- [{i + 1}] {seq['prompt'][:70]}\n{seq['text']}")
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


def _bench(args) -> None:
    from engine import ConfigError, DecodeConfig, load_pair
    from engine.bench.harness import bench, format_table

    bad = [d for d in args.depth if not 0 <= d <= 16] + [b for b in args.batch if b < 1]
    if bad:
        raise ConfigError(f"batch sizes must be >= 1 and depths 0..16; got {bad}")
    bad = [c for c in args.confidence if not 0 <= c <= 1]
    if bad:
        raise ConfigError(f"confidence thresholds must be between 0 and 1; got {bad}")
    unknown = [p for p in args.policy if p not in POLICIES]
    if unknown:
        raise ConfigError(f"unknown policy {unknown[0]!r}: choose from {', '.join(POLICIES)}")
    if args.sequential < 1 or args.baseline_prompts < 1:
        raise ConfigError("--sequential and --baseline-prompts must be >= 1")
    trees = _tree_settings(args.tree_nodes, args.tree_topk, args.drafter, args.depth, DecodeConfig)
    draft = "none" if args.drafter == "ngram" and args.draft == "default" else args.draft
    pair = load_pair(target=args.target, draft=draft, device=args.device, dtype=args.dtype, eagle=args.eagle)
    print(f"benchmarking on {pair.device.type}, {pair.dtype_name} ...", file=sys.stderr)
    result = bench(
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
    )
    print(format_table(result))
    if args.json:
        _write_json(args.json, result)


def _tree_settings(nodes: list[int], topks: list[int], drafter: str, depths: list[int], config) -> list[tuple[int, int]]:
    """bench --tree-nodes/--tree-topk -> (nodes, topk) settings: the chain (node 0) and every tree size with
    every top-k that fits some --depth; each checked by DecodeConfig before any model loads."""
    from engine import ConfigError
    from engine.bench.harness import tree_fits

    trees = [(0, 0)] if 0 in nodes else []
    for n in (n for n in nodes if n):
        fitting = [(n, k) for k in topks if k and any(tree_fits((n, k), d) for d in depths)]
        if not fitting:
            raise ConfigError(f"--tree-nodes {n}: no --tree-topk (>0) and --depth can hold it (k + (depth-1) k^2 >= nodes)")
        for tree in fitting:
            depth = max(d for d in depths if tree_fits(tree, d))
            config(drafter=drafter, depth=depth, tree_nodes=tree[0], tree_topk=tree[1])  # one-line ConfigError
            trees.append(tree)
    if not trees:
        raise ConfigError("--tree-nodes: give at least one size (0 = the chain)")
    return trees


def _check_json_path(path: str | None) -> None:
    """--json must name a file in an existing, writable folder: checked before the run, not after it."""
    if not path:
        return
    from engine import ConfigError

    if os.path.isdir(path):
        raise ConfigError(f"--json {path}: is a folder; give a file name, e.g. {os.path.join(path, 'trace.json')}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ConfigError(f"--json {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise ConfigError(f"--json {path}: not writable")


def _write_json(path: str, data) -> None:
    from engine import ConfigError

    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except OSError as exc:  # the table is already printed
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ConfigError(f"could not write the results to {path}: {exc.strerror or exc}") from None
    print(f"results written to {path}")


def _draft_arg(args, cfg) -> str | None:
    # The n-gram and EAGLE drafters need no draft model: skip loading one.
    if cfg.drafter in ("ngram", "eagle") and args.draft == "default":
        return "none"
    if not cfg.speculative and args.draft == "default":
        return "none"
    return args.draft


if __name__ == "__main__":
    sys.exit(main())
