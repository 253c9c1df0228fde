"""training/agreement.py: teacher-forced top-1 at draft starts against the engine's first-position acceptance.

In float32 the engine's drafter must see exactly what a full teacher-forced forward sees, so its first
drafted token is the teacher-forced argmax and it is accepted exactly when that argmax is right."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from conftest import tiny_pair

from engine.model.eagle_head import EagleRunner, load_head
from engine.model.pair import Loaded
from training import agreement, eagle_card, eagle_head
from training.agreement import StepStart, compare

PROMPTS = ["Tell me about the sea.", "Why is the sky blue? Explain briefly please.", "Count: one two three", "Write a haiku about rain."]


def test_compare_counts_each_kind_of_position():
    rows = [{"prompt_ids": [1, 2], "output_ids": [5, 6, 7, 8, 9]}]
    guesses = [torch.tensor([5, 6, 0, 0, 9])]  # right, right, wrong, wrong, right
    starts = [StepStart(0, 1, "prefill", True, 6), StepStart(0, 3, "correction", False, 1), StepStart(0, 4, "correction", True, 9)]
    res = compare(rows, starts, guesses)
    assert res["all_positions"] == {"top1": 2 / 4, "n": 4}  # output 0 comes from the prefill: not counted
    assert res["draft_starts"] == {"top1": 2 / 3, "n": 3}
    assert res["draft_starts_by_previous"] == {"prefill": {"top1": 1.0, "n": 1}, "correction": {"top1": 0.5, "n": 2}}
    assert res["after_a_hit"] == {"top1": 0.5, "n": 2}  # j=1 (after j=0, right): right; j=2 (after j=1): wrong
    assert res["after_a_miss"] == {"top1": 0.5, "n": 2}  # j=3 (after j=2, wrong): wrong; j=4: right
    assert res["engine_first_position_acceptance"] == {"top1": 2 / 3, "n": 3}
    assert res["engine_draft_equals_teacher_forced"] == {"top1": 2 / 3, "n": 3}  # start at j=3 drafted 1, argmax 0


def _check_engine_matches_teacher_forcing(res: dict) -> None:
    starts, accepted = res["draft_starts"], res["engine_first_position_acceptance"]
    assert starts["n"] == accepted["n"] > 10
    assert res["engine_draft_equals_teacher_forced"]["top1"] == 1.0
    assert accepted["top1"] == starts["top1"]
    assert res["all_positions"]["n"] > starts["n"]


def test_model_drafter_engine_matches_teacher_forcing(tokenizer):
    pair = tiny_pair(tokenizer, draft_noise=0.01)
    res = agreement.measure(pair, PROMPTS, depth=3, max_new_tokens=24, batch=2, drafter="model")
    _check_engine_matches_teacher_forcing(res)
    assert 0.0 < res["draft_starts"]["top1"] < 1.0  # hits and misses both happen: the check is not vacuous
    assert "agreement" in agreement.format_report(res)


def test_eagle_engine_matches_teacher_forcing(tokenizer, tmp_path):
    pair = tiny_pair(tokenizer)
    head = eagle_head.EagleHead.from_target(pair.target, seed=0, fuse_layers=(0,))
    eagle_card.save_head(head, tmp_path, list(range(0, len(tokenizer), 3)), {"note": "test"}, dtype=torch.float32)
    config, state, vocab = load_head(tmp_path, pair.target)
    pair = replace(pair, loaded={"eagle": Loaded(EagleRunner(config, state, vocab, pair.target), "tiny eagle")})
    res = agreement.measure(pair, PROMPTS, depth=3, max_new_tokens=24, batch=3, drafter="eagle", eagle_dir=tmp_path)
    _check_engine_matches_teacher_forcing(res)


def test_bad_options_are_clear_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        agreement.parse_args(["--depth", "0"])
    assert exc.value.code == 2
    assert "--depth" in capsys.readouterr().err
    with pytest.raises(ValueError, match="drafter must be"):
        agreement.teacher_forced_argmax(None, [], "ngram")


def test_missing_head_folder_is_a_clear_error(tmp_path, capsys):
    assert agreement.main(["--eagle", str(tmp_path / "nope"), "--prompts", "1"]) == 2
    assert "error:" in capsys.readouterr().err
