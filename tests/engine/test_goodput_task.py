"""Goodput by task (`DecodeConfig.task`, engine/decoding/goodput_steps.py `start_from_task`): a run that names its
prompts' task starts from the acceptance its task's last run ended with, where a run that names none starts from the
drafter's card; each task keeps a state of its own; the name is checked like every option and changes no output."""

from __future__ import annotations

import pytest
from test_policies import FLAT, _step, assert_warm_from, ctx, curve

from engine import DecodeConfig, Trace, generate
from engine.decoding import passcurve, warmstart
from engine.decoding.goodput import GoodputDepth
from engine.decoding.goodput_steps import PRIOR_WEIGHT, TASK_FLOOR
from engine.options import MAX_TASK, ConfigError

KEY = ("tiny-llama", "model", "tiny-draft", "float32", "cpu", "test curve", 4, 0, 0, "task/rag")
CARD = [0.7, 0.6, 0.5, 0.5]


def run_rejecting_every_draft(task: str) -> GoodputDepth:
    """A policy whose drafts are all rejected, two rows at a time, ended by a step that finishes both (its state is
    remembered)."""
    policy = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.05, prior=CARD, memory_key=KEY, task=task)
    for _ in range(6):
        policy.observe(_step(2, [0, 0], verify_ms=12.0, draft_ms=1.4))
    last = _step(0, [0, 0], verify_ms=11.0, draft_ms=0.0)
    for seq in last.seqs:
        seq.finished = True
    policy.observe(last)
    return policy


def test_a_named_task_starts_where_its_last_run_ended():
    """Six steps of chains of 2 rejected at their first position: its acceptance fell from the card's; the task's next
    run starts from it (prior, estimate and counts worth the card's weight); the deeper positions, never reached, stay."""
    ended = run_rejecting_every_draft("rag")
    assert ended.accept[0] < CARD[0] / 2 and ended.accept[1:] == pytest.approx(CARD[1:])
    warm = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.05, prior=CARD, memory_key=KEY, task="rag")
    assert warm.prior == pytest.approx(ended.accept) and warm.accept == warm.prior
    assert warm.counts == [[PRIOR_WEIGHT * a, PRIOR_WEIGHT] for a in warm.prior]
    # where a pass past 4 tokens costs 1.3x: plain from its first step at batch 4, where the card drafts
    knee = curve(lambda n: 10.0 if n <= 4 else 13.0)
    on_card = GoodputDepth(curve=knee, max_depth=4, draft_cost_ratio=0.05, prior=CARD, memory_key=KEY)
    on_task = GoodputDepth(curve=knee, max_depth=4, draft_cost_ratio=0.05, prior=CARD, memory_key=KEY, task="rag")
    assert on_card.depth(ctx(4, 4)) > 0 and on_task.depth(ctx(4, 4)) == 0


def test_a_run_that_names_no_task_starts_from_the_card_whatever_the_last_run_learnt():
    ended = run_rejecting_every_draft("")
    warm = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.05, prior=CARD, memory_key=KEY)
    assert warm.prior == CARD
    assert_warm_from(warm, ended.learnt())


def test_a_tasks_prior_stays_off_zero_and_one():
    """Kept within TASK_FLOOR of 0 and 1: an exploring chain can still move a prior learnt at 0."""
    policy = GoodputDepth(curve=FLAT, max_depth=4, draft_cost_ratio=0.05, prior=CARD, task="math")
    policy.restore(policy.learnt() | {"accept": [0.0, 1.0, 0.5, 0.5]})
    assert policy.prior == [TASK_FLOOR, 1 - TASK_FLOOR, 0.5, 0.5]


def test_each_task_keeps_its_own_state(tiny):
    """A run of one task leaves a state under its own key: another task's run, and a run naming none, recall nothing."""
    cfg = DecodeConfig(depth=3, drafter="model", policy="goodput", max_new_tokens=6, task="qa")
    other, none = DecodeConfig.from_dict(cfg.to_dict() | {"task": "rag"}), DecodeConfig.from_dict(cfg.to_dict() | {"task": ""})
    traced = generate(tiny, ["Hi", "What is 2 + 2?"], cfg)
    plain = generate(tiny, ["Hi", "What is 2 + 2?"], none)
    assert traced.output_ids == plain.output_ids  # the name steers what goodput proposes, never what is emitted
    curve = passcurve.pass_curve(tiny)
    keys = [warmstart.policy_key(tiny, c, curve, 2) for c in (cfg, other, none)]
    assert len(set(keys)) == 3 and keys[0][-1] == "task/qa" and not str(keys[2][-1]).startswith("task/")
    assert warmstart.recall(keys[0]) is not None and warmstart.recall(keys[1]) is None
    assert traced.config["task"] == "qa" and "task" not in plain.config  # a run naming none keeps the old options
    assert Trace.from_dict(traced.to_dict()).config["task"] == "qa"


@pytest.mark.parametrize(
    "task, message",
    [(7, "task must be a name"), ("x" * (MAX_TASK + 1), f"at most {MAX_TASK}"), ("rag\nmath", "printable characters")],
)
def test_a_bad_task_name_is_refused_in_one_line(task, message):
    with pytest.raises(ConfigError, match=message) as err:
        DecodeConfig(policy="goodput", task=task)
    assert "\n" not in str(err.value).replace("\\n", "")
