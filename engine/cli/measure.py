"""The measuring commands: `probe` (this machine's peaks) and `passes` (one forward's time against tokens per pass)."""

from __future__ import annotations

from engine.cli.files import write_json


def probe(args) -> None:
    from engine.hardware import probe as measure_peaks

    result = measure_peaks(args.device, args.dtype)
    print(f"device        {result.device_name} ({result.device}), dtype {result.dtype}")
    print(f"bandwidth     {result.peak_bandwidth / 1e9:8.1f} GB/s (copy, measured)")
    print(f"matmul        {result.peak_flops / 1e9:8.1f} GFLOP/s (measured)")
    print(f"ridge point   {result.ridge_point:8.1f} FLOP/byte: above it a pass is compute-bound")


def passes(args) -> None:
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
        write_json(args.json, {"probe": peaks.to_dict(), "rows": rows, "compare_backends": modes})
