"""The prompt set's data asset (assets/training/prompts.json) and the code that builds prompts from it.

The topic and task lists moved out of training/prompts.py into the asset (issue 43). The digests below were
taken from the module as it was before the move (commit e0522e8, the lists written in Python): every prompt
set the trainers ever generated is rebuilt byte for byte, so shards already on disk stay valid."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from training import prompts as p

BEFORE_THE_MOVE = {
    "rounds=1": "b59bddd28256dcd6",
    "rounds=2": "1ff4fec5a19ac4fc",
    "rounds=3": "358cd644fa3a71d2",
    "rounds=4": "3418bd81a8b04730",
    "rounds=5": "4a713a0a51653ab8",
    "rounds=6": "4fd2fecb397d4cf4",
    "extended": "1ff4fec5a19ac4fc",
    "seed=3,every=7,rounds=6": "2b65430ef942b23b",
    "every=0": "1d4c36dfe0618481",
    "custom": "905e09114eabeca7",
    "heldout_asset": "4b7d0f4056941ee4",
    "eval24_r6": "941ba721668ece30",
}


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode()).hexdigest()[:16]


def current_digests() -> dict[str, str]:
    out = {f"rounds={r}": digest(p.build_prompts(seed=0, rounds=r)) for r in range(1, 7)}
    out["extended"] = digest(p.build_prompts(seed=0, extended=True))
    out["seed=3,every=7,rounds=6"] = digest(p.build_prompts(seed=3, heldout_every=7, rounds=6))
    out["every=0"] = digest(p.build_prompts(seed=1, heldout_every=0, rounds=3))
    out["custom"] = digest(p.build_prompts(seed=2, topics=p.TOPICS[:20], tasks=p.TASKS[:5], rounds=4))
    out["heldout_asset"] = digest(p.heldout_asset())
    out["eval24_r6"] = digest(p.heldout_eval_prompts(p.build_prompts(seed=0, rounds=6)["heldout"], 24))
    return out


def test_every_prompt_set_is_byte_identical_to_the_one_before_the_move():
    assert current_digests() == BEFORE_THE_MOVE


def test_the_asset_holds_six_rounds_of_topics_and_a_mix_with_the_counts_the_data_was_gathered_with():
    assert [r.number for r in p.ROUNDS] == [1, 2, 3, 4, 5, 6, 7]
    assert [len(r.topics) for r in p.ROUNDS[2:6]] == [100, 100, 98, 100]
    assert [r.mix for r in p.ROUNDS] == [None] * 6 + ["mix.json"] and p.MIX_ROUND == 7
    assert len(p.TASKS) == 26 and len(p.MORE_TASKS) == 14 and all(not r.tasks for r in p.ROUNDS[2:])
    assert len(p.PARAGRAPH_TEMPLATES) == 3


def write(tmp_path, data) -> object:
    path = tmp_path / "prompts.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "break_it, message",
    [
        (lambda d: d.update(format="speclab.training_prompts/0"), "format"),
        (lambda d: d.update(extra=1), "keys"),
        (lambda d: d["rounds"][1].update(round=3), "numbered"),
        (lambda d: d["rounds"][2]["topics"].append(d["rounds"][2]["topics"][0]), "repeated"),
        (lambda d: d["rounds"][0]["tasks"][0].update(template="Tell me a joke."), "neither"),
        (lambda d: d["rounds"][0]["topic_groups"][0].update(topics=[]), "non-empty"),
        (lambda d: d["rounds"][1].pop("topics"), "required"),
        (lambda d: d["rounds"][0].update(tasks=[]), "no tasks"),
        (lambda d: d.update(rounds=[]), "no rounds"),
        (lambda d: d["rounds"][6].update(mix="nowhere.json"), "not found"),
        (lambda d: d["rounds"][6].update(topics=["x"]), "keys"),
    ],
)
def test_a_malformed_asset_is_refused_by_name(tmp_path, break_it, message):
    data = json.loads(p.PROMPTS_ASSET.read_text(encoding="utf-8"))
    assert p.load_rounds(write(tmp_path, data))[0] == p.ROUNDS
    broken = copy.deepcopy(data)
    break_it(broken)
    with pytest.raises(ValueError, match=message):
        p.load_rounds(write(tmp_path, broken))
