"""The task bench (engine/bench/tasks.py): per task and batch, plain decoding and each contender interleaved on the
same rows, the speedup judged by the one rule, τ and per-position acceptance, and Spec-Bench's leaderboard layout."""

from __future__ import annotations

import pytest

from engine import DecodeConfig, verdict
from engine.bench import tasks as T
from engine.bench.prompt_files import Prompt
from engine.decoding import passcurve, warmstart
from engine.options import MAX_TASK


def _prompts() -> list[Prompt]:
    copy = "Copy this sentence exactly: the quick brown fox jumps over the lazy dog near the river bank."
    return [
        Prompt("Say hello to a friend.", "chat", "chat", "1"),
        Prompt("Name three colours.", "chat", "chat", "2"),
        Prompt(copy, "copy", "copy", "3"),
    ]


def test_every_task_and_batch_runs_plain_then_each_contender_judged_by_the_one_rule(tiny):
    rows = T.run_tasks(tiny, _prompts(), [1, 2], ["ngram", "model"], max_new_tokens=6, rounds=2, log=lambda _: None)
    assert [(r["task"], r["batch"], r["contender"]) for r in rows[:3]] == [
        ("chat", 1, "plain"),
        ("chat", 1, T.CONTENDERS["ngram"].name),
        ("chat", 1, T.CONTENDERS["model"].name),
    ]
    assert len(rows) == 2 * 2 * 3
    for r in rows:
        assert len(r["decode_tokens_per_s_runs"]) == 2 and r["decode_tokens_per_s"] > 0
        if r["contender"] == "plain":
            assert r["speedup"] == 1.0 and r["verdict"] == "baseline" and r["tau"] == 1.0
            continue
        plain = next(p for p in rows if (p["task"], p["batch"], p["contender"]) == (r["task"], r["batch"], "plain"))
        v = verdict.judge(r["decode_tokens_per_s_runs"], plain["decode_tokens_per_s_runs"])
        assert (r["speedup"], r["speedup_lo"], r["speedup_hi"], r["verdict"]) == (v.ratio, v.lo, v.hi, v.kind)
        assert r["tau"] >= 1.0 and r["whole_run_speedup"] > 0
    table = T.format_tasks(rows)
    assert "batch 1" in table and "batch 2" in table and "chat" in table and "copy" in table and "τ" in table
    assert verdict.RULE in table
    summary = T.summary(rows)
    assert set(summary) == {(b, T.CONTENDERS[k].name) for b in (1, 2) for k in ("ngram", "model")}


def test_a_batch_fills_its_rows_from_the_tasks_prompts_in_order():
    assert T.rows_of(_prompts()[:2], 5) == ["Say hello to a friend.", "Name three colours."] * 2 + ["Say hello to a friend."]


def test_each_tasks_runs_name_it_so_goodput_learns_each_task_apart(tiny):
    """run_tasks names every run's task (`DecodeConfig.task`): goodput leaves a state per task; a prompt file's category
    (any string) is named by its printable characters, at most MAX_TASK of them."""
    spec = {"drafter": "model", "depth": 3, "policy": "goodput"}
    T.run_tasks(tiny, _prompts(), [1], [T.Contender("goodput", spec)], max_new_tokens=6, rounds=1, log=lambda _: None)
    curve = passcurve.pass_curve(tiny)
    for task in ("chat", "copy", "other"):
        key = warmstart.policy_key(tiny, DecodeConfig(max_new_tokens=6, task=task, **spec), curve, 1)
        assert (warmstart.recall(key) is not None) == (task != "other"), task
    assert T.task_label("line one\nline two") == "line oneline two" and len(T.task_label("x" * 500)) == MAX_TASK


def test_unknown_contenders_and_batches_are_refused_in_one_line(tiny):
    with pytest.raises(ValueError, match="unknown contender 'medusa'"):
        T.run_tasks(tiny, _prompts(), [1], ["medusa"], 4, 2)
    with pytest.raises(ValueError, match="batch sizes must be ≥ 1"):
        T.run_tasks(tiny, _prompts(), [0], ["ngram"], 4, 2)


def test_the_lookup_gains_tokens_per_pass_where_the_answer_copies_the_prompt():
    """The embedded model asked to copy a sentence: n-gram lookup's drafts are accepted, τ well above plain's 1.00."""
    from engine import load_pair

    pair = load_pair()
    rows = T.run_tasks(pair, _prompts()[2:], [1], ["ngram"], max_new_tokens=20, rounds=2, log=lambda _: None)
    lookup = rows[1]
    assert lookup["tau"] > 1.5 and lookup["per_position_acceptance"][0] > 0.5


def test_a_recording_round_trips_and_its_verdicts_come_from_its_rounds(tiny, tmp_path):
    from engine.bench import task_records as R

    rows = T.run_tasks(tiny, _prompts()[:1], [1], ["ngram"], max_new_tokens=4, rounds=2, log=lambda _: None)
    rec = R.make(rows, machine="test CPU", dtype="float32", seconds=1.0, settings={"rounds": 2}, prompts={"chat": ["1"]}, date="2026-12-05")
    path = tmp_path / "rec.json"
    R.save(rec, path)
    back = R.load(path)
    assert [r["speedup"] for r in back["rows"]] == [r["speedup"] for r in rows]
    assert back["machine"] == "test CPU" and back["rows"][1]["verdict"] == rows[1]["verdict"]
    tampered = path.read_text().replace('"contender":"plain"', '"contender":"plainish"')
    path.write_text(tampered)
    with pytest.raises(R.TaskRecordingError, match="no plain row"):
        R.load(path)


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda d: d.pop("machine"), "'machine' is missing"),
        (lambda d: d.update(format="other/1"), "format must be"),
        (lambda d: d.update(rows=[]), "non-empty list"),
        (lambda d: d["rows"][0].update(decode_tokens_per_s_runs=[0.0]), "positive rates"),
        (lambda d: d["rows"][0].update(batch=0), "'batch' must be ≥ 1"),
        (lambda d: d["rows"][0].update(tau="high"), "'tau' must be a number"),
    ],
)
def test_a_bad_recording_gets_one_line(edit, says, tmp_path):
    import json

    from engine.bench import task_records as R

    row = {"task": "qa", "batch": 1, "contender": "plain", "decode_tokens_per_s": 80.0, "decode_tokens_per_s_runs": [80.0, 81.0]}
    data = {
        "format": R.FORMAT,
        "machine": "m",
        "date": "d",
        "dtype": "bfloat16",
        "seconds": 1,
        "settings": {},
        "prompts": {},
        "rows": [row],
    }
    R.check(data)
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(R.TaskRecordingError) as err:
        R.load(path)
    assert says in str(err.value) and "\n" not in str(err.value)
    (tmp_path / "not.json").write_text("{")
    with pytest.raises(R.TaskRecordingError, match="is not JSON"):
        R.load(tmp_path / "not.json")


def test_the_bench_measures_a_prompt_file_per_category_and_writes_a_recording(tmp_path, capsys):
    import json

    from engine.__main__ import main
    from engine.bench import task_records

    f = tmp_path / "mine.jsonl"
    lines = [{"prompt": "Copy: red green blue red green blue", "category": "copy"}, {"prompt": "Say hi.", "category": "chat"}]
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    out = tmp_path / "rec.json"
    argv = ["bench", "--prompts-file", str(f), "--batch", "1", "--depth", "0,3", "--drafter", "ngram"]
    assert main([*argv, "--max-new-tokens", "6", "--repeats", "2", "--json", str(out), "--category", "copy"]) == 0
    printed = capsys.readouterr().out
    assert "batch 1                     copy" in printed and "n-gram, k 3" in printed
    rec = task_records.load(out)
    assert {r["task"] for r in rec["rows"]} == {"copy"} and [r["contender"] for r in rec["rows"]] == ["plain", "n-gram, k 3"]


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--prompts-file", "/no/such.jsonl"], "cannot read the prompt file"),
        (["--category", "qa"], "go with --prompts-file"),
        (["--prompts-file", "spec-bench", "--category", "poetry"], "no prompt of task 'poetry'"),
        (["--prompts-file", "spec-bench", "--depth", "0"], "give a --depth above 0"),
    ],
)
def test_bad_prompt_file_options_get_one_line_before_any_model_loads(extra, says, capsys):
    from engine.__main__ import main

    assert main(["bench", "--drafter", "ngram", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err and "Traceback" not in err


def test_a_cell_counts_the_rows_whose_text_differs_from_plain_and_the_table_marks_it(tiny):
    """Greedy speculation in float32 writes plain decoding's text: no row differs. A cell whose rows do differ (bfloat16
    rounding can flip a near-tie) says how many, in its row and in the leaderboard."""
    rows = T.run_tasks(tiny, _prompts(), [2], ["model"], max_new_tokens=6, rounds=1, log=lambda _: None)
    assert [r["rows_differ"] for r in rows] == [0, 0, 0, 0]  # the tiny pair runs in float32
    assert T.rows_differ([[1, 2], [3, 4]], [[1, 2], [3, 5]]) == 1 and T.rows_differ([[1]], [[1], [2]]) == 1
    rows[1] |= {"rows_differ": 1}
    table = T.format_tasks(rows)
    assert "≠1" in table and table.count("≠") == 2  # the cell, and the legend's line


def test_a_file_with_a_byte_order_mark_reads_and_an_mt_bench_category_is_chosen_by_its_own_name(tmp_path):
    """Some editors start a UTF-8 file with a byte-order mark; Spec-Bench groups MT-bench's eight categories into one
    task, yet `--category writing` asks for that category's prompts alone."""
    from engine.bench.prompt_files import read_prompts, select

    path = tmp_path / "q.jsonl"
    lines = [
        '{"question_id": 1, "category": "writing", "turns": ["Write a poem."]}',
        '{"question_id": 2, "category": "math", "turns": ["What is 2 + 2?"]}',
        '{"question_id": 3, "category": "writing", "turns": ["Write a letter."]}',
    ]
    path.write_text("\ufeff" + "\n".join(lines) + "\n", encoding="utf-8")
    prompts = read_prompts(path)
    assert [p.task for p in prompts] == ["mt_bench"] * 3
    chosen = select(prompts, "writing")
    assert [p.text for p in chosen] == ["Write a poem.", "Write a letter."] and {p.task for p in chosen} == {"writing"}
    assert len(select(prompts, "mt_bench")) == 3


def test_nan_is_not_json_in_a_prompt_file(tmp_path):
    from engine.bench.prompt_files import PromptFileError, read_prompts

    path = tmp_path / "q.jsonl"
    path.write_text('{"question_id": NaN, "category": "qa", "turns": ["Why?"]}\n')
    with pytest.raises(PromptFileError, match="line 1 is not JSON \\(NaN is not a JSON value\\)"):
        read_prompts(path)
