"""A drafter is declared in one place: one registered in-process (and removed again) is a valid DecodeConfig choice,
runs in the decode loop, and shows up in the CLI's --drafter choices and help, with no other edit (the Playground's
half: tests/app/test_drafter_choices.py)."""

from __future__ import annotations

import argparse

import pytest
from conftest import PROMPTS
from toy_drafter import ToyDrafter

from engine import ConfigError, DecodeConfig, generate
from engine.__main__ import main
from engine.cli.parser import build_parser


@pytest.fixture
def toy(monkeypatch):
    """ToyDrafter in the registry for one test (monkeypatch takes it out again)."""
    from engine.drafters import DRAFTERS

    monkeypatch.setitem(DRAFTERS, ToyDrafter.kind, ToyDrafter)
    return ToyDrafter


def _drafter_action(command: str) -> argparse.Action:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return next(a for a in sub.choices[command]._actions if "--drafter" in a.option_strings)


def test_a_registered_drafter_is_in_the_clis_choices_and_help(toy):
    for command in ("run", "bench"):
        action = _drafter_action(command)
        assert "toy" in action.choices and "toy: proposes nothing" in action.help
    assert build_parser().parse_args(["run", "--prompt", "hi", "--drafter", "toy"]).drafter == "toy"


def test_a_registered_drafter_is_a_valid_config_and_runs(toy, tiny):
    cfg = DecodeConfig(drafter="toy", depth=3, max_new_tokens=4)
    trace = generate(tiny, PROMPTS[:1], cfg)
    assert trace.summary["new_tokens"] == 4 and trace.meta["draft_name"] == "toy"
    with pytest.raises(ConfigError, match="distribution to branch on"):
        DecodeConfig(drafter="toy", depth=2, tree_nodes=2, tree_topk=2)  # it declares branches = False


def test_once_removed_it_is_gone_everywhere(capsys):
    with pytest.raises(ConfigError, match="drafter must be one of 'ngram', 'model', 'ngram_eagle', 'eagle'; got 'toy'"):
        DecodeConfig(drafter="toy")
    assert "toy" not in _drafter_action("run").choices
    with pytest.raises(SystemExit) as exc:
        main(["run", "--prompt", "hi", "--drafter", "toy"])
    assert exc.value.code == 2 and "invalid choice: 'toy'" in capsys.readouterr().err
