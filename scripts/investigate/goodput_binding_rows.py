"""Goodput priced by the rows a batch waits for, against goodput priced by the batch's mean acceptance, on Spec-Bench
cells: plain decoding, goodput as shipped and goodput with its binding factor held at 1 (the mean), interleaved in one
process (the two goodput lanes alternate their order each round), each task's first `batch` prompts of the
`--per-task` stratified set, 32 new tokens. Prints each lane's decode-only speed ÷ plain's (median and range over the
rounds), its decode steps and how many drafted (medians); with `--rows`, each row's accepted / drafted single drafts.

    python scripts/investigate/goodput_binding_rows.py --rounds 5 translation:4 rag:4 math_reasoning:4 mt_bench:16
"""

from __future__ import annotations

import argparse
import statistics

from engine import DecodeConfig, generate, load_pair
from engine.bench.prompt_files import SPEC_BENCH, read_prompts, select
from engine.bench.tasks import contender, rows_of
from engine.decoding import binding_rows
from engine.trace.rates import ranking_rate

LANES = ("plain", "binding rows", "mean")


def per_row(pair, rows: list[str]) -> str:
    """Each row's accepted / drafted drafts in a chain-of-1 EAGLE run, and the decode steps of the run."""
    trace = generate(pair, rows, DecodeConfig(drafter="eagle", depth=1, max_new_tokens=32))
    steps = [s for s in trace.steps if s.kind == "decode"]
    counts: dict[int, list[int]] = {}
    for step in steps:
        for row in step.seqs:
            if row.drafted:
                c = counts.setdefault(row.seq, [0, 0])
                c[0], c[1] = c[0] + row.num_accepted, c[1] + len(row.drafted)
    return f"chain of 1: {len(steps)} steps; rows " + ", ".join(f"{a}/{d}" for _, (a, d) in sorted(counts.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+", help="task:batch, e.g. translation:4")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-task", type=int, default=10)
    parser.add_argument("--rows", action="store_true", help="also each row's acceptance of single drafts")
    args = parser.parse_args()
    pair = load_pair()
    prompts = select(read_prompts(SPEC_BENCH), per_task=args.per_task)
    plain = DecodeConfig(mode="autoregressive", max_new_tokens=32)
    goodput = DecodeConfig(max_new_tokens=32, **contender("goodput").spec)
    shipped = binding_rows.RowAcceptance.factor
    print(f"{pair.dtype_name}, {args.rounds} rounds, 32 new tokens; speed ÷ plain, median [range]; steps / drafting steps")
    for cell in args.cells:
        task, batch = cell.split(":")
        rows = rows_of([p for p in prompts if p.task == task], int(batch))
        for cfg in (plain, goodput):
            generate(pair, rows[:1], DecodeConfig.from_dict(cfg.to_dict() | {"max_new_tokens": 4}))  # warm-up
        runs: dict[str, list[tuple[float, int, int]]] = {lane: [] for lane in LANES}
        for r in range(args.rounds):
            for lane in LANES[:1] + (LANES[1:] if r % 2 == 0 else LANES[:0:-1]):
                binding_rows.RowAcceptance.factor = shipped if lane != "mean" else (lambda self, *_: 1.0)
                trace = generate(pair, rows, plain if lane == "plain" else goodput)
                steps = [s for s in trace.steps if s.kind == "decode"]
                drafted = sum(1 for s in steps if s.depth or s.tree_nodes is not None)
                runs[lane].append((ranking_rate(trace.summary), len(steps), drafted))
        binding_rows.RowAcceptance.factor = shipped
        base = [run[0] for run in runs["plain"]]
        cells = []
        for lane in LANES[1:]:
            ratios = [run[0] / b for run, b in zip(runs[lane], base)]
            steps = statistics.median(run[1] for run in runs[lane])
            drafted = statistics.median(run[2] for run in runs[lane])
            cells.append(f"{lane} {statistics.median(ratios):.2f}× [{min(ratios):.2f}-{max(ratios):.2f}] {steps:g}/{drafted:g}")
        print(f"{task:<15} batch {batch:>2}: " + " | ".join(cells) + f" | plain {runs['plain'][0][1]} steps", flush=True)
        if args.rows:
            print(f"{'':<24}{per_row(pair, rows)}", flush=True)


if __name__ == "__main__":
    main()
