"""The contention check between two lanes (app/views/fairness.py), both ways, and the load fields the
engine records (engine/loadmeter.py) as the trace loader accepts them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from app.views import fairness
from engine import Trace, TraceError
from engine.loadmeter import LoadMeter

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = json.loads((ROOT / "assets" / "traces" / "ngram-copy-spec.json").read_text(encoding="utf-8"))


def _summary(wall_s, other_cpu_s, cpu_s=1.0, cpus=2, load_avg=1.0):
    return {"wall_s": wall_s, "other_cpu_s": other_cpu_s, "cpu_s": cpu_s, "cpus": cpus, "load_avg": load_avg}


def test_different_contention_is_flagged():
    note = fairness.contention_note(_summary(2.0, 0.1), _summary(2.0, 1.6))  # 0.05 vs 0.8 cores of other work
    assert note and fairness.RERUN in note and "0.1 cores of 2 busy during the AR lane and 0.8" in note


def test_same_quiet_load_is_not_flagged():
    assert fairness.contention_note(_summary(2.0, 0.1), _summary(1.0, 0.08)) is None


def test_both_lanes_busy_says_so_without_calling_the_ratio_unfair():
    note = fairness.contention_note(_summary(2.0, 2.0), _summary(1.0, 1.1))
    assert note and "Both lanes shared the machine" in note and fairness.RERUN not in note


def test_old_traces_and_hostile_values_give_no_note():
    assert fairness.contention_note({"wall_s": 1.0}, {"wall_s": 1.0}) is None
    for bad in (float("nan"), -1.0, "x", None, True):
        assert fairness.contention_note(_summary(1.0, bad), _summary(1.0, 0.9)) is None
    assert fairness.load_line({"wall_s": 1.0}, _summary(1.0, 0.1)) is None


def test_load_line_reports_both_lanes():
    line = fairness.load_line(_summary(2.0, 0.2, cpu_s=3.8), _summary(1.0, 0.1, cpu_s=1.9, load_avg=2.5))
    assert line == (
        "Load while decoding: AR 1.9 cores of this process, 0.1 of others (load average 1.0); "
        "speculative 1.9 cores of this process, 0.1 of others (load average 2.5)."
    )


def test_load_meter_counts_only_its_windows():
    meter = LoadMeter()
    meter.resume()
    end = time.process_time() + 0.05
    while time.process_time() < end:  # busy inside the window
        pass
    meter.pause()
    inside = meter.cpu_s
    end = time.process_time() + 0.05
    while time.process_time() < end:  # busy outside it: not counted
        pass
    fields = meter.fields()
    assert 0.04 <= inside == fields["cpu_s"] < 1.0
    assert fields["other_cpu_s"] is None or fields["other_cpu_s"] >= 0
    assert fields["cpus"] >= 1


def test_loader_accepts_the_load_fields_and_old_traces_without_them():
    data = json.loads(json.dumps(SAMPLE))
    for key in ("cpu_s", "other_cpu_s", "load_avg", "cpus", "threads"):  # a trace recorded before the fields existed
        data["summary"].pop(key, None)
    Trace.from_dict(data)  # still loads
    data["summary"].update(cpu_s=1.5, other_cpu_s=0.2, load_avg=3.1, cpus=2)
    assert Trace.from_dict(data).summary["other_cpu_s"] == 0.2
    data["summary"].update(other_cpu_s=None, load_avg=None, cpus=None)
    Trace.from_dict(data)
    for key, bad in (("cpu_s", -1.0), ("other_cpu_s", "x"), ("load_avg", True), ("cpus", 0), ("cpus", 1.5)):
        broken = json.loads(json.dumps(SAMPLE))
        broken["summary"][key] = bad
        with pytest.raises(TraceError, match=f"summary.{key}"):
            Trace.from_dict(broken)


def test_a_decoded_trace_records_the_load(tiny):
    from engine import DecodeConfig, generate

    trace = generate(tiny, ["Hi there"], DecodeConfig(mode="autoregressive", max_new_tokens=4))
    s = trace.summary
    assert s["cpu_s"] > 0 and s["cpus"] >= 1 and (s["other_cpu_s"] is None or s["other_cpu_s"] >= 0)
    Trace.from_json_bytes(json.dumps(trace.to_dict()).encode())  # and it loads back


# --- Sweep cells: each bench row carries its lanes' load -----------------------------------------------
def _spinner():
    """Another process keeping one core busy (a real competitor, as another session's decode would be)."""
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def test_a_sweep_cell_measured_beside_other_work_is_flagged(tiny):
    """engine.bench rows record each lane's other-process cores; a lane decoded while another process spun
    is marked in the Sweep table and the grid note names the cell."""
    from app.views.sweep import grid_table
    from engine import DecodeConfig
    from engine.bench.cells import run_cell
    from engine.bench.harness import _row

    prompts = ["hello there", "a b c d", "one two", "x y z"]
    ar = run_cell(tiny, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=64), 1, sequential=True)
    spin = _spinner()
    try:
        time.sleep(0.2)  # let it start spinning
        spec = run_cell(tiny, prompts, DecodeConfig(depth=2, drafter="model", max_new_tokens=64), 1, sequential=True)
    finally:
        spin.kill()
        spin.wait()
    row = _row(1, 2, 0.0, "model", ar, spec)
    assert row["spec_other_cores"] - row["ar_other_cores"] >= fairness.DIFFERENT_CORES, row
    assert row["load_avg"] is not None and row["load_avg"] >= 0
    reason = fairness.cell_contention(row)
    assert reason and "during speculative" in reason
    assert grid_table([row])[0]["load"].startswith("⚠ others kept")
    note = fairness.grid_contention_note([row, dict(row, ar_other_cores=0.1, spec_other_cores=0.1)])
    assert note.startswith("1 of 2 cells were " + fairness.RERUN) and "batch 1, depth 2" in note


def test_sweep_cells_alike_or_unrecorded_are_not_flagged():
    from app.views.sweep import grid_table

    alike = {"batch": 1, "depth": 2, "ar_other_cores": 0.2, "spec_other_cores": 0.3}
    old = {"batch": 1, "depth": 2}  # a grid measured before the load fields
    hostile = {"batch": 1, "depth": 2, "ar_other_cores": float("nan"), "spec_other_cores": 5.0}
    for row in (alike, old, hostile):
        assert fairness.cell_contention(row) is None
    assert fairness.grid_contention_note([alike, old, hostile]) is None
    base = {
        "tree_nodes": 0,
        "tree_topk": 0,
        "tokens_per_pass": 3,
        "ar_tokens_per_s": 10.0,
        "spec_tokens_per_s": 12.0,
        "speedup": 1.2,
        "alpha": 0.5,
        "flops_ratio": 1.3,
    }
    assert grid_table([alike | base])[0]["load"] == ""
