"""A live result beside its shipped recording (app/lessons/kit/against.py): the key numbers side by side, and a live
result that differs says so and why, from the numbers each run measured; and a live run beside another busy process
records the other load during its own timing and is flagged (app/lessons/kit/runs.py metered,
numbers.disturbed_live). The live test runs lesson 1 on the real embedded pair while a real busy loop runs beside it."""

from __future__ import annotations

import copy
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.common import measurement
from app.lessons import l1_memory_bound, registry
from app.lessons.kit import against, numbers
from app.lessons.l1_memory_bound import memory_bound
from app.lessons.registry import EXPERIMENTS

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("memory_bound", "more_flops", "past_the_ridge", "turn_it_off", "adaptive", "by_load", "width")


def _record(name: str) -> dict:
    return registry.load_record(ROOT / "assets" / "lessons" / f"{name}.json")


def _side(name: str, m: dict, s: dict, machine: str, date: str) -> against.Side:
    return against.side(EXPERIMENTS[name], m, s, machine, date, EXPERIMENTS[name].predict.measured(m, s))


def _sides(name: str, live_m: dict, machine: str | None = None):
    rec = _record(name)
    s = rec["settings"]
    recorded = _side(name, rec["measurement"], s, rec["machine"], rec["date"])
    return recorded, _side(name, live_m, s, machine or rec["machine"], "2026-12-05")


@pytest.mark.parametrize("name", NAMES)
def test_every_lesson_has_a_side_by_side_table_with_machine_and_date(name):
    rec = _record(name)
    recorded, live = _sides(name, copy.deepcopy(rec["measurement"]), machine="Intel Xeon (2 threads)")
    rows, lines, differs = against.compare(recorded, live, EXPERIMENTS[name].predict.unit)
    by = {r["number"]: r for r in rows}
    assert by["machine"] == {"number": "machine", "recorded": rec["machine"], "live": "Intel Xeon (2 threads)"}
    assert by["date"]["recorded"] == rec["date"] and by["date"]["live"] == "2026-12-05"
    answer = EXPERIMENTS[name].predict.measured(rec["measurement"], rec["settings"])
    assert by["the prediction's measured answer"]["recorded"] == f"{answer:.2f}{EXPERIMENTS[name].predict.unit}"
    assert by["room (tokens per pass)"]["live"] == str(rec["measurement"]["chosen"]["room"])
    assert "other processes' load (cores busy)" in by
    assert (name == "memory_bound") == ("verdict" not in by)  # lesson 1 times passes, not contenders
    # the same numbers on another machine: the answer has not moved, and the one difference is named
    assert not differs and f"within {against.MOVED - 1:.0%} of the recording's" in lines[0]
    assert any("this run on Intel Xeon (2 threads)" in line for line in lines)


def test_the_same_run_on_the_same_machine_names_no_difference():
    rec = _record("by_load")
    recorded, live = _sides("by_load", copy.deepcopy(rec["measurement"]))
    rows, lines, differs = against.compare(recorded, live)
    assert not differs and len(lines) == 1 and "The verdict is the same both times" in lines[0]
    assert all(r["recorded"] == r["live"] for r in rows if r["number"] != "date")


def test_a_live_lesson_1_that_differs_from_its_recording_says_so_and_why():
    """Lesson 1 as the issue saw it: a faster one-token pass, a smaller room, a busy machine: the answer moved, and
    each of those is named with its numbers."""
    rec = _record("memory_bound")
    live = copy.deepcopy(rec["measurement"])
    one = min(live["rows"], key=lambda r: r["tokens_per_pass"])
    then = one["ms"]
    for r in live["rows"]:  # every pass inside the old room now costs twice the one-token pass's new time
        r["ms"] = then / 2 if r is one else max(r["ms"], then)
        values = r["ms_runs"]["values"]  # its rounds alike: the rule reads the rounds
        r["ms_runs"] = measurement.spread([v * r["ms"] / statistics.median(values) for v in values])
    live["chosen"]["room"] = 2
    live["other_cores"] = 1.7
    live["peak_flops"] = rec["measurement"]["peak_flops"] / 3  # a CPU without the recording's matrix tiles
    recorded, lv = _sides("memory_bound", live)
    rows, lines, differs = against.compare(recorded, lv)
    text = "\n".join(lines)
    assert differs
    was, now = recorded.answer, lv.answer
    assert f"moved from {was:.2f}× recorded to {now:.2f}× live ({now / was:.2f}× the recording's)" in lines[0]
    assert "What differed between the two runs, as measured:" in text
    assert f"A 1-token pass took {then / 2:.1f} ms live against {then:.1f} ms recorded (0.50×)" in text
    assert "the lesson's ratios are taken over this pass, so its time moves them too" in text
    assert f"a room of 2 tokens per pass, the recording's {rec['measurement']['chosen']['room']}" in text
    assert "Other processes kept 1.70 cores busy during this run's timing" in text and "DISTURBED" in text
    gflops = rec["measurement"]["peak_flops"] / 1e9
    assert f"{gflops / 3:.0f} GFLOP/s of arithmetic now against {gflops:.0f} for the recording: less arithmetic" in text
    assert "fewer tokens (a smaller room)" in text
    then_busy = measurement.other_cores(rec["measurement"])  # lesson 1's metered rounds (None in a recording before them)
    assert f"the recording: {'not recorded' if then_busy is None else f'{then_busy:.2f}'}" in text
    by = {r["number"]: r for r in rows}
    assert by["a 1-token pass (ms)"] == {"number": "a 1-token pass (ms)", "recorded": f"{then:.2f}", "live": f"{then / 2:.2f}"}
    assert by["other processes' load (cores busy)"]["live"] == "1.70"


def test_a_changed_verdict_and_changed_settings_are_named():
    """Lesson 6's fixed depth at the largest batch: recorded slower than plain; live with its rates raised to level, by
    the one rule, and the depth chosen from another room."""
    rec = _record("by_load")
    live = copy.deepcopy(rec["measurement"])
    batch = max(r["batch"] for r in live["rows"])
    k = live["chosen"]["k"]
    fixed = next(r for r in live["rows"] if r["batch"] == batch and r["contender"] == f"fixed k = {k}")
    plain = next(r for r in live["rows"] if r["batch"] == batch and r["contender"] == "plain decoding")
    fixed["decode_tokens_per_s_runs"] = measurement.spread(list(plain["decode_tokens_per_s_runs"]["values"]))
    fixed["decode_tokens_per_s"] = plain["decode_tokens_per_s"]
    room, mid = live["chosen"]["room"], live["chosen"]["mid"]
    live["chosen"]["room"], live["chosen"]["mid"] = 2 * room, mid + 1  # another room, another middle batch
    recorded, lv = _sides("by_load", live)
    _, lines, differs = against.compare(recorded, lv)
    text = "\n".join(lines)
    assert differs and recorded.facts["verdict"][2].kind == "slower" and lv.facts["verdict"][2].kind == "level"
    assert f"The verdict changed: recorded, fixed k = {k} at batch {batch} was slower than plain decoding" in text
    assert "live, level with plain decoding: 1.00×" in text
    assert f"middle batch {mid + 1} live against {mid} recorded" in text
    assert f"a room of {2 * room} tokens per pass, the recording's {room}" in text


def test_rounds_that_scattered_more_live_are_named_and_steady_ones_are_not():
    """Lesson 6's fixed depth at the largest batch, its live rounds spread wide around the same rates: the page says
    the rounds scattered (with both ranges); the same rounds as recorded say nothing of it."""
    rec = _record("by_load")
    live = copy.deepcopy(rec["measurement"])
    batch, k = max(r["batch"] for r in live["rows"]), live["chosen"]["k"]
    fixed = next(r for r in live["rows"] if r["batch"] == batch and r["contender"] == f"fixed k = {k}")
    values = fixed["decode_tokens_per_s_runs"]["values"]
    fixed["decode_tokens_per_s_runs"] = measurement.spread([v * f for v, f in zip(values, (0.6, 1.0, 1.5))])
    recorded, lv = _sides("by_load", live)
    _, lines, _ = against.compare(recorded, lv)
    text = "\n".join(lines)
    a, b = recorded.facts["verdict"][2], lv.facts["verdict"][2]
    assert f"This run's rounds scattered more: its 95% range is {b.lo:.2f}–{b.hi:.2f}× against the recording's {a.lo:.2f}" in text
    same, _ = _sides("by_load", copy.deepcopy(rec["measurement"]))
    assert not against.reasons(same, same)


def test_a_verdict_that_kept_its_word_but_moved_its_ratio_says_by_how_much():
    """Lesson 2 live (2026-12-07, the browser beside it): still faster, but 2.59× against the recording's 3.25×; the
    prediction's answer (the FLOPs ratio) did not move, so only the verdict's ratio tells the student."""
    rec = _record("more_flops")
    live = copy.deepcopy(rec["measurement"])
    runs = live["spec"]["decode_tokens_per_s_runs"]
    live["spec"]["decode_tokens_per_s_runs"] = measurement.spread([v * 0.8 for v in runs["values"]])
    recorded, lv = _sides("more_flops", live)
    _, lines, differs = against.compare(recorded, lv)
    was, now = recorded.facts["verdict"][2].ratio, lv.facts["verdict"][2].ratio
    assert differs and f"at {now:.2f}× live against {was:.2f}× recorded" in lines[0]
    same, _ = _sides("more_flops", copy.deepcopy(rec["measurement"]))
    assert "live against" not in against.headline(same, same)[0]


def test_a_baseline_pass_of_another_batch_is_not_compared_as_the_same_pass():
    """Lesson 8 chose batch 8 live where the recording chose 16: its one-token passes are not the same pass, and the page
    says so instead of calling the difference a change of speed."""
    rec = _record("long_context")
    live = copy.deepcopy(rec["measurement"])
    for r in live["rows"]:
        r["batch"], r["ms"] = 8, r["ms"] / 2
    recorded, lv = _sides("long_context", live)
    text = "\n".join(against.reasons(recorded, lv))
    assert "The baseline is not the same pass: a one-token pass at batch 8 over 256 tokens live, a one-token pass at batch 16" in text
    assert "ran at another speed" not in text and "took" not in text
    rows = {r["number"]: r for r in against.table(recorded, lv)}  # each pass in a row of its own, under its own name
    assert rows["a one-token pass at batch 16 over 256 tokens (ms)"]["live"] == "—"
    assert rows["a one-token pass at batch 8 over 256 tokens (ms)"]["recorded"] == "—"


def test_a_moved_answer_with_nothing_measured_to_explain_it_says_so():
    rec = _record("turn_it_off")
    live = copy.deepcopy(rec["measurement"])
    runs = live["on"]["decode_tokens_per_s_runs"]
    live["on"]["decode_tokens_per_s_runs"] = measurement.spread([v * 1.3 for v in runs["values"]])  # speculation's rounds only
    recorded, lv = _sides("turn_it_off", live)
    _, lines, differs = against.compare(recorded, lv)
    assert differs and len(lines) == 2 and "run-to-run variation" in lines[1] and "15%" in lines[1]


def test_a_busy_recording_is_named_when_the_live_run_was_quiet():
    rec = _record("more_flops")
    busy = copy.deepcopy(rec["measurement"])
    busy["spec"]["other_cores"] = 1.2
    rec_side = _side("more_flops", busy, rec["settings"], rec["machine"], rec["date"])
    live = _side("more_flops", copy.deepcopy(rec["measurement"]), rec["settings"], rec["machine"], "2026-12-05")
    _, lines, _ = against.compare(rec_side, live)
    quiet = measurement.other_cores(rec["measurement"])
    assert any(f"The recording was made while other processes kept 1.20 cores busy (this run: {quiet:.2f})" in line for line in lines)


@pytest.mark.slow
def test_lesson_1_beside_a_busy_process_records_the_other_load_and_is_flagged(monkeypatch):
    """Real busy loops in subprocesses (bounded to 60 s, ended by the test) beside lesson 1's real passes: the run
    records the other processes' load during its own timing, above measurement.BUSY_CORES, and is called disturbed,
    with that figure, beside the recording too."""
    from app.lessons.kit import runs
    from engine import load_pair
    from engine.hardware import probe

    pair = load_pair()
    hw = probe(pair.device, pair.dtype, quick=True)
    monkeypatch.setattr(l1_memory_bound, "PASS_ROUNDS", 2)
    runs.machine_curve(pair)  # the room measured before the loops start, as the server's preload does
    loop = "import time\nend = time.time() + 60\nwhile time.time() < end:\n    pass\n"
    # two loops, one a core: one alone got 0.49 of a core beside the lesson's two threads once (under the old 0.5 mark)
    busy = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(2)]
    try:
        time.sleep(0.3)  # the loops are running before the first timed pass
        m = registry.check_measurement("memory_bound", memory_bound(pair, hw, {"context": 64, "largest": 16}))
    finally:
        for b in busy:
            b.kill()
            b.wait()
    assert m["other_cores"] is not None and m["other_cores"] > measurement.BUSY_CORES
    assert measurement.other_cores(m) == m["other_cores"]
    why = numbers.disturbed_live(m, _record("memory_bound")["measurement"])
    assert why == f"other processes kept {m['other_cores']:.2f} cores busy during a run"
    recorded, live = _sides("memory_bound", m, machine=hw.device_name)
    _, lines, _ = against.compare(recorded, live)
    assert any(f"Other processes kept {m['other_cores']:.2f} cores busy during this run's timing" in line for line in lines)


def test_a_live_run_at_other_settings_names_them_first():
    rec = _record("memory_bound")
    m, s = rec["measurement"], rec["settings"]
    recorded = _side("memory_bound", m, s, rec["machine"], rec["date"])
    live = _side("memory_bound", copy.deepcopy(m), {"context": 64, "largest": 16}, rec["machine"], "2026-12-05")
    rows, lines, _ = against.compare(recorded, live)
    by = {r["number"]: r for r in rows}
    assert by["setting: context (tokens)"] == {"number": "setting: context (tokens)", "recorded": "150", "live": "64"}
    assert by["setting: largest pass"] == {"number": "setting: largest pass", "recorded": "0 (from the room)", "live": "16"}
    assert lines[1] == f"What differed, though the answer stayed within {against.MOVED - 1:.0%}:" and lines[2] == (
        "- This run was asked for other settings than the recording: context (tokens) 64 live against 150 recorded; "
        "largest pass 16 live against 0 (from the room) recorded."
    )


def test_a_room_measured_beside_other_work_is_measured_again_and_says_so(monkeypatch):
    """The room every lesson chooses from (runs.machine_curve) is metered: beside real busy loops its curve records
    the other load, is taken again up to ROOM_TRIES times, and the next lesson that asks measures it once more; once
    the machine is quiet the quiet curve replaces it and is kept. The lesson's words and the comparison say when the
    curve shared the cores."""
    from app.lessons.kit import experiment, runs
    from engine import load_pair

    pair = load_pair()
    monkeypatch.setattr(runs, "ROOM_ROUNDS", 1)
    monkeypatch.setattr(runs, "ROOM_SIZES", (1, 2, 4))
    monkeypatch.setattr(runs, "_ROOMS", {})
    monkeypatch.setattr(runs, "_TRIED", {})
    monkeypatch.setattr(runs, "RETRY_S", 3600.0)
    measured = []
    real = runs._room_curve
    monkeypatch.setattr(runs, "_room_curve", lambda p: measured.append(1) or real(p))
    loop = "import time\nend = time.time() + 60\nwhile time.time() < end:\n    pass\n"
    busy = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(2)]
    try:
        time.sleep(0.3)
        curve, _ = runs.machine_curve(pair)
        assert curve["other_cores"] > measurement.BUSY_CORES and len(measured) == runs.ROOM_TRIES
        runs.machine_curve(pair)  # still disturbed, but measured just now: not again within RETRY_S
        assert len(measured) == runs.ROOM_TRIES
        monkeypatch.setattr(runs, "RETRY_S", 0.0)
        runs.machine_curve(pair)  # RETRY_S later: the next lesson that asks measures it once more
        assert len(measured) == runs.ROOM_TRIES + 1
        live = copy.deepcopy(_record("more_flops")["measurement"])
        live["curve"], live["chosen"]["room"] = curve, 2  # the recording's run, as if its room had been read from this curve
        assert "beside other work" in experiment.findings(EXPERIMENTS["more_flops"], live, {})[0]
        _, lines, _ = against.compare(*_sides("more_flops", live))
        assert any("this run's curve was measured beside other work" in line for line in lines), lines
    finally:
        for b in busy:
            b.kill()
            b.wait()
    before = len(measured)
    for _ in range(3):  # the loops are gone: the next ask measures a quiet curve (again, should a stray process run)
        quiet, _ = runs.machine_curve(pair)
        if quiet["other_cores"] <= measurement.BUSY_CORES:
            break
    assert quiet["other_cores"] <= measurement.BUSY_CORES and len(measured) > before
    after = len(measured)
    assert runs.machine_curve(pair)[0] is quiet and len(measured) == after  # a quiet curve is kept
    busy_rows = quiet | {"other_cores": 0.9, "key": "lesson 1's rows beside other work"}
    runs.remember_room(pair, busy_rows, 2)  # lesson 1's rows, timed beside other work, never replace a quieter room
    assert runs.machine_curve(pair)[0] is quiet
    quiet_rows = quiet | {"other_cores": 0.01, "key": "lesson 1's rows"}
    runs.remember_room(pair, quiet_rows, 5)
    assert runs.machine_curve(pair) == (quiet_rows, 5)
