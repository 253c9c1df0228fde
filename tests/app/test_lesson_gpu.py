"""The Lessons page's GPU panel (app/lessons/kit/gpu.py, show.show_gpu_panel): the recorded H200 curves load through the
engine's strict reader and carry machine, date, source and "random weights in real shapes"; the Predictor's numbers
are labelled as a model and computed from engine/roofline, not typed in; cited results name their source; a broken
recording is one warning, not a crash; and every lesson draws a chart and a panel naming the GPU."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from app.lessons import registry
from app.lessons.kit import gpu as G
from app.lessons.kit.page import chosen_settings
from app.lessons.l5_adaptive import gate_lines
from app.lessons.registry import EXPERIMENTS
from app.views import h200
from app.views.h200 import figure, why_not
from engine.roofline import predictor
from engine.roofline.architectures import architecture
from engine.roofline.gpus import gpu

ROOT = Path(__file__).resolve().parents[2]
LESSONS = ("memory_bound", "more_flops", "past_the_ridge", "turn_it_off", "adaptive", "by_load", "width")


def test_shipped_h200_curves_load_with_their_labels():
    curves, problems = h200.recorded_curves()
    assert problems == []
    assert {c.source for c in curves} == {"docs/measurements/h200-gpu_graphs.json", "docs/measurements/h200-gpu_bench.json"}
    assert {(c.shape, c.mode) for c in curves if "graphs" in c.source} == {
        (s, m) for s in ("smollm2-1.7b", "qwen2.5-7b") for m in ("graph", "eager")
    }
    for c in curves:
        assert "NVIDIA H200" in c.label and "2026-11-30" in c.label and "random weights in real shapes" in c.label
        assert c.source in c.label and list(c.tokens) == sorted(c.tokens) and len(c.tokens) == len(c.ms)


def test_curve_numbers_are_the_files_numbers():
    qwen = next(c for c in h200.recorded_curves()[0] if c.shape == "qwen2.5-7b" and c.mode == "graph")
    raw = json.loads((ROOT / "docs/measurements/h200-gpu_graphs.json").read_text())
    passes = next(s for s in raw["shapes"] if s["shape"] == "qwen2.5-7b")["passes"]
    one = next(p for p in passes if p["batch"] == 1 and p["new_tokens"] == 1)
    assert qwen.ms[0] == one["graph_ms"]
    # 128 tokens per pass were timed two ways (1 row x 128, 8 rows x 16): the curve shows their median
    at_128 = [p["graph_ms"] for p in passes if p["batch"] * p["new_tokens"] == 128]
    at = qwen.ms[qwen.tokens.index(128)] / qwen.ms[0]
    assert len(at_128) == 2 and at == pytest.approx(sum(at_128) / 2 / one["graph_ms"])
    assert round(qwen.ms[0], 2) == 6.62 and 1.1 < at < 1.25 and 3 not in qwen.tokens  # flat: 128 tokens cost ~1.2x one


@pytest.mark.parametrize(
    "content, why",
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"device": "x", "dtype": "int8", "date": "2026-11-30", "shapes": []}), "dtype"),
        (json.dumps([1]), "must be an object"),
    ],
)
def test_a_bad_recording_is_one_line_and_the_others_still_load(tmp_path, content, why):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    good = ROOT / "docs/measurements/h200-gpu_graphs.json"
    curves, problems = h200.recorded_curves([bad, good])
    assert len(problems) == 1 and why in problems[0] and "\n" not in problems[0]
    assert curves and all("graphs" in c.source for c in curves)
    assert h200.recorded_curves([tmp_path / "missing.json"])[1][0].startswith("missing.json")


def test_the_seed_framing_is_computed_from_the_gpu_table():
    f = G.seed_framing()
    costs, h100 = architecture("27B").costs("bfloat16"), gpu("H100-SXM")
    assert f["stream_ms"] == pytest.approx(1000 * costs.weight_bytes / h100.bandwidth)
    assert 50 < f["weight_gb"] < 58 and 15 < f["stream_ms"] < 17.5 and f["bandwidth_tb_s"] == pytest.approx(3.35)
    text = G.seed_sentence()
    assert "HBM" in text and "on-chip" in text and f"{f['stream_ms']:.0f} ms" in text and "MoE" in text


@pytest.mark.parametrize("lesson", LESSONS + ("one_step",))
def test_model_rows_are_labelled_model_and_follow_the_settings(lesson):
    settings = {"depth": 4, "batch": 16, "nodes": 24, "k": 4, "n": 8, "largest": 64}
    rows = G.model_rows(EXPERIMENTS[lesson], settings)
    assert rows and all("model, not a measurement" in next(iter(r)) for r in rows)
    assert all(r["predicted ms"] > 0 and r["regime (model)"] in ("overhead", "memory", "compute") for r in rows)
    assert "model, not a measurement" in G.model_label() and "H100" in G.model_label()
    fig = G.model_figure(EXPERIMENTS[lesson], settings)
    assert "Model, not a measurement" in fig.layout.title.text and fig.data
    assert "H100" in fig.layout.title.text and "H200" in fig.layout.title.text  # both GPUs drawn, both named
    marks = [t for t in fig.data if t.legendgroup == "passes"]  # the lesson's passes: one legend entry says what ◆ is
    assert len(marks) == len(rows) and [t.showlegend for t in marks].count(True) == 1


def test_model_rows_price_the_lessons_verify_pass():
    rows = G.model_rows(EXPERIMENTS["past_the_ridge"], {"depth": 4, "batch": 16})
    verify = next(r for r in rows if r["pass (model, not a measurement)"] == "verify k = 4, batch 16")
    assert verify["tokens per pass"] == 80
    costs, roof = architecture("8B").costs("bfloat16"), predictor.Roof.from_gpu(gpu("H100-SXM"), "bfloat16")
    assert verify["predicted ms"] == round(predictor.pass_ms(costs, roof, 16, 5, G.MODEL_CONTEXT), 2)
    tree = next(r for r in G.model_rows(EXPERIMENTS["width"], {"nodes": 24, "batch": 16}) if r["tokens per pass"] == 400)
    assert tree["pass (model, not a measurement)"] == "tree of 24, batch 16"


def test_cited_results_name_their_source_and_only_where_acceptance_matters():
    assert G.cited_rows(EXPERIMENTS["memory_bound"]) == []
    rows = G.cited_rows(EXPERIMENTS["past_the_ridge"])
    assert rows and all("https://" in r["source"] for r in rows)
    assert {"158.34 tokens/s", "373.25 tokens/s", "1.38×"} <= {r["value"] for r in rows}


def test_every_lesson_draws_a_chart_and_a_gpu_panel_naming_the_gpu():
    streamlit = pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    assert streamlit

    def page():
        import streamlit as st

        from app.lessons import registry
        from app.lessons.kit import show
        from app.lessons.kit.page import show_gpu_panel

        for name, e in registry.EXPERIMENTS.items():
            if e.walkthrough is not None:  # lesson 0: the step-through, not a chart
                continue
            rec = registry.load_record(f"assets/lessons/{name}.json")
            with st.container(key=f"res_{name}"):
                show.draw(e, rec["measurement"], rec["settings"], f"recorded on {rec['machine']}, {rec['date']}")
            with st.container(key=f"gpu_{name}"):
                label = f"recorded on {rec['machine']}, {rec['date']}"
                show_gpu_panel(name, rec["settings"], "", {"measurement": rec["measurement"], "label": label})

    at = AppTest.from_function(page, default_timeout=180).run()
    assert not at.exception, [e.value for e in at.exception]
    for name in LESSONS:
        result = next(b for b in at.main.children.values() if getattr(b, "key", None) == f"res_{name}")
        panel = next(b for b in at.main.children.values() if getattr(b, "key", None) == f"gpu_{name}")
        assert result.get("plotly_chart"), f"{name}: no chart of the result"
        texts = " ".join(str(e.value) for e in panel.markdown) + " ".join(str(e.value) for e in panel.caption)
        assert panel.get("plotly_chart") and "H200" in texts and "H100" in texts and "model, not a measurement" in texts.lower()
        assert "Long contexts keep large passes memory-bound" in texts
        own = registry.EXPERIMENTS[name].retimed is not None  # a lesson of passes draws its own GPU view, its own heading
        assert own or "re-timed from H200 recordings, not run on a GPU" in texts
        assert own or "cannot be re-timed" in texts or "re-timed" in texts.split("Your run on an H200", 1)[1]
        assert name != "memory_bound" or "**Your passes on an H200** (re-timed from H200 recordings, not run on a GPU)" in texts
        assert name != "long_context" or "(a model, not a measurement" in texts
        rec = registry.load_record(f"assets/lessons/{name}.json")  # the re-timed view is drawn, or the panel says why not
        m, label = rec["measurement"], f"recorded on {rec['machine']}, {rec['date']}"
        drawn = name == "memory_bound" or figure(m, label) is not None
        assert len(panel.get("plotly_chart")) == (3 if drawn else 2), name
        assert drawn or why_not(m, label) in texts, name
        assert name != "adaptive" or not drawn or all(line in texts for line in gate_lines(m))
        assert not panel.warning


def test_labels_on_the_log_axes_sit_at_their_values():
    """On a log x axis a shape takes the data value but an annotation takes its log10: every marker's label sits
    at log10 of its line's x (plotly's add_vline(annotation_text=...) put it at 10**295 and broke the axis)."""
    curves, _ = h200.recorded_curves()
    for fig in (G.model_figure(EXPERIMENTS["past_the_ridge"], {"batch": 16, "depth": 4}), G.curves_figure(curves, marks=[5, 80])):
        lines = sorted(float(shape.x0) for shape in fig.layout.shapes)
        labels = sorted(float(a.x) for a in fig.layout.annotations if a.xref == "x")
        assert lines and labels == pytest.approx([math.log10(x) for x in lines])


def test_the_panel_marks_the_passes_the_run_chose():
    """A knob left at 0 ("from this machine's curve") takes the value the shown run recorded, so the GPU panel's
    passes are the ones the student saw; a knob the student set is kept."""

    result = {"measurement": {"chosen": {"room": 4, "depth": 3, "batch": 4, "nodes": 6}}, "label": "recorded"}
    assert chosen_settings({"depth": 0, "batch": 0}, result) == {"depth": 3, "batch": 4, "room": 4, "nodes": 6}
    assert chosen_settings({"depth": 2, "batch": 0}, result)["depth"] == 2
    assert chosen_settings({"depth": 0}, None) == {"depth": 0}
    assert chosen_settings({"depth": 0}, {"measurement": {"ar": {}}}) == {"depth": 0}
    passes = G.lesson_passes(EXPERIMENTS["width"], chosen_settings({"nodes": 0, "topk": 0, "batch": 0}, result))
    assert ("tree of 6, batch 4", 4, 7) in passes
