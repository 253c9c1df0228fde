"""The CLI's choices are engine/options.py's enums and the drafter registry (not copies); its help says what a default
run does on a CPU."""

from __future__ import annotations

import argparse

from engine.cli.parser import build_parser
from engine.drafters import DRAFTERS
from engine.model.backend import BACKENDS, choose_backend
from engine.options import BackendKind, GraphMode, Mode, PolicyKind


def _options(command: str) -> dict[str, argparse.Action]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {opt: action for action in sub.choices[command]._actions for opt in action.option_strings}


def test_the_clis_choices_are_the_configs_enums():
    run, bench = _options("run"), _options("bench")
    assert run["--mode"].choices == [m.value for m in Mode]
    assert run["--drafter"].choices == bench["--drafter"].choices == list(DRAFTERS)
    assert run["--policy"].choices == [k.value for k in PolicyKind]
    assert run["--cuda-graphs"].choices == [g.value for g in GraphMode]
    assert run["--backend"].choices == [k.value for k in BackendKind] and tuple(run["--backend"].choices[1:]) == BACKENDS


def test_the_cuda_graphs_help_is_true_on_a_cpu():
    """Its default, "off", runs the device's default backend: on a CPU static KV buffers, not "eager, dynamic cache"."""
    text = _options("run")["--cuda-graphs"].help
    assert "dynamic cache" not in text and "off (default): no CUDA graphs" in text and text.startswith("deprecated")
    assert choose_backend("cpu", "auto", "off").static  # what "off" runs here: the fast pass over static buffers


def test_cuda_graphs_folds_into_backend_with_the_old_option_as_its_alias(tiny):
    """backend names every choice: "cuda_graphs_static" / "cuda_graphs_padded" are what cuda_graphs="static" /
    "padded" asked for, and the alias still runs the same passes, token for token."""
    from conftest import PROMPTS

    from engine import ConfigError, DecodeConfig, generate

    cpu = "cpu"
    for mode in ("static", "padded"):
        named, alias = choose_backend(cpu, "cuda_graphs_" + mode), choose_backend(cpu, "auto", mode)
        assert (named.name, named.graph_mode) == (alias.name, alias.graph_mode) == ("cuda_graphs", mode)
        assert choose_backend(cpu, "cuda_graphs_" + mode, mode).graph_mode == mode  # both, agreeing
        cfg = DecodeConfig(depth=2, drafter="model", max_new_tokens=8)
        new = generate(tiny, PROMPTS[:2], DecodeConfig.from_dict(cfg.to_dict() | {"backend": "cuda_graphs_" + mode}))
        old = generate(tiny, PROMPTS[:2], DecodeConfig.from_dict(cfg.to_dict() | {"cuda_graphs": mode}))
        assert new.output_ids == old.output_ids and new.meta["decode_passes"] == old.meta["decode_passes"]
        assert new.meta["backend"] == old.meta["backend"] == "cuda_graphs" and new.meta["kv_cache"] == "static"
    try:
        choose_backend(cpu, "cuda_graphs_static", "padded")
    except ConfigError as exc:
        assert "cannot go with backend='cuda_graphs_static'" in str(exc)
    else:
        raise AssertionError("a backend and an alias that disagree must be refused")
    tree = DecodeConfig(depth=2, drafter="model", tree_nodes=4, tree_topk=2).to_dict()
    for bad in ({"backend": "cuda_graphs_padded"}, {"cuda_graphs": "padded"}):
        try:
            DecodeConfig.from_dict(tree | bad)
        except ConfigError as exc:
            assert "tree drafting" in str(exc)
        else:
            raise AssertionError(f"{bad} with a tree must be refused")
