"""Every lesson's experiment runs on the real embedded pair at small settings, and what it returns fits the
recording schema, so a live run and a recorded one go through the same checks and drawing code. Lessons 1
and 2 run live through the page in tests/app/test_app_lessons.py; lessons 3-6 run here, each shrunk."""

from __future__ import annotations

import pytest

from app.lessons import experiments as lx
from app.lessons import measurement
from engine import load_pair
from engine.hardware import probe


@pytest.fixture(scope="module")
def live():
    pair = load_pair()
    return pair, probe(pair.device, pair.dtype, quick=True)


SMALL = {  # each experiment's settings, shrunk (the knobs' own options where one fits)
    "memory_bound": {"context": 64, "largest": 16},
    "more_flops": {"depth": 2, "tokens": 16},
    "past_the_ridge": {"depth": 1, "batch": 4, "tokens": 8},
    "turn_it_off": {"batch": 8, "n": 4, "tokens": 16},
    "adaptive": {"depth": 2, "conf": 0.5},
    "by_load": {"k": 2},
    "width": {"nodes": 8, "topk": 4, "batch": 4},
}


def test_small_settings_are_the_experiments_own_knobs():
    for name, settings in SMALL.items():
        experiment = lx.EXPERIMENTS[name]
        assert set(settings) == set(experiment.defaults()), name
        for knob in experiment.knobs:
            assert settings[knob.key.split("_", 1)[1]] in knob.options, knob.key


@pytest.mark.slow
@pytest.mark.parametrize("name", ["past_the_ridge", "turn_it_off", "adaptive", "by_load", "width"])
def test_experiment_runs_live_and_fits_the_schema(live, monkeypatch, name):
    pair, hw = live
    monkeypatch.setattr(lx, "GATE_BATCHES", ((1, 8), (2, 8)))
    monkeypatch.setattr(lx, "LOAD_BATCHES", (1, 2))
    monkeypatch.setattr(lx, "LOAD_TOKENS", 4)
    monkeypatch.setattr(lx, "WIDTH_TOKENS", 8)
    monkeypatch.setattr(lx, "WIDTH_PROMPTS", 2)
    experiment = lx.EXPERIMENTS[name]
    m = measurement.check_measurement(name, experiment.run(pair, hw, SMALL[name]))
    measured = experiment.predict.measured(m, SMALL[name]) if name != "by_load" else None
    if name == "by_load":  # the prediction reads batch 16, which the shrunk grid leaves out
        assert {r["batch"] for r in m["rows"]} == {1, 2} and len(m["rows"]) == 10
    else:
        assert measured is not None and measured > 0
    if name == "adaptive":
        assert [b["batch"] for b in m["batches"]] == [1, 2]
    if name == "width":  # plain, chain and tree at batch 1 and 4; the tree's pass carries batch x (nodes + 1)
        from app.lessons import conclusions

        assert [(r["batch"], r["contender"], r["tokens_per_pass"]) for r in m["rows"]] == [
            (1, "plain decoding", 1),
            (1, "chain", 5),
            (1, "tree", 9),
            (4, "plain decoding", 4),
            (4, "chain", 20),
            (4, "tree", 36),
        ]
        lines = conclusions.width_conclusion(m)
        assert len(lines) == 3 and lines[0].startswith("Batch 1: the tree (8 nodes, top-4, depth 4) ran")
        assert len(conclusions.width_table(m)) == 6
