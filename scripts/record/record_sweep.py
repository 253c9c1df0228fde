"""Record the Sweep page's default view: one target pass against tokens per pass, and the AR-vs-speculative grid.

The Sweep page shows this recording at once (labelled with its machine and date), so the page is never empty;
its Measure buttons run the same measurements live on the machine serving it. The grid is the page's default
(batch 1, 4, 16 × depth 2, 4, 8; the EAGLE head where the pair has one; 24 new tokens), measured with
engine.bench.harness.bench, every cell's two lanes interleaved, `--repeats` runs each (median). The note records the
machine's load average while it ran (other work on a shared machine slows every timing). Several minutes on a
2-core CPU:

    python scripts/record/record_sweep.py [--repeats 2] [--note "shared machine"]

Or convert a grid already recorded with `python -m engine bench --json PATH` (no pass curve then), naming the
machine and date it was measured on (a bench file from before decoding was timed apart from the prompt's pass, such
as the 2026-12-01 files in docs/measurements/, has no decode rates and is refused):

    python -m engine bench --batch 1,4,16 --depth 0,2,4 --drafter eagle --repeats 3 --json bench.json
    python scripts/record/record_sweep.py --from-bench bench.json \
        --machine "Intel Xeon @ 2.60 GHz, 2 cores" --date 2026-12-06 --drafter "EAGLE head" --note "quiet machine"
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
from pathlib import Path

from app.common.measurement import PASS_ROW
from app.views.sweep import GRID_KEYS, GRID_ROW, SWEEP_SCHEMA, load_grid_recording
from engine import load_pair
from engine.bench.harness import bench
from engine.costs import ridge_tokens
from engine.decoding.passcurve import pass_costs
from engine.drafters import drafter_name
from engine.hardware import probe

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "assets" / "sweep" / "grid.json"
PASS_TOKENS = [1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64]  # the page's default: batch 1 and 8, up to 64 per row
BATCHES, DEPTHS, TOKENS = [1, 4, 16], [2, 4, 8], 24


PASS_KEYS = tuple(PASS_ROW)  # the pass rows lesson 1 records, by the same schema
OPTIONAL = {k.rstrip("?") for k in GRID_ROW if k.endswith("?")}  # left out of a row where the bench has no value


def _rounded(value):
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return float(f"{value:.6g}") if isinstance(value, float) else value


def grid_row(row: dict) -> dict:
    """A bench row with the fields the page reads (a tree's fields 0 and load fields null where the bench predates them)."""
    out = {k: _rounded(row.get(k)) for k in GRID_KEYS if not (k in OPTIONAL and row.get(k) is None)}
    return out | {k: out[k] or 0 for k in ("tree_nodes", "tree_topk")} | {"policy": out["policy"] or "fixed"}


def write(record: dict) -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp = OUT.with_name(f".{OUT.name}.tmp")
    tmp.write_text(json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n", encoding="utf-8")
    os.replace(tmp, OUT)
    data, problem = load_grid_recording(OUT)  # the page's loader must accept it
    if data is None:
        raise SystemExit(f"the recording does not load: {problem}")
    print(f"{OUT.name}: {OUT.stat().st_size} bytes, {record['note']}", flush=True)


def from_bench(path: Path, machine: str, date: str, note: str, drafter: str = "") -> None:
    """The page's recording from an `engine bench --json` file (its grid only: a bench records no pass curve)."""
    bench_json = json.loads(path.read_text())
    write(
        {
            "schema": SWEEP_SCHEMA,
            "machine": machine,
            "dtype": bench_json["dtype"],
            "date": date,
            "note": note,
            "source": f"{path.as_posix()}, engine bench",
            "drafter": drafter or bench_json["drafter"].split(" (")[0],
            "max_new_tokens": bench_json["max_new_tokens"],
            "repeats": bench_json["repeats"],
            "peak_bandwidth": None,
            "peak_flops": None,
            "ridge_tokens": None,
            "pass_rows": [],
            "grid_rows": [grid_row(r) for r in bench_json["rows"]],
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="interleaved runs per grid cell (median)")
    parser.add_argument("--note", default="a shared 2-core machine", help="said beside the machine's name")
    parser.add_argument("--from-bench", type=Path, help="convert this `engine bench --json` file instead of measuring")
    parser.add_argument("--machine", default="", help="with --from-bench: the machine it was measured on")
    parser.add_argument("--date", default="", help="with --from-bench: the date it was measured (YYYY-MM-DD)")
    parser.add_argument("--drafter", default="", help="with --from-bench: the drafter's name as the page says it")
    args = parser.parse_args()
    if args.from_bench:
        if not args.machine or not args.date:
            parser.error("--from-bench needs --machine and --date (a recording is labelled with both)")
        from_bench(args.from_bench, args.machine, args.date, args.note, args.drafter)
        return
    pair = load_pair()
    hw = probe(pair.device, pair.dtype, quick=True)
    drafter = "eagle" if drafter_name(pair, "eagle") else "model"
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    passes = pass_costs(pair, [1, 8], PASS_TOKENS, context=150, repeats=5)
    grid = bench(pair, BATCHES, DEPTHS, drafter=drafter, max_new_tokens=TOKENS, repeats=args.repeats)
    load1 = os.getloadavg()[0]
    record = {
        "schema": SWEEP_SCHEMA,
        "machine": hw.device_name,
        "dtype": hw.dtype,
        "date": dt.date.today().isoformat(),
        "note": f"{args.note}; load average {load0:.1f} to {load1:.1f} on {os.cpu_count()} cores",
        "source": "scripts/record/record_sweep.py",
        "drafter": drafter,
        "max_new_tokens": TOKENS,
        "repeats": args.repeats,
        "peak_bandwidth": hw.peak_bandwidth,
        "peak_flops": hw.peak_flops,
        "ridge_tokens": ridge_tokens(pair.target_costs, hw.peak_flops, hw.peak_bandwidth),
        "pass_rows": [{k: _rounded(float(r[k])) for k in PASS_KEYS} for r in passes],
        "grid_rows": [grid_row(r) for r in grid["rows"]],
    }
    write(record | {"note": record["note"] + f"; {time.perf_counter() - t0:.0f} s"})


if __name__ == "__main__":
    main()
