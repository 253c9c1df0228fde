"""Achieved utilisation (engine/trace/achieved.py): modelled work ÷ measured time as % of the probed peaks, and
labels that say which numbers are modelled and which are time-sampled."""

from __future__ import annotations

import pytest

from engine.trace.achieved import achieved_pct, gauge_labels, pass_achieved, timer_name, utilization_summary
from engine.trace.records import Step


def step(**kw) -> Step:
    base = dict(
        index=1,
        kind="decode",
        depth=3,
        batch=1,
        tokens_per_pass=4,
        t_start_s=0.0,
        t_end_s=0.012,
        draft_ms=2.0,
        verify_ms=8.0,
        overhead_ms=2.0,
        target_flops=1e9,
        draft_flops=1e8,
        target_bytes=3e8,
        draft_bytes=5e7,
        flops_wasted=0.0,
    )
    return Step(**(base | kw))


def test_achieved_pct_is_work_over_time_over_peak():
    assert achieved_pct(4e8, 10.0, 4e10) == pytest.approx(100.0)  # 4e8 B in 10 ms = 4e10 B/s = the peak
    assert achieved_pct(1e9, 1000.0, 1e11) == pytest.approx(1.0)
    assert achieved_pct(1.0, 0.0, 1.0) is None and achieved_pct(1.0, 1.0, 0.0) is None


def test_pass_achieved_per_pass_and_together():
    s = step()
    row = pass_achieved(s, peak_bandwidth=1e11, peak_flops=1e13)
    assert row["verify_bw_pct"] == pytest.approx(100 * 3e8 / 0.008 / 1e11)  # target bytes / verify time
    assert row["verify_flops_pct"] == pytest.approx(100 * 1e9 / 0.008 / 1e13)
    assert row["draft_bw_pct"] == pytest.approx(100 * 5e7 / 0.002 / 1e11)
    assert row["passes_bw_pct"] == pytest.approx(100 * 3.5e8 / 0.010 / 1e11)  # both over draft + verify time
    assert row["passes_flops_pct"] == pytest.approx(100 * 1.1e9 / 0.010 / 1e13)
    plain = pass_achieved(step(draft_ms=0.0, draft_flops=0.0, draft_bytes=0.0), 1e11, 1e13)
    assert plain["draft_bw_pct"] is None and plain["passes_bw_pct"] == plain["verify_bw_pct"]


def test_labels_say_what_is_modelled_and_what_is_sampled():
    assert timer_name("cuda") == "CUDA-event time" and timer_name("cpu") == "perf_counter time"
    nvml = gauge_labels("nvml")
    assert set(nvml) == {"util_pct", "sm_clock_mhz", "power_w"} and all("time-sampled" in v for v in nvml.values())
    assert "psutil" in gauge_labels("psutil")["util_pct"]


def test_summary_reads_busy_beside_flops():
    """A memory-bound decode on a GPU: NVML busy ~100% while FLOP/s are a few % of peak; the line says both,
    each labelled, from the steps' own numbers."""
    steps = [step(index=0, kind="prefill")] + [step(index=i, util_pct=100.0, sm_clock_mhz=1980.0, power_w=310.0) for i in range(1, 4)]
    line = utilization_summary(steps, peak_bandwidth=4e11, peak_flops=5e12, device="cuda", util_source="nvml")
    assert line.startswith("NVML busy 100% (time-sampled)")
    assert "bandwidth 9%, FLOP/s 2.2% of the probed peaks (modelled ÷ CUDA-event time, median step)" in line
    assert line.endswith("SM clock 1980 MHz, power 310 W (time-sampled)")
    cpu = utilization_summary(steps[:2], 4e11, 5e12, "cpu", "psutil")
    assert "perf_counter time" in cpu and "SM clock" in cpu  # the fixture's step carries them; a CPU run has None
    assert utilization_summary(steps[:1], 1.0, 1.0, "cpu", None) == "no decode steps to summarise"
