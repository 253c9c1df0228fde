"""Lesson 8's numbers (app/lessons/l8_long_context.py) on its shipped recording and on doctored copies: one ratio per
context read by the chart, the table, the notes and the prediction alike; the notes follow the measurement; the GPU
view's model turns the verify pass back into a plain pass's price as the context grows, leaving out what cannot fit."""

from __future__ import annotations

import copy
from pathlib import Path

from app.common import measurement
from app.lessons import l8_long_context as L8
from app.lessons import registry

ROOT = Path(__file__).resolve().parents[2]
REC = registry.load_record(ROOT / "assets" / "lessons" / "long_context.json")


def test_one_ratio_per_context_everywhere():
    m, s = REC["measurement"], REC["settings"]
    short, long_ = L8.contexts(m)
    assert short == L8.SHORT and long_ == s["context"]
    ratios = {c: round(L8.over_one(m, c).ratio, 2) for c in (short, long_)}
    assert [r["verify ÷ one-token pass"] for r in L8.table(m, s)] == [ratios[short], ratios[long_]]
    assert f"{ratios[short]:.2f}×" in L8.notes(m, s)[0] and f"{ratios[long_]:.2f}×" in L8.notes(m, s)[0]
    assert round(L8.RECORD.predict.measured(m, s), 2) == ratios[long_]
    labels = L8.figure(m, s).data[-1].text  # the verify bars' labels
    assert list(labels) == [f"{ratios[short]:.2f}× one", f"{ratios[long_]:.2f}× one"]


def test_the_notes_follow_the_measurement():
    m = copy.deepcopy(REC["measurement"])
    _, long_ = L8.contexts(m)
    one, verify = L8.pair_at(m, long_)
    verify["ms_runs"] = measurement.spread([1.1 * v for v in one["ms_runs"]["values"]])  # the verify pass nearly free
    assert "priced as a pass inside the room is" in L8.notes(m, {})[-1]
    verify["ms_runs"] = measurement.spread([3.0 * v for v in one["ms_runs"]["values"]])
    assert "still priced above a pass inside the room" in L8.notes(m, {})[-1] and "3.00×" in L8.notes(m, {})[0]


def test_the_gpu_model_prices_the_verify_pass_back_to_a_plain_pass_as_the_context_grows():
    rows = L8.gpu_rows(3)
    ratios = [r["verify ÷ plain"] for r in rows]
    assert ratios == sorted(ratios, reverse=True) and ratios[0] > 1.25 and ratios[-1] == 1.0
    contexts = [r["context (model, not a measurement)"] for r in rows]
    assert contexts == [c for c in L8.GPU_CONTEXTS if c <= contexts[-1]] and contexts[-1] < L8.GPU_CONTEXTS[-1]  # too big: out


def test_the_servers_preparation_files_the_default_contexts_apart_from_the_prompt_batches(tiny, monkeypatch):
    """Lesson 8's `prepare` (run by the server's preload) prefills the default run's contexts into the pair's context
    store, which the lessons' prompt batches never share, so no other lesson's rounds push them out before lesson 8's
    first run, which then reads every context warm."""
    from app.lessons.kit import runs
    from engine.decoding.context_passes import context_rounds

    monkeypatch.setattr(L8, "SHORT", 16)
    monkeypatch.setattr(L8, "LONG", 64)
    store, prompts = runs.context_store(tiny), runs.prompt_store(tiny)
    store.clear()
    before = len(prompts)
    L8.prepare(tiny)
    assert len(store) == 2 and len(prompts) == before and store is not prompts and not store.prompts
    hits = store.hits
    context_rounds(tiny, 2, [1, 2], [16, 64], rounds=1, repeats=1, prefix_cache=store)
    assert store.hits == hits + 2
