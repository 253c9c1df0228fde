"""The classroom kit's pure parts: the measurement schema and the shipped recordings, the worksheet, the
step-through of a recorded step, and the engine source shown beside it (no streamlit, no model)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from app.common import measurement
from app.common.engine_source import DRAFTER_SOURCES, STAGE_SOURCES, TREE_STAGE_SOURCES, SourceError, numbered_block, source_of
from app.lessons import registry
from app.lessons.registry import EXPERIMENTS
from app.views import stepthrough
from app.views.worksheet import guess_line, hand_calculation, prediction_rows, worksheet_html
from engine import Trace

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "assets" / "lessons"


# --- recordings ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [n for n in EXPERIMENTS if n != "one_step"])  # lesson 0's: tests/app/test_step_lesson.py
def test_every_lesson_ships_a_labelled_recording_at_its_default_settings(name):
    record = registry.load_record(RECORDINGS / f"{name}.json")
    assert record["experiment"] == name and record["settings"] == EXPERIMENTS[name].defaults()
    assert record["machine"] and record["date"].startswith("20") and record["dtype"] in ("float32", "bfloat16")
    # the label says under what load it was measured (a shared, noisy machine, or the load average itself)
    assert any(w in record["note"] for w in ("noisy", "DISTURBED", "load average"))
    experiment = EXPERIMENTS[name]
    m, s = record["measurement"], record["settings"]
    assert experiment.predict.measured(m, s) is not None  # the number a student predicts is in the recording
    assert experiment.predict.models(m, s)


def test_recordings_stay_small():
    total = sum(p.stat().st_size for p in RECORDINGS.iterdir())
    assert total < 300_000, total


def _record() -> dict:
    return json.loads((RECORDINGS / "more_flops.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.update(schema="speclab.lesson/9"), "recording.schema must be"),
        (lambda r: r.update(date="yesterday"), "recording.date must be a date"),
        (lambda r: r.update(experiment="rm -rf"), "unknown lesson experiment"),
        (lambda r: r.pop("machine"), "recording is missing machine"),
        (lambda r: r.pop("measurement"), "recording is missing measurement"),
        (lambda r: r.update(extra=1), "recording has unknown field 'extra'"),
        (lambda r: r["measurement"]["m"].update(speedup="fast"), "measurement.m.speedup must be a finite number"),
        (lambda r: r["measurement"]["ar"]["summary"].update(flops=None), "measurement.ar.summary.flops must be a finite"),
        (lambda r: r["measurement"]["seed"]["passes"][1].update(ms=True), r"passes\[1\].ms must be a finite number"),
        (lambda r: r["measurement"]["seed"].update(passes={}), "measurement.seed.passes must be a list"),
        (lambda r: r["measurement"]["spec"].update(drafter="x" * 400), "measurement.spec.drafter must be a string"),
        (lambda r: r["measurement"]["m"].update({"<b>": 1}), "has a key that is not a plain name"),
        (lambda r: r["settings"].update(depth="4"), "recording.settings.depth must be a finite number"),
        (lambda r: r["measurement"]["spec"].update(depth=10**20), "measurement.spec.depth must be between -1000000000000 and 1"),
    ],
)
def test_malformed_recordings_are_refused_naming_the_field(tmp_path, mutate, message):
    record = _record()
    mutate(record)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(measurement.MeasurementError, match=message):
        registry.load_record(path)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"schema": NaN}', "NaN"),
        (b"[" * 100 + b"]" * 100, "nested"),
        (b"\xff\xfe", "UTF-8"),
        (b"[1, 2", "not valid JSON"),
        (b"[]", "recording must be an object"),
    ],
)
def test_unparseable_recordings_are_refused_in_one_line(tmp_path, raw, message):
    path = tmp_path / "bad.json"
    path.write_bytes(raw)
    with pytest.raises(measurement.MeasurementError, match=message) as exc:
        registry.load_record(path)
    assert "\n" not in str(exc.value)


def test_oversized_or_missing_recordings_are_refused(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (measurement.MAX_RECORD_BYTES + 1))
    with pytest.raises(measurement.MeasurementError, match="larger than 256 KB"):
        registry.load_record(big)
    with pytest.raises(measurement.MeasurementError, match="no recording at nothing.json"):
        registry.load_record(tmp_path / "nothing.json")


def test_a_record_round_trips_and_rounds_numbers(tmp_path):
    record = _record()
    again = registry.make_record(
        record["experiment"],
        copy.deepcopy(record["measurement"]),
        machine="<i>cpu</i>",
        dtype="float32",
        note="noisy",
        settings=record["settings"],
        date="2026-12-01",
    )
    path = tmp_path / "r.json"
    registry.save_record(again, path)
    loaded = registry.load_record(path)
    assert loaded["machine"] == "<i>cpu</i>" and loaded["measurement"]["m"]["speedup"] == pytest.approx(
        record["measurement"]["m"]["speedup"], rel=1e-5
    )


# --- the worksheet ---------------------------------------------------------------------------------
def test_hand_calculation_follows_leviathans_formula():
    lines = hand_calculation(0.5, 2, 0.1)
    assert "α^(k+1) = 0.500^3.00 = 0.1250" in lines[1]
    assert "E[tokens per step] = (1 − 0.1250) ÷ (1 − 0.500) = 1.750" in lines[2]
    assert "speedup = E ÷ (k·c + 1) = 1.750 ÷ (2.00 × 0.100 + 1) = 1.458" in lines[3]
    assert "upper bound" in hand_calculation(0.5, 2, None)[0]
    assert all("______" in line for line in hand_calculation(None, None, None)[:3])  # no run: blanks
    assert "assumes a verify pass costs one plain step" in hand_calculation(0.5, 2, 0.1)[-1]


def test_a_hand_calculation_reproduces_from_the_digits_it_prints():
    """Lesson 2's sheet printed 0.957^3.78 = 0.8454 (it is 0.8469), computed from the unrounded α: every line now
    follows from the numbers printed before it, as a student with a calculator would work it."""
    import re

    lines = hand_calculation(0.95741, 2.7812, 0.00412)
    a, k, c = (float(x) for x in re.findall(r"α = ([\d.]+), k = ([\d.]+).*c = ([\d.]+)", lines[0])[0])
    power = float(re.findall(r"= ([\d.]+)$", lines[1])[0])
    assert power == pytest.approx(a ** (k + 1), abs=5e-5)
    e = float(re.findall(r"= ([\d.]+)$", lines[2])[0])
    assert e == pytest.approx((1 - power) / (1 - a), abs=2e-3)
    assert float(re.findall(r"= ([\d.]+)$", lines[3])[0]) == pytest.approx(e / (k * c + 1), abs=5e-4)


def test_prediction_rows_and_the_guess_line():
    rows = prediction_rows(2.0, 4.0, [("model", 3.0), ("none", None)])
    assert [r["what"] for r in rows] == ["your guess", "measured", "model", "none"]
    assert rows[0]["value"] == "2.00×" and rows[0]["vs measured"] == "0.50× the measured"
    assert rows[3]["value"] == "—"
    assert guess_line(2.0, 4.0) == "You guessed 2.00×; this run measured 4.00× (your guess was 50% off)."
    assert guess_line(None, 4.0) is None
    # a count (lesson 0's kept drafts) reads as one: "2 drafts", not "2.00 drafts"; its models keep their decimals
    counted = prediction_rows(2.0, 3.0, [("Leviathan", 1.83)], " drafts", whole=True)
    assert [r["value"] for r in counted] == ["2 drafts", "3 drafts", "1.83 drafts"]
    assert guess_line(2.0, 3.0, " drafts", whole=True) == "You guessed 2 drafts; this run measured 3 drafts (your guess was 33% off)."
    assert guess_line(1.0, 1.0, " drafts", whole=True) == "You guessed 1 draft; this run measured 1 draft (your guess was 0% off)."


def test_worksheet_escapes_every_string():
    evil = "<script>alert(1)</script>"
    page = worksheet_html(evil, evil, prediction_rows(1.0, 2.0, [(evil, 1.0)]), [(evil, evil)], evil, [evil])
    assert "<script>" not in page and page.count("&lt;script&gt;") == 8  # title twice, question, row, number+value, source, calc
    assert page.startswith("<!doctype html>") and "Leviathan" in page and "Barrow" in page


# --- the step-through ------------------------------------------------------------------------------
def test_step_through_of_the_recorded_step():
    trace = Trace.from_json(RECORDINGS / "step-through.json")  # the strict loader
    index = stepthrough.interesting_step(trace)
    assert index is not None
    stages = stepthrough.stages(trace, index)
    assert [s.title for s in stages] == list(stepthrough.STAGES)
    q = trace.steps[index].seqs[0]
    k, a = len(q.drafted), q.num_accepted
    assert len(stages[0].table) == k and len(stages[1].table) == k
    assert f"Accepted {a} of {k}" in stages[2].lines[1]
    assert (q.next_kind == "bonus") == stages[3].lines[0].startswith("All")
    assert f"drops the {k - a} rejected position(s)" in stages[4].lines[1]
    assert f"{trace.steps[index].tokens_per_pass} tokens" in stages[1].lines[0]


def test_step_through_of_the_recorded_tree_step():
    """The draft-tree recording: stages read from the row's tree (nodes, parents, q, p, the accepted path)."""
    trace = Trace.from_json(RECORDINGS / "step-through-tree.json")
    index = stepthrough.interesting_step(trace)
    q = trace.steps[index].seqs[0]
    assert q.tree is not None and q.num_accepted >= 2 and q.num_rejected  # a path that walks, and a rejection
    stages = stepthrough.stages(trace, index)
    assert [s.title for s in stages] == list(stepthrough.TREE_STAGES)
    nodes, a = len(q.tree.ids), q.num_accepted
    assert len(stages[0].table) == nodes and stages[0].table[0]["parent"] == "root (last token)"
    assert [r["target p"] for r in stages[1].table] == [f"{p:.3f}" for p in q.tree.p]
    assert f"Accepted a path of {a} of the {nodes} nodes" in stages[2].lines[1]
    assert sum(r["on the path"] == "yes" for r in stages[2].table) == a
    assert f"{trace.steps[index].tokens_per_pass} tokens" in stages[1].lines[0]
    assert f"the {a} node(s) on the accepted path" in stages[4].lines[1]


def test_engine_source_for_every_stage_is_found_without_importing_torch():
    assert len(TREE_STAGE_SOURCES) == len(STAGE_SOURCES) == len(stepthrough.TREE_STAGES)
    for stage in STAGE_SOURCES + TREE_STAGE_SOURCES:
        for relpath, qualname, block in stage:
            code = source_of(relpath, qualname)
            assert code.startswith(("def ", "@")), qualname
            if block:
                assert numbered_block(code, block).startswith(f"# {block}.")
    for relpath, qualname in DRAFTER_SOURCES.values():
        assert "def propose" in source_of(relpath, qualname)
    step = source_of("decoding/decode.py", "Decoder.step")
    assert "draft = self.drafter.propose" in numbered_block(step, 1) and "verify(" not in numbered_block(step, 1)
    assert "self.roll_back" in numbered_block(step, 4)
    assert "self.target.keep(" in source_of("decoding/decode.py", "Decoder.roll_back")
    with pytest.raises(SourceError, match="Decoder.nothing was not found"):
        source_of("decoding/decode.py", "Decoder.nothing")
    with pytest.raises(SourceError, match="no '# 9.' step"):
        numbered_block(step, 9)


def test_a_warm_up_is_paid_once_per_pass_shape():
    """Contenders that run the same kernels at the same sizes share one warm-up (app/lessons/kit/runs.py `shapes`):
    plain decoding once per rows per pass; a fixed and a batch-table policy with one drafter and depth alike; goodput
    (which learns its prices as it runs), another drafter, a tree or another batch each warmed on their own."""
    from app.lessons.kit.runs import Job, shapes
    from engine import DecodeConfig

    eight = [f"prompt {i}" for i in range(8)]
    plain = Job(eight, DecodeConfig(mode="autoregressive"))
    fixed = Job(eight, DecodeConfig(depth=3, drafter="ngram"))
    table = Job(eight, DecodeConfig(depth=3, drafter="ngram", policy="batch_table", batch_table=((1, 8, 3),)))
    off = Job(eight, DecodeConfig(depth=3, drafter="ngram", policy="off_above_batch", disable_by_batch_size=2))
    assert shapes(fixed) == shapes(table) == shapes(off) != shapes(plain) == shapes(Job(eight, DecodeConfig(depth=0)))
    others = [
        Job(eight, DecodeConfig(depth=3, drafter="ngram", policy="goodput")),
        Job(eight, DecodeConfig(depth=3, drafter="model")),
        Job(eight, DecodeConfig(depth=3, drafter="model", tree_nodes=8, tree_topk=2)),
        Job(eight[:4], DecodeConfig(depth=3, drafter="ngram")),
        Job(eight, DecodeConfig(depth=3, drafter="ngram"), sequential=True),
    ]
    assert len({shapes(j) for j in [fixed, plain, *others]}) == 2 + len(others)


def test_the_warm_up_names_its_contenders_in_the_pages_words():
    """The runs key their lanes "16 ar", "ngram spec"; the caption says "plain, batch 16" and what the lookup ran on,
    and leaves names already in words alone."""
    from app.lessons.kit.show import warm_name

    assert warm_name("16 ar") == "plain, batch 16" and warm_name("1 spec") == "speculative, batch 1"
    assert warm_name("ar, batch 8") == "plain, batch 8" and warm_name("ar") == "plain"
    assert warm_name("ngram spec") == "n-gram lookup, copy-this-text prompts"
    assert warm_name("goodput (k ≤ 6), batch 4") == "goodput (k ≤ 6), batch 4"
