"""Record every lesson's experiment, and one speculative step for the step-through (assets/lessons/).

Teacher mode on the Lessons page shows these recordings at once, so a class on slow laptops or a cold
Space does not wait; "Re-measure live" beside them runs the same experiment on the machine serving
the page. Each recording is a real run of the lesson's own experiment (its record, app/lessons/lNN_*.py) at
its default settings, with the embedded pair and dtype "auto", saved as checked measurement JSON
(app/common/measurement.py) and labelled with the machine (the probe's device name), the dtype, the date and
the machine's load average while it ran (other work on a shared machine slows every timing). A recording made
beside other work (load average above the core count, or other processes keeping more than half a core busy
during a run: measurement.disturbed) gets a note that starts "DISTURBED", which the page shows as a warning.
Every contender runs several times, interleaved, and the recording keeps each run (the spread).
The step-through trace is a real batch-1 greedy EAGLE run, saved with Trace.to_json and read back with
the strict loader. Lessons 1-3 choose their settings from this machine's pass curve (app/lessons/kit/runs.py);
--refresh-curve measures it again first. Rerun to refresh (several minutes on a 2-core CPU):

    python scripts/record/record_lessons.py [--only memory_bound,more_flops] [--refresh-curve] [--note "shared, noisy machine"]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time
from pathlib import Path

from app.common import measurement
from app.lessons import registry
from app.lessons.kit.numbers import room_tokens
from app.lessons.kit.runs import knee_tokens, machine_curve, remember_room
from app.lessons.registry import EXPERIMENTS
from engine import DecodeConfig, Trace, generate, load_pair
from engine.bench.prompts import batch_prompts
from engine.decoding.passcurve import pass_curve
from engine.drafters import available_drafters
from engine.hardware import probe

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "assets" / "lessons"
STEP_TRACE = "step-through.json"
STEP_TREE_TRACE = "step-through-tree.json"


def record_step_through(pair, peaks: dict, date: str, tree: bool = False) -> Path:
    """A short batch-1 greedy run with the EAGLE head (or the draft model) at depth 4: every stage of a step
    has something to show (the page picks the first step with a rejection). tree: drafting a tree of 24
    nodes, top-6 (the batch-1 winner on the AMX Xeon, docs/measurements.md), into STEP_TREE_TRACE."""
    drafter = "eagle" if "eagle" in available_drafters(pair) else "model"
    shape = {"tree_nodes": 24, "tree_topk": 6} if tree else {}
    cfg = DecodeConfig(depth=4, drafter=drafter, max_new_tokens=16, seed=0, **shape)
    trace = generate(pair, batch_prompts("heldout", 1), cfg)
    trace.meta["probe"] = peaks
    trace.meta["recorded_at"] = date
    path = OUT / (STEP_TREE_TRACE if tree else STEP_TRACE)
    trace.to_json(path)
    Trace.from_json(path)  # the page's loader must accept it
    return path


CURVE_TRIES = 4


def steady_curve(pair):
    """This machine's pass curve measured again (it is cached for the app and the lessons that choose their settings
    from it) until two measurements in a row agree on the room (app/lessons/kit/numbers.py), at most CURVE_TRIES times: a
    room that moves between two measurements was set by noise, not by the machine."""
    rooms = []
    for _ in range(CURVE_TRIES):
        curve = pass_curve(pair, refresh=True)
        rooms.append(room_tokens(curve.tokens, curve.ms))
        print(f"pass curve: 1 token {curve.ms[0]:.2f} ms, room {rooms[-1]} tokens", flush=True)
        if len(rooms) > 1 and rooms[-1] == rooms[-2]:
            break
    return curve


def shipped_room(pair, machine: str) -> int | None:
    """Where lesson 1's shipped recording was made on this machine, its rows become the curve and room the lessons
    recorded next choose from (as they do when lesson 1 runs first in one process): the room it read, else None."""
    try:
        record = registry.load_record(OUT / "memory_bound.json")
    except (OSError, measurement.MeasurementError):
        return None
    if record["machine"] != machine:
        return None
    rows = sorted(record["measurement"]["rows"], key=lambda r: r["tokens_per_pass"])
    tokens, times = [r["tokens_per_pass"] for r in rows], [r["ms"] for r in rows]
    label = f"lesson 1's recorded rows ({record['date']})"
    curve = {"tokens": tokens, "ms": times, "knee_tokens": knee_tokens(tokens, times), "key": label, "measured_at": record["date"]}
    remember_room(pair, curve, room_tokens(tokens, times))
    return room_tokens(tokens, times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma list of experiment names (default: all)")
    parser.add_argument("--note", default="a shared 2-core machine", help="said beside the machine's name wherever the recording is shown")
    parser.add_argument("--skip-step", action="store_true", help="do not re-record the step-through trace")
    parser.add_argument(
        "--refresh-curve",
        action="store_true",
        help="measure this machine's pass curve again first (lessons 1-3 choose their settings from it: do it on a quiet machine)",
    )
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or [n for n in EXPERIMENTS if n != "one_step"]  # lesson 0 ships the step trace
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiment(s) {', '.join(unknown)}; choose from {', '.join(EXPERIMENTS)}")
    OUT.mkdir(parents=True, exist_ok=True)
    pair = load_pair()
    hw = probe(pair.device, pair.dtype, quick=True)
    curve = steady_curve(pair) if args.refresh_curve else pass_curve(pair)  # as the app's warm-up has it (app/common/resources.py)
    print(f"pass curve measured {curve.measured_at}: 1 token {curve.ms[0]:.2f} ms, room {room_tokens(curve.tokens, curve.ms)}", flush=True)
    small, room = machine_curve(pair, refresh=True)  # lessons 1-3's room, shared by the three recordings
    print(f"lessons 1-3: room {room} tokens ({small['key']})", flush=True)
    if "memory_bound" not in names:  # keep every lesson on the room the shipped lesson 1 recorded on this machine
        shipped = shipped_room(pair, hw.device_name)
        print(f"lesson 1's recorded room: {shipped} tokens" if shipped else "no lesson 1 recording from this machine", flush=True)
    date = dt.date.today().isoformat()
    print(f"{hw.device_name}, {hw.dtype}, {date}", flush=True)
    for name in names:
        experiment = EXPERIMENTS[name]
        settings = experiment.defaults()
        t0, load0 = time.perf_counter(), os.getloadavg()[0]
        result = experiment.run(pair, hw, settings)
        seconds = time.perf_counter() - t0
        note = f"{args.note}; load average {load0:.1f} to {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {seconds:.0f} s"
        record = registry.make_record(name, result, machine=hw.device_name, dtype=hw.dtype, note=note, settings=settings, date=date)
        if measurement.disturbed(record):
            record["note"] = f"{measurement.DISTURBED}; {note}"
        path = OUT / f"{name}.json"
        registry.save_record(record, path)
        registry.load_record(path)  # the page's loader must accept it
        print(f"{path.name}: {path.stat().st_size} bytes, {time.perf_counter() - t0:.0f} s", flush=True)
    if not args.skip_step:
        for tree in (False, True):
            path = record_step_through(pair, hw.to_dict(), date, tree=tree)
            print(f"{path.name}: {path.stat().st_size} bytes", flush=True)


if __name__ == "__main__":
    main()
