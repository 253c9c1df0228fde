"""The CLI's choices are engine/config.py's enums (not copies), and its help says what a default run does on a CPU."""

from __future__ import annotations

import argparse

from engine.__main__ import build_parser
from engine.config import BackendKind, DrafterKind, GraphMode, Mode, PolicyKind
from engine.model.backend import BACKENDS, choose_backend


def _options(command: str) -> dict[str, argparse.Action]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {opt: action for action in sub.choices[command]._actions for opt in action.option_strings}


def test_the_clis_choices_are_the_configs_enums():
    run, bench = _options("run"), _options("bench")
    assert run["--mode"].choices == [m.value for m in Mode]
    assert run["--drafter"].choices == bench["--drafter"].choices == [k.value for k in DrafterKind]
    assert run["--policy"].choices == [k.value for k in PolicyKind]
    assert run["--cuda-graphs"].choices == [g.value for g in GraphMode]
    assert run["--backend"].choices == [k.value for k in BackendKind] and tuple(run["--backend"].choices[1:]) == BACKENDS


def test_the_cuda_graphs_help_is_true_on_a_cpu():
    """Its default, "off", runs the device's default backend: on a CPU static KV buffers, not "eager, dynamic cache"."""
    text = _options("run")["--cuda-graphs"].help
    assert "dynamic cache" not in text and text.startswith("off (default)")
    assert choose_backend("cpu", "auto", "off").static  # what "off" runs here: the fast pass over static buffers
