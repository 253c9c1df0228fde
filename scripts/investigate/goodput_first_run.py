"""goodput as a new user meets it (issue 42): every run its own process, `python -m engine run`, held-out prompts.

Lanes per batch: plain, fixed chains of 2 and 4, goodput (chains, depth <= 8) started cold (no stored state: only
this machine's pass-cost curve and the drafter's card) and goodput started warm (the state earlier goodput runs
of this script left on disk, after one untimed batch-1 run on the last held-out prompt). Rounds interleave the
lanes; round r takes held-out prompts r*B .. r*B+B-1. Each run is its own process under the shared lock. Per
run: whole-run tokens/s (the trace summary's) and decode-alone tokens/s (the prefill step left out: the tokens
emitted by decode steps over the time from the prefill's end to the last step's end). Prints every run, then
medians and ratios to plain and to the best of plain, k=2, k=4, over the runs no other process disturbed (the
trace's other_cpu_s over its wall time at most --max-other cores; the others are printed, and counted).

    .venv/bin/python scripts/investigate/goodput_first_run.py --rounds 5 --batches 1,16,32 --out /tmp/first_run.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from engine.formats import cache_dir

ROOT = Path(__file__).resolve().parents[2]
LANES = {
    "plain": ["--mode", "autoregressive"],
    "k2": ["--drafter", "eagle", "--depth", "2"],
    "k4": ["--drafter", "eagle", "--depth", "4"],
    "goodput_cold": ["--drafter", "eagle", "--depth", "8", "--policy", "goodput"],
    "goodput_warm": ["--drafter", "eagle", "--depth", "8", "--policy", "goodput"],
    # --lanes trees: the best fixed tree on this CPU (8 nodes, top-4, depth 4) and goodput with trees allowed
    "tree8": ["--drafter", "eagle", "--depth", "4", "--tree-nodes", "8", "--tree-topk", "4"],
    "gp_tree_cold": ["--drafter", "eagle", "--depth", "6", "--tree-nodes", "32", "--tree-topk", "4", "--policy", "goodput"],
    "gp_tree_warm": ["--drafter", "eagle", "--depth", "6", "--tree-nodes", "32", "--tree-topk", "4", "--policy", "goodput"],
}
LANE_SETS = {
    "chains": ("plain", "k2", "k4", "goodput_cold", "goodput_warm"),
    "trees": ("plain", "k2", "k4", "tree8", "gp_tree_cold", "gp_tree_warm"),
    "plain": ("plain", "goodput_cold", "goodput_warm"),  # where plain is best by far (batch 16, 32): the policy against it
}


def rates(trace: dict) -> tuple[float, float, dict]:
    """(whole-run tokens/s, decode-alone tokens/s, shapes chosen) of one trace."""
    steps = trace["steps"]
    prefill = [s for s in steps if s["kind"] == "prefill"]
    decode = [s for s in steps if s["kind"] == "decode"]
    tokens = sum(len(q["emitted"]) for s in decode for q in s["seqs"])
    span = steps[-1]["t_end_s"] - prefill[-1]["t_end_s"]
    shapes = {}
    for s in decode:
        shapes[s["depth"]] = shapes.get(s["depth"], 0) + 1
    return trace["summary"]["tokens_per_s"], tokens / span, shapes


def run_one(lane: str, prompts: list[str], tokens: int, data: Path, python: str, lock: bool = True) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trace.json"
        cmd = (["flock", "/work/bench.lock"] if lock else []) + [python, "-m", "engine", "run", *LANES[lane]]
        cmd += ["--max-new-tokens", str(tokens)]
        cmd += [a for p in prompts for a in ("--prompt", p)] + ["--json", str(out)]
        env = os.environ | {"SPECLAB_DATA": str(data)}
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
        trace = json.loads(out.read_text())
    whole, decode, shapes = rates(trace)
    summary = trace["summary"]
    other = summary.get("other_cpu_s", 0.0) / max(trace["steps"][-1]["t_end_s"], 1e-9)  # other processes' cores, on average
    return {"whole": whole, "decode": decode, "shapes": shapes, "alpha": summary.get("alpha"), "other_cores": round(other, 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", default="1,16,32")
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--curves", default=str(cache_dir() / "pass_curves"), help="this machine's measured curves")
    ap.add_argument("--out", default="first_run.json")
    ap.add_argument("--lanes", choices=sorted(LANE_SETS), default="chains")
    ap.add_argument("--first-round", type=int, default=0, help="with --base: go on from an earlier invocation")
    ap.add_argument("--base", default=None, help="the cold and warm data folders (kept: later invocations go on)")
    ap.add_argument("--no-lock", action="store_true", help="the caller holds /work/bench.lock (e.g. one flock per round)")
    ap.add_argument(
        "--max-other",
        type=float,
        default=0.25,
        help="a run while other processes used more cores than this is disturbed: shown, left out of the medians",
    )
    args = ap.parse_args()
    prompts = json.loads((ROOT / "assets" / "heldout_prompts.json").read_text())["prompts"]
    batches = [int(b) for b in args.batches.split(",")]
    base = Path(args.base or tempfile.mkdtemp(prefix="first_run_"))
    dirs = {"cold": base / "cold", "warm": base / "warm"}
    lanes, lock = LANE_SETS[args.lanes], not args.no_lock
    if not (dirs["warm"] / "pass_curves").exists():
        for d in dirs.values():
            shutil.copytree(args.curves, d / "pass_curves")
        for lane in (x for x in lanes if x.endswith("_warm")):  # untimed: leaves a state
            warm = run_one(lane, [prompts[-1]], args.tokens, dirs["warm"], sys.executable, lock)
            print("warm-up", json.dumps(warm), flush=True)
    results: list[dict] = []
    for r in range(args.first_round, args.first_round + args.rounds):
        for batch in batches:
            chosen = [prompts[(r * batch + i) % len(prompts)] for i in range(batch)]
            for lane in lanes:
                data = dirs["warm"] if lane.endswith("_warm") else dirs["cold"]
                shutil.rmtree(dirs["cold"] / "goodput", ignore_errors=True)  # cold: nothing stored, ever
                row = {"round": r, "batch": batch, "lane": lane} | run_one(lane, chosen, args.tokens, data, sys.executable, lock)
                results.append(row)
                print(json.dumps(row), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    quiet = [x for x in results if x["other_cores"] <= args.max_other]
    print(f"{len(results) - len(quiet)} of {len(results)} runs disturbed (other processes > {args.max_other} cores): left out")
    for batch in batches:
        kept = {lane: [x for x in quiet if x["batch"] == batch and x["lane"] == lane] for lane in lanes}
        if not all(kept.values()):
            print(f"batch {batch:2d}: a lane has no quiet run; no medians")
            continue
        med = {lane: {m: statistics.median(x[m] for x in kept[lane]) for m in ("whole", "decode")} for lane in lanes}
        fixed = [lane for lane in lanes if "goodput" not in lane and "gp_" not in lane]
        for m in ("decode", "whole"):
            best = max(med[lane][m] for lane in fixed)
            cells = " ".join(f"{lane} {med[lane][m]:.1f} ({med[lane][m] / med['plain'][m]:.2f}x)" for lane in lanes)
            adaptive = ", ".join(f"{lane} {med[lane][m] / best:.2f}" for lane in lanes if lane not in fixed)
            print(f"batch {batch:2d} {m:6s} tok/s: {cells} | over the best of {', '.join(fixed)}: {adaptive}")
            print(f"   paired by round, over the best fixed lane ({paired(quiet, batch, fixed, lanes, m)})")


def paired(quiet: list[dict], batch: int, fixed: list[str], lanes, m: str) -> str:
    """Each adaptive lane over the best fixed lane (by median), round by round: median (min-max) of the rounds where both
    ran quiet. A process's own speed drifts +-15% on this machine; the same prompts in one round pair the two runs."""
    runs = {(x["round"], x["lane"]): x[m] for x in quiet if x["batch"] == batch}
    best = max(fixed, key=lambda lane: statistics.median(v for (r, la), v in runs.items() if la == lane))
    cells = []
    for lane in (la for la in lanes if la not in fixed):
        ratios = sorted(v / runs[(r, best)] for (r, la), v in runs.items() if la == lane and (r, best) in runs)
        if ratios:
            cells.append(f"{lane} {statistics.median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f}, {len(ratios)} rounds)")
    return f"{best}: " + ", ".join(cells)


if __name__ == "__main__":
    main()
