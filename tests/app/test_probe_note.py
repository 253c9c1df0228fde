"""Lesson 1's pass against the probe (app/lessons/l1_memory_bound.py, `pass_against_probe`), and the probe itself (engine.hardware.probe): a
pass above the probed bandwidth is explained with its numbers, a live probe far below the recording's is named a
disturbed machine, and the probe reports the higher of a copy and a read."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from app.lessons import registry
from app.lessons.kit import numbers
from app.lessons.l1_memory_bound import live_probe_note, pass_against_probe
from engine.hardware import probe

ROOT = Path(__file__).resolve().parents[2]
RECORD = registry.load_record(ROOT / "assets/lessons/memory_bound.json")


def test_the_share_is_the_passs_counted_bytes_over_the_probe():
    m = RECORD["measurement"]
    one = m["rows"][0]
    text = pass_against_probe(m)
    assert f"{one['achieved_bandwidth'] / 1e9:.1f} GB/s" in text and f"{one['achieved_bandwidth'] / m['peak_bandwidth']:.0%}" in text


def test_a_pass_above_the_probe_is_explained_from_its_numbers():
    m = dict(RECORD["measurement"], peak_bandwidth=RECORD["measurement"]["rows"][0]["achieved_bandwidth"] / 1.18)
    text = pass_against_probe(m)
    assert "118%" in text and "1.18× the probe" in text and "inside that gap" in text and "copy" in text and "read" in text
    far = dict(m, peak_bandwidth=m["rows"][0]["achieved_bandwidth"] / 1.6)
    assert "beyond that gap" in pass_against_probe(far)
    assert pass_against_probe({"rows": []}) == ""


def test_a_live_probe_far_below_the_recordings_is_a_disturbed_machine():
    rec = RECORD["measurement"]
    live_label = f"measured live on {RECORD['machine']}, bfloat16, 2026-12-03"
    slow = dict(rec, peak_bandwidth=rec["peak_bandwidth"] * 0.63, peak_flops=rec["peak_flops"] * 0.9)
    note = live_probe_note(slow, live_label, RECORD)
    assert note.startswith("DISTURBED") and f"{slow['peak_bandwidth'] / 1e9:.1f} GB/s" in note and RECORD["machine"] in note
    assert live_probe_note(rec, live_label, RECORD) is None  # as fast as the recording
    assert live_probe_note(slow, "measured live on another CPU, bfloat16, 2026-12-03", RECORD) is None
    assert live_probe_note(slow, "recorded on " + RECORD["machine"], RECORD) is None  # not a live run


def test_the_probe_reports_the_higher_of_a_copy_and_a_read():
    p = probe("cpu", "auto", quick=True)
    assert p.copy_bandwidth > 0 and p.read_bandwidth > 0
    assert p.peak_bandwidth == pytest.approx(max(p.copy_bandwidth, p.read_bandwidth))
    assert {"copy_bandwidth", "read_bandwidth", "peak_bandwidth"} <= set(p.to_dict())


@pytest.mark.parametrize("name", ["turn_it_off", "by_load", "width", "past_the_ridge"])
def test_a_live_run_whose_rounds_scatter_is_labelled_busy_and_a_quiet_one_is_not(name):
    """A live lesson on a busy machine says so (issue 40, item 10): a quiet recording is not flagged; the same
    recording with one contender's rounds scattered (a burst of other work in all its rounds but one) is."""

    m = registry.load_record(ROOT / f"assets/lessons/{name}.json")["measurement"]
    assert numbers.unsteady_spreads(m)[0] == 0 and numbers.disturbed_live(m, None) is None
    busy = copy.deepcopy(m)
    spread = numbers._spreads(busy)[0]
    mid = spread["median"]
    n, k = len(spread["values"]), len(spread["values"]) // 2
    spread["values"] = [mid / 2] * k + [mid] + [mid * 2] * (n - k - 1)  # all rounds but the median one 2x from it
    bad, judged = numbers.unsteady_spreads(busy)
    assert bad == 1 and judged == numbers.unsteady_spreads(m)[1]
    assert (
        numbers.disturbed_live(busy, None)
        == f"in 1 of {judged} rates measured in rounds, half the rounds or more were 1.5× or more from the others"
    )


def test_a_slow_probe_is_a_disturbed_machine_only_beside_a_recording_of_the_same_machine():
    """disturbed_live given the whole recording: a live probe far below it flags the run on the recording's own kind of
    machine, and not on another machine (a slower machine is not a disturbed one); lesson 1's metered load flags
    it on any machine."""

    rec = RECORD["measurement"]
    slow = dict(rec, peak_bandwidth=rec["peak_bandwidth"] / 2)
    why = numbers.disturbed_live(slow, RECORD, RECORD["machine"])
    assert (
        why == f"its probe measured {slow['peak_bandwidth'] / 1e9:.0f} GB/s against the recording's {rec['peak_bandwidth'] / 1e9:.0f} GB/s"
    )
    assert numbers.disturbed_live(slow, RECORD, "a CPU the recording was not made on") is None
    assert numbers.disturbed_live(dict(slow, other_cores=0.2), RECORD, "another CPU") is None  # under BUSY_CORES
    busy = dict(slow, other_cores=1.6)
    assert numbers.disturbed_live(busy, RECORD, "another CPU") == "other processes kept 1.60 cores busy during a run"
