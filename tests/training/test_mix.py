"""The broad mix of task prompts (training/mix.py, assets/training/mix.json): seeded, distinct, fully filled,
and kept apart from Spec-Bench, the held-out test the drafters are measured on."""

from __future__ import annotations

import collections
import copy
import json
import re
from pathlib import Path

import pytest

from training import mix
from training import prompts as p

SPEC_BENCH = Path(__file__).resolve().parents[2] / "assets" / "spec_bench" / "question.jsonl"


def test_each_task_gets_its_count_of_distinct_fully_filled_prompts_the_same_for_a_seed():
    data = mix.load_mix()
    rows = mix.build_mix(0, p.TOPICS)
    assert rows == mix.build_mix(0, p.TOPICS) and rows != mix.build_mix(1, p.TOPICS)
    assert collections.Counter(r["task"] for r in rows) == {t["task"]: t["count"] for t in data["tasks"]}
    assert len({r["prompt"] for r in rows}) == len(rows)
    assert not [r["prompt"] for r in rows if re.search(r"\{[a-z_0-9]*\}", r["prompt"])]
    assert all(r["topic"] in p.TOPICS for r in rows)


def test_the_puzzles_are_well_posed():
    """The heads-and-legs puzzle (a reasoning slot, drawn in role play and extraction) always has an answer."""
    farms = [r["prompt"] for r in mix.build_mix(0, p.TOPICS) if "heads and" in r["prompt"]]
    assert len(farms) >= 3
    for prompt in farms:  # legs = 2 x heads + 2 x cows, with 1 <= cows < heads
        heads, legs = (int(x) for x in re.findall(r"(\d+) (?:heads|legs)", prompt))
        assert 2 * heads < legs < 4 * heads and legs % 2 == 0


def test_no_mix_prompt_shares_a_sentence_with_spec_bench():
    bench = set()
    for line in SPEC_BENCH.read_text(encoding="utf-8").splitlines():
        for turn in json.loads(line)["turns"]:
            bench.update(s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", turn) if len(s.strip()) > 30)
    data = mix.load_mix()
    ours = [s for values in data["slots"].values() for s in values] + [t for task in data["tasks"] for t in task["templates"]]
    assert len(bench) > 1000
    assert not [s for s in ours if s.strip() in bench]


def test_the_mix_round_follows_the_six_rounds_without_changing_them():
    six, seven = p.build_prompts(seed=0, rounds=6), p.build_prompts(seed=0, rounds=7)
    n = len(six["train"])
    assert seven["train"][:n] == six["train"] and seven["heldout"][: len(six["heldout"])] == six["heldout"]
    added = seven["train"][n:] + seven["heldout"][len(six["heldout"]) :]
    assert {r["round"] for r in added} == {7} and len(added) == sum(t["count"] for t in mix.load_mix()["tasks"])
    held = [r for r in seven["heldout"] if r.get("round") == 7]
    assert len(held) == sum(t["count"] // 10 for t in mix.load_mix()["tasks"])
    assert not {r["topic"] for r in added} & set(six["heldout_topics"])
    assert p.heldout_eval_prompts(seven["heldout"], 24) == p.heldout_eval_prompts(six["heldout"], 24)


@pytest.mark.parametrize(
    "break_it, message",
    [
        (lambda d: d.update(format="x"), "format"),
        (lambda d: d["slots"].pop("de"), "slots"),
        (lambda d: d["slots"].update(de=[]), "non-empty"),
        (lambda d: d["tasks"][0].update(count=0), "positive count"),
        (lambda d: d["tasks"][0].pop("templates"), "exactly"),
        (lambda d: d["tasks"].append(copy.deepcopy(d["tasks"][0])), "repeated"),
    ],
)
def test_a_malformed_mix_is_refused_by_name(tmp_path, break_it, message):
    data = json.loads(mix.MIX_ASSET.read_text(encoding="utf-8"))
    broken = copy.deepcopy(data)
    break_it(broken)
    path = tmp_path / "mix.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(ValueError, match=message):
        mix.load_mix(path)


def test_a_task_asking_more_prompts_than_its_slots_can_fill_says_so():
    data = mix.load_mix()
    data["tasks"] = [{"task": "code", "count": 500, "templates": ["Write a Python function that {code}."]}]
    with pytest.raises(ValueError, match="fewer distinct prompts"):
        mix.build_mix(0, p.TOPICS, data)
    with pytest.raises(ValueError, match="three topics"):
        mix.build_mix(0, p.TOPICS[:2], data)
