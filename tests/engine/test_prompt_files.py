"""Prompt files (engine/bench/prompt_files.py): Spec-Bench's shipped JSONL read whole, plain prompt lines, a
stratified subset, and one clear line for every kind of bad file."""

from __future__ import annotations

import json

import pytest

from engine.bench import prompt_files as pf


def test_spec_bench_is_shipped_whole_and_grouped_as_spec_bench_reports_it():
    prompts = pf.read_prompts(pf.SPEC_BENCH)
    assert len(prompts) == 480
    assert pf.tasks(prompts) == list(pf.TASK_ORDER)
    counts = {t: sum(p.task == t for p in prompts) for t in pf.TASK_ORDER}
    assert counts == dict.fromkeys(pf.TASK_ORDER, 80)
    mt = [p for p in prompts if p.task == "mt_bench"]
    assert {p.category for p in mt} == set(pf.MT_BENCH)
    first = json.loads(pf.SPEC_BENCH.read_text(encoding="utf-8").splitlines()[0])
    assert prompts[0].text == first["turns"][0] and prompts[0].qid == str(first["question_id"])


def test_a_stratified_subset_spreads_over_each_task_and_is_the_same_every_time():
    prompts = pf.read_prompts(pf.SPEC_BENCH)
    chosen = pf.select(prompts, per_task=4)
    assert len(chosen) == 24 and chosen == pf.select(prompts, per_task=4)
    mt = [p for p in chosen if p.task == "mt_bench"]
    assert len({p.category for p in mt}) == 4  # spread over MT-bench's categories, not its first ten
    rag = pf.select(prompts, task="rag", per_task=100)
    assert len(rag) == 80 and all(p.task == "rag" for p in rag)


def test_plain_prompt_lines_and_their_own_categories(tmp_path):
    f = tmp_path / "mine.jsonl"
    f.write_text('{"prompt": "Say hello."}\n\n{"prompt": "Copy: a b c", "category": "copy"}\n', encoding="utf-8")
    prompts = pf.read_prompts(f)
    assert [(p.text, p.task, p.qid) for p in prompts] == [("Say hello.", pf.PLAIN, "1"), ("Copy: a b c", "copy", "3")]
    assert pf.tasks(prompts) == [pf.PLAIN, "copy"] and pf.task_name("qa") == "QA" and pf.task_name("copy") == "copy"


@pytest.mark.parametrize(
    "content, says",
    [
        ("", "holds no prompt"),
        ("not json\n", "line 1 is not JSON"),
        ('{"prompt": "ok"}\n[1, 2]\n', "line 2: expected a JSON object"),
        ('{"question": "x"}\n', "needs 'prompt' or 'turns'"),
        ('{"turns": []}\n', "'turns' must be a non-empty list"),
        ('{"prompt": "  "}\n', "non-empty string"),
        ('{"prompt": "ok", "category": 3}\n', "'category' must be a non-empty string"),
        (json.dumps({"prompt": "x" * (pf.MAX_PROMPT_CHARS + 1)}) + "\n", "characters, more than"),
    ],
)
def test_a_bad_file_gets_one_line(tmp_path, content, says):
    f = tmp_path / "bad.jsonl"
    f.write_text(content, encoding="utf-8")
    with pytest.raises(pf.PromptFileError) as err:
        pf.read_prompts(f)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_missing_large_binary_files_and_unknown_tasks_are_refused(tmp_path, monkeypatch):
    with pytest.raises(pf.PromptFileError, match="cannot read the prompt file"):
        pf.read_prompts(tmp_path / "absent.jsonl")
    big = tmp_path / "big.jsonl"
    big.write_text('{"prompt": "hi"}\n' * 10, encoding="utf-8")
    monkeypatch.setattr(pf, "MAX_BYTES", 20)
    with pytest.raises(pf.PromptFileError, match="more than 20 bytes"):
        pf.read_prompts(big)
    monkeypatch.setattr(pf, "MAX_BYTES", 1 << 20)
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(pf.PromptFileError, match="UTF-8"):
        pf.read_prompts(binary)
    prompts = pf.read_prompts(big)
    with pytest.raises(pf.PromptFileError, match="no prompt of task 'rag'"):
        pf.select(prompts, task="rag")
    with pytest.raises(pf.PromptFileError, match="≥ 1"):
        pf.select(prompts, per_task=0)
