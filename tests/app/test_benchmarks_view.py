"""The Benchmarks page's pictures and tables (app/views/benchmarks.py), drawn from a real task bench run of the tiny
model (engine/bench/tasks.py) and from hand-made rows whose verdicts are known."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.views import benchmarks as V
from engine.bench import task_records
from engine.bench.prompt_files import Prompt
from engine.bench.tasks import CONTENDERS, run_tasks

ROOT = Path(__file__).resolve().parents[2]
LOOKUP = CONTENDERS["ngram"].name  # the lookup's cells, as the bench names them


@pytest.fixture(scope="module")
def rows(tiny):
    prompts = [Prompt("Say hello.", "chat", "chat", "1"), Prompt("Copy: a b c d e f a b c d e f", "copy", "copy", "2")]
    return run_tasks(tiny, prompts, [1, 2], ["ngram", "model"], 6, 2, log=lambda _: None)


def _row(task, batch, contender, rate, runs, tau=1.0):
    return {"task": task, "batch": batch, "contender": contender, "decode_tokens_per_s": rate, "decode_tokens_per_s_runs": runs, "tau": tau}


def test_the_leaderboard_has_a_cell_per_contender_and_task_with_its_number_and_word(rows):
    names = [CONTENDERS["ngram"].name, CONTENDERS["model"].name]
    assert V.contenders_of(rows) == names and V.tasks_of(rows) == ["chat", "copy"] and V.batches_of(rows) == [1, 2]
    table = V.leaderboard_rows(rows, 2)
    assert [t["contender"] for t in table] == ["plain decoding (tokens/s)", *names]
    cell = next(r for r in rows if r["batch"] == 2 and r["contender"] == names[0] and r["task"] == "copy")
    assert table[1]["copy"] == f"{cell['speedup']:.2f}× {cell['verdict']}, τ {cell['tau']:.2f}"
    fig = V.leaderboard_figure(rows, 2, "measured on a test CPU")
    heat = fig.data[0]
    assert list(heat.x) == ["chat", "copy"] and list(heat.y) == names and "test CPU" in fig.layout.title.text
    assert heat.text[0][1].replace("×<br>", "× ", 1).replace("<br>", ", ") == table[1]["copy"]  # the picture and the table agree
    assert all(len(line) <= len("can't tell") for line in heat.text[0][1].split("<br>"))  # a word a line: fits a narrow cell


def test_the_batch_chart_draws_a_line_per_task_with_the_rules_range(rows):
    name = CONTENDERS["model"].name
    fig = V.batch_figure(rows, name, "measured on a test CPU")
    lines = [d for d in fig.data if d.mode == "lines+markers"]
    assert [d.name for d in lines] == ["chat", "copy"] and list(lines[0].x) == [1, 2]
    first = next(r for r in rows if r["task"] == "chat" and r["batch"] == 1 and r["contender"] == name)
    assert lines[0].y[0] == first["speedup"] and lines[0].error_y.array[0] == pytest.approx(first["speedup_hi"] - first["speedup"])
    assert len({d.line.dash for d in lines}) == 2 and len({d.marker.symbol for d in lines}) == 2  # not by colour alone
    long = V.batch_figure(rows, name, "recorded on a test CPU, " + "a long note about the head " * 12).layout.title.text
    assert long.count("<br>") >= 3 and all(len(part) <= 140 for part in long.split("<br>"))  # wrapped, never cut off


def test_findings_name_a_winner_only_where_the_rule_does():
    rows = task_records.judged(
        [
            _row("qa", 1, "plain", 80, [80, 81, 79, 80]),
            _row("qa", 1, LOOKUP, 120, [120, 122, 118, 121], tau=2.4),
            _row("qa", 1, "EAGLE head, k 3", 81, [70, 90, 75, 88]),
            _row("rag", 1, "plain", 80, [80, 81, 79, 80]),
            _row("rag", 1, LOOKUP, 80, [81, 80, 80, 79], tau=1.3),
            _row("rag", 1, "EAGLE head, k 3", 80, [70, 90, 80, 85]),
        ]
    )
    lines = V.findings(rows, 1)
    assert lines[0].startswith(f"**QA**: {LOOKUP} was the one contender faster than plain") and "EAGLE" not in lines[0]
    assert lines[1].startswith("**RAG**: no contender was faster than plain decoding by the rule")
    assert "from 1.30 on RAG to 2.40 on QA" in lines[2]
    full = V.range_rows(rows, 1)
    assert {r["the rule says"] for r in full} == {r["verdict"] for r in rows if r["contender"] != "plain"}
    assert {r[V.ROWS_DIFFER] for r in full} == {"not recorded"}  # an older recording did not count them
    rows[1]["rows_differ"], rows[2]["rows_differ"] = 0, 2
    full = V.range_rows(rows, 1)
    assert [r[V.ROWS_DIFFER] for r in full[:2]] == ["none", "2: unequal work, read the speedup with care"]


def test_findings_name_the_fastest_only_where_the_ranges_part():
    """Two contenders faster than plain: the higher median is named the fastest only where its range clears the
    other's by the rule's gap; overlapping ranges name none (the recording once named goodput's 1.45×, range
    1.30-1.62, over the EAGLE head's 1.36×, 1.31-1.41)."""
    near = task_records.judged(
        [
            _row("qa", 1, "plain", 80, [80, 81, 79, 80]),
            _row("qa", 1, "goodput", 116, [100, 130, 110, 125]),
            _row("qa", 1, "EAGLE head, k 3", 109, [108, 110, 109, 109]),
        ]
    )
    line = V.findings(near, 1)[0]
    assert "none is named the fastest" in line and "3% gap" in line and "was fastest" not in line
    apart = task_records.judged(
        [
            _row("qa", 1, "plain", 80, [80, 81, 79, 80]),
            _row("qa", 1, LOOKUP, 160, [160, 161, 159, 160]),
            _row("qa", 1, "EAGLE head, k 3", 100, [100, 101, 99, 100]),
        ]
    )
    assert V.findings(apart, 1)[0].startswith(f"**QA**: {LOOKUP} was fastest, 2.00× plain")


def test_a_live_run_sits_beside_the_recording_and_says_why_they_differ():
    rec_rows = task_records.judged([_row("qa", 1, "plain", 80, [80, 81]), _row("qa", 1, LOOKUP, 100, [100, 101], tau=2.0)])
    live = task_records.judged([_row("qa", 1, "plain", 40, [40, 41]), _row("qa", 1, LOOKUP, 60, [60, 61], tau=2.2)])
    beside = V.beside_rows(live, rec_rows, "qa", 1)
    assert beside[0]["recorded"].startswith("1.25×") and beside[0]["live"].startswith("1.49×")
    both = task_records.judged([_row("qa", 1, "plain", 40, [40, 41]), _row("qa", 1, "n-gram, else EAGLE, k 4", 70, [70, 71])])
    assert V.beside_rows(both, rec_rows, "qa", 1)[0]["recorded"] == "not in the recording"  # a contender recorded nowhere
    assert V.beside_rows(live, rec_rows, "qa", 4)[0]["recorded"] == "not recorded at this batch"  # recorded, not at batch 4
    rec = {"machine": "EPYC", "settings": {"per_task": 2, "max_new_tokens": 32}}
    note = V.beside_note(rec, "Xeon", 1, 16)
    assert "this page runs on Xeon, the recording on EPYC" in note and "1 prompt for 16 tokens" in note


def test_a_busy_run_is_flagged_from_the_cores_other_work_kept():
    quiet = [_row("qa", 1, "plain", 80, [80]) | {"other_cores": 0.1}, _row("qa", 1, "x", 80, [80]) | {"other_cores": 0.2}]
    assert V.busy_cores(quiet) == 0.2 and V.disturbed_note(quiet) is None
    busy = [r | {"other_cores": 1.3} for r in quiet]
    assert V.disturbed_note(busy).startswith("DISTURBED: other processes kept 1.3 cores busy")
    assert V.disturbed_note([_row("qa", 1, "plain", 80, [80])]) is None  # not recorded: no flag


def test_the_lookups_tau_sentence_reads_the_lookup_alone_not_the_hybrid():
    """The shipped recording: "n-gram, else EAGLE" reached τ 2.46 on math; the lookup alone 1.39 there and its highest on
    translation. The sentence about n-gram lookup reads the lookup's own cells (it once read the hybrid's)."""
    rows = task_records.load(ROOT / "assets" / "spec_bench" / "recording.json")["rows"]
    lookup = LOOKUP
    at_1 = [r for r in rows if r["batch"] == 1 and r["contender"] == lookup]
    hi, lo = max(at_1, key=lambda r: r["tau"]), min(at_1, key=lambda r: r["tau"])
    line = next(f for f in V.findings(rows, 1) if f.startswith("n-gram lookup drafts"))
    assert f"from {lo['tau']:.2f} on " in line and f"to {hi['tau']:.2f} on " in line
    hybrid = max((r for r in rows if r["batch"] == 1 and r["contender"].startswith("n-gram, else")), key=lambda r: r["tau"])
    assert hybrid["tau"] > hi["tau"] and f"{hybrid['tau']:.2f}" not in line


def test_a_range_shown_beside_faster_never_reads_as_touching_one():
    """A recorded cell's low bound of 1.001 was printed 1.00-1.08x beside "faster": three decimals where a bound rounds
    to 1.00, as the rule's own interval does; two elsewhere; "one round" without a range."""
    from app.views.benchmarks import _range

    assert _range(1.001, 1.08) == "1.001–1.080×" and _range(0.95, 1.08) == "0.95–1.08×" and _range(None, None) == "one round"
