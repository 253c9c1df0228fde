"""The measuring commands: `probe` (this machine's peaks) and `passes` (one forward's time against tokens per pass;
with several contexts, per (batch, context), with the room and the knee of each and goodput's (batch, context) -> k)."""

from __future__ import annotations

from engine.cli.decode import MAX_BATCH
from engine.cli.files import write_json


def probe(args) -> None:
    from engine.hardware import probe as measure_peaks

    result = measure_peaks(args.device, args.dtype)
    print(f"device        {result.device_name} ({result.device}), dtype {result.dtype}")
    print(f"bandwidth     {result.peak_bandwidth / 1e9:8.1f} GB/s (copy, measured)")
    print(f"matmul        {result.peak_flops / 1e9:8.1f} GFLOP/s (measured)")
    print(f"ridge point   {result.ridge_point:8.1f} FLOP/byte: above it a pass is compute-bound")


MAX_PASS_TOKENS = 65_536  # tokens one timed pass may carry (batch x new tokens per row): the curve is long flat by then


def _check(args, modes) -> None:
    """Everything about a passes command that can be refused before any model loads (the context window after)."""
    if args.rounds < 1 or args.repeats < 1:
        raise ValueError("--rounds and --repeats must be >= 1")
    if min(args.context) < 2 or min(args.batch) < 1 or min(args.tokens) < 1:
        raise ValueError("--context must be >= 2 tokens, --batch and --tokens >= 1")
    if max(args.batch) > MAX_BATCH or max(args.batch) * max(args.tokens) > MAX_PASS_TOKENS:
        raise ValueError(f"--batch must be at most {MAX_BATCH} and --batch x --tokens at most {MAX_PASS_TOKENS:,} tokens per pass")
    if modes and args.model != "target":
        raise ValueError("--compare-backends times the target's passes (use --model target)")
    if len(args.context) > 1 and (modes or args.model != "target"):
        raise ValueError("several --context values time the target's default passes (no --compare-backends, --model target)")
    if not 1 <= args.depth <= 16:
        raise ValueError(f"--depth must be between 1 and 16 (the k table's deepest chain); got {args.depth}")
    if args.drafter is not None and args.model != "target":
        raise ValueError("--drafter's k table prices the target's passes: use it with --model target")


def _check_window(pair, args) -> None:
    """Every timed pass fits the model's context window: its cache (--context) and its new tokens."""
    most = max(args.context) + max(args.tokens)
    if most > pair.max_context:
        raise ValueError(f"--context {max(args.context)} + --tokens {max(args.tokens)} exceeds the model's {pair.max_context}-token window")


def passes(args) -> None:
    from engine import load_pair
    from engine.bench.fastcompare import check_modes, compare_fast, format_fast_comparison
    from engine.bench.harness import format_passes
    from engine.cli.decode import weights
    from engine.decoding.passcurve import pass_costs
    from engine.hardware import probe

    modes = check_modes(args.compare_backends) if args.compare_backends else None
    _check(args, modes)
    loaded = weights(args, args.drafter, keep_unused=False)  # the k table's drafter, else nothing but the target
    if args.model == "draft":
        loaded["draft"] = args.draft
    pair = load_pair(target=args.target, device=args.device, dtype=args.dtype, **loaded)
    _check_window(pair, args)
    peaks = probe(pair.device, pair.dtype, quick=True)
    contexts = ", ".join(str(c) for c in args.context)
    print(
        f"{args.model} forward passes on {peaks.device_name}, {pair.dtype_name}, context {contexts}; "
        f"peak {peaks.peak_bandwidth / 1e9:.1f} GB/s, {peaks.peak_flops / 1e9:.1f} GFLOP/s (probed)"
    )
    out = {"probe": peaks.to_dict(), "compare_backends": modes}
    if modes:
        if args.model != "target":
            raise ValueError("--compare-backends times the target's passes (use --model target)")
        rows = compare_fast(pair, modes, args.batch, args.tokens, args.context[0], args.repeats, args.rounds)
        print(f"backends interleaved, {args.rounds} rounds x {args.repeats} passes; median over rounds [min-max]")
        print(format_fast_comparison(rows, modes, peaks.peak_bandwidth))
    elif len(args.context) == 1:
        a = args
        rows = pass_costs(pair, a.batch, a.tokens, a.context[0], a.repeats, a.model, cuda_graphs=a.cuda_graphs, backend=a.backend)
        print(format_passes(rows, peaks.peak_flops, peaks.peak_bandwidth))
        out |= _rooms(pair, args, _curves_of(pair, rows))
    else:
        from engine.decoding.context_curves import keep_curves, measure_context_curves

        curves, rows = measure_context_curves(pair, args.batch, args.context, args.tokens, args.rounds, args.repeats)
        print(f"(batch, context) interleaved, {args.rounds} rounds x {args.repeats} passes; median over rounds (the curves: the fastest)")
        print(format_passes(rows, peaks.peak_flops, peaks.peak_bandwidth))
        keep_curves(pair, curves, args.tokens)  # for later look-ups (engine.decoding.context_curves.context_curve)
        out |= _rooms(pair, args, curves)
    if args.json:
        write_json(args.json, out | {"rows": rows})


def _curves_of(pair, rows: list[dict]) -> list:
    """One (batch, context) curve per batch of `pass_costs` rows (one context)."""
    from engine.decoding.context_curves import ContextCurve
    from engine.decoding.passcurve import PassCurve, curve_key

    curves = []
    for batch in dict.fromkeys(r["batch"] for r in rows):
        mine = sorted((r["tokens_per_pass"], r["ms"]) for r in rows if r["batch"] == batch)
        if len(mine) > 1:
            tokens, ms = zip(*mine)
            curves.append(ContextCurve(batch, PassCurve(tokens, ms, rows[0]["context"], curve_key(pair), "")))
    return curves


def _rooms(pair, args, curves: list) -> dict:
    """Print and return each curve's room and knee and, with --drafter, goodput's (batch, context) -> k table."""
    rooms = [c.summary() for c in curves]
    print("\nroom (within 1.25x one token per row) and knee (1.5x), per (batch, context); engine/room.py")
    print("batch  context  1 tok/row ms  room tok/pass  per row  knee tok/pass  per row")
    for r in rooms:
        knee = f"{r['knee']:>13.1f}  {r['knee_per_row']:>7.2f}" if r["knee"] is not None else f"{'past curve':>13}  {'-':>7}"
        print(f"{r['batch']:>5} {r['context']:>8} {r['one_token_ms']:>13.1f} {r['room']:>14} {r['room_per_row']:>8.2f} {knee}")
    out = {"rooms": rooms}
    if args.drafter is not None and args.model == "target":
        from engine import DecodeConfig
        from engine.decoding.context_table import k_table

        cfg = DecodeConfig(mode="speculative", drafter=args.drafter, depth=args.depth, policy="goodput", backend=args.backend)
        table = k_table(pair, cfg, curves)
        print(f"\ngoodput's (batch, context) -> k, {args.drafter} at most {args.depth}: its prior's k, and the k these passes price best")
        print("(the drafter's card as acceptance; vLLM RFC #48627's entries [min_batch, max_batch, min_ctx, max_ctx, k])")
        print("batch  context  k prior  k measured  entry")
        for r in table:
            print(f"{r['batch']:>5} {r['context']:>8} {r['k_prior']:>8} {r['k_measured']:>11}  {r['entry']}")
        out["k_table"] = table
    return out
