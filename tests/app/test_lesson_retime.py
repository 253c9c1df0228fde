"""A lesson's own run re-timed from the H200 recordings (app/views/h200.py), shown in the GPU panel, and the
panel's numbers (knee, KV ridge) computed from the recordings and the model; frame()'s layout; the Predictor's
explanation of a win past the weights-only ridge. Lanes are built from the shipped real traces (assets/traces/)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import plotly.graph_objects as go
import pytest

from app.lessons.kit import gpu
from app.lessons.registry import EXPERIMENTS
from app.views import h200
from app.views.bars import FOOT_PX, LABEL_CHARS, LEGEND_LINE_PX, chunks, frame, labelled
from app.views.h200 import (
    CEILING,
    DRAFTING,
    LABEL,
    MEASURED,
    MODEL,
    base_of,
    figure,
    h200_lane,
    lanes_of,
    rows,
)
from app.views.predictor import kv_ridge_text, ridge_sentence
from engine import Trace
from engine.roofline import draft_prices as drafting
from engine.roofline import predictor
from engine.roofline.architectures import architecture
from engine.roofline.gpus import gpu as chip

ROOT = Path(__file__).resolve().parents[2]


def lane_of(name: str) -> dict:
    """A lane as app/common/lane_stats.py writes it: the decode steps' pass shapes, tokens and time."""
    trace = Trace.from_json(ROOT / "assets/traces" / f"{name}.json")
    steps = [s for s in trace.steps if s.kind == "decode"]
    shapes = Counter((s.tokens_per_pass, s.depth) for s in steps)
    tokens = sum(len(q.emitted) for s in steps for q in s.seqs)
    seconds = sum(s.step_ms for s in steps) / 1000
    spec = trace.config.get("mode") == "speculative"
    return {
        "passes": [[n, k, c] for (n, k), c in sorted(shapes.items())],
        "decode_tokens": tokens,
        "decode_s": seconds,
        "decode_tokens_per_s": tokens / seconds,
        "drafter": str(trace.config.get("drafter", "")) if spec else "",
    }


def qwen_graph_ms() -> dict[int, float]:
    """The recorded Qwen2.5-7B CUDA-graph pass times, median per tokens per pass, read straight from the file."""
    raw = json.loads((ROOT / "docs/measurements/h200-gpu_graphs.json").read_text())
    passes = next(s for s in raw["shapes"] if s["shape"] == "qwen2.5-7b")["passes"]
    by: dict[int, list[float]] = {}
    for p in passes:
        by.setdefault(p["batch"] * p["new_tokens"], []).append(p["graph_ms"])
    return {t: sorted(v)[len(v) // 2] if len(v) % 2 else sum(sorted(v)[len(v) // 2 - 1 : len(v) // 2 + 1]) / 2 for t, v in by.items()}


def test_a_plain_run_is_priced_on_the_recorded_h200_passes():
    ar = lane_of("model-open-ar")
    ms = qwen_graph_ms()
    one, four = ms[1], ms[4]
    expected_ms = sum(c * (one + (four - one) * (n - 1) / 3) for n, _, c in ar["passes"])  # batch-1 or -2 passes: on the 1..4 line
    rate, note = h200_lane(ar).rate, h200_lane(ar).note
    assert rate == pytest.approx(ar["decode_tokens"] / (expected_ms / 1000))
    assert "no drafting" in note and rate != pytest.approx(ar["decode_tokens_per_s"], rel=0.25)  # the H200 passes, not the CPU's


def test_drafting_is_priced_measured_for_the_ngram_lookup_modelled_for_the_drafters_and_a_ceiling_otherwise():
    model, ngram = lane_of("model-open-spec"), lane_of("ngram-copy-spec")
    priced = h200_lane(model)
    assert priced.rate and priced.drafting == MODEL and priced.draft_ms > 0
    assert "model, not a measurement" in priced.note and "draft model's own shape" in priced.note
    ceiling = h200_lane(model, drafter="")  # no drafter named: nothing to price its drafting with
    assert ceiling.drafting == CEILING and ceiling.draft_ms == 0 and ceiling.rate > priced.rate
    assert "drafting not priced" in ceiling.note and "ceiling" in ceiling.note
    assert priced.target_ms == pytest.approx(ceiling.target_ms)  # the same target passes, drafting added
    rate, note = h200_lane(ngram).rate, h200_lane(ngram).note
    assert rate and "h200-gpu_bench.json" in note and "2026-11-30" in note and "host CPU" in note
    prices = drafting.prices("ngram")  # per drafted position: a step at depth k costs k of them
    expected = sum(prices.price(max(1, n // (k + 1))) * k * c for n, k, c in ngram["passes"] if k)
    assert h200_lane(ngram).draft_ms == pytest.approx(expected) and h200_lane(ngram).drafting == MEASURED
    unpriced = h200_lane(ngram, drafter="").rate  # the same steps without the recorded lookup time
    assert rate < unpriced


def test_the_drafters_own_shapes_are_priced_by_the_predictor_on_the_h200():
    eagle, shape = drafting.eagle_costs()
    shipped = Path(__file__).resolve().parents[2] / "assets" / "eagle" / "draft_vocab.json"
    vocab = len(json.loads(shipped.read_text())["ids"])  # the head's cut vocabulary: its output rows
    assert eagle.n_layers == 1 and eagle.vocab_rows == vocab == 9216 and "576 wide" in shape
    draft, shape = drafting.draft_model_costs()
    assert draft.n_layers == 5 and "256 wide" in shape
    roof = predictor.Roof.from_gpu(chip("H200"), "bfloat16")
    for name, costs in (("eagle", eagle), ("model", draft)):
        p = drafting.prices(name)
        assert not p.measured and p.per_position and "model, not a measurement" in p.label
        assert p.price(8) == pytest.approx(predictor.pass_ms(costs, roof, 8, 1, 0, "graph"))
    assert drafting.prices("ngram").measured and drafting.prices("something else") is None


def test_what_cannot_be_re_timed_says_why():
    assert h200_lane({"summary": {}}).rate is None and "not re-timed" in h200_lane({}).note
    far = h200_lane({"passes": [[1, 0, 3], [9000, 0, 1]], "decode_tokens": 4})
    rate, note = far.rate, far.note
    assert rate is None and "never extrapolated" in note and "9000" in note
    assert figure({"ar": {"summary": {}}}) is None
    seed = {"context": 150, "passes": [{"label": "a batch", "ms": 1.0}]}  # Barrow's seed passes: not a lane
    assert lanes_of({"seed": seed, "ar": lane_of("model-open-ar")})[0]["name"] == "plain"
    assert len(lanes_of({"seed": seed})) == 0 and h200_lane(seed | {"decode_tokens": 3}).rate is None


def test_every_lane_of_a_nested_measurement_is_found_with_its_batch_and_its_plain_lane():
    ar, spec, ngram_ar, ngram_spec = (lane_of(n) for n in ("model-open-ar", "model-open-spec", "ngram-copy-ar", "ngram-copy-spec"))
    m = {
        "runs": [{"batch": 1, "ar": ar, "spec": spec}, {"batch": 16, "ar": ar, "spec": spec}],
        "ngram": {"ar": ngram_ar, "spec": ngram_spec},
        "rows": [{"batch": 4, "contender": "plain decoding", **ar}, {"batch": 4, "contender": "EAGLE head", **spec}],
    }
    entries = lanes_of(m)
    assert [(e["name"], e["batch"]) for e in entries] == [
        ("plain", 1),
        ("speculative", 1),
        ("plain", 16),
        ("speculative", 16),
        ("n-gram · plain", None),
        ("n-gram · speculative", None),
        ("plain decoding", 4),
        ("EAGLE head", 4),
    ]
    assert base_of(entries[5], entries)["lane"] is ngram_ar and base_of(entries[3], entries) is entries[2]
    rows = h200.rows(m)
    assert rows[1]["× plain on the H200 (re-timed)"] == round(h200_lane(spec).rate / h200_lane(ar).rate, 2)
    assert rows[1]["× plain here"] == round(spec["decode_tokens_per_s"] / ar["decode_tokens_per_s"], 2)


def test_the_figure_labels_the_re_timed_bars_and_names_the_recording():
    m = {"ar": lane_of("ngram-copy-ar"), "spec": lane_of("ngram-copy-spec")}
    fig = figure(m, "recorded on AMD EPYC (2 threads), 2026-12-01")
    names = {t.name for t in fig.data if t.showlegend is not False}
    assert any(n.startswith(LABEL + "; drafting priced") for n in names) and "this machine (measured)" in names
    title = fig.layout.title.text  # where each side was measured, under the title, so no legend entry runs off the chart
    assert "NVIDIA H200" in title and "2026-11-30" in title and "zero-context" in title and "AMD EPYC (2 threads)" in title


def test_the_knee_is_computed_from_the_recorded_curve_and_the_lesson_texts_quote_it():
    curve = h200.knee_curve(h200.recorded_curves()[0])
    knee = h200.knee_tokens(curve)
    ms = qwen_graph_ms()
    assert 128 < knee < 256 and ms[128] < 1.5 * ms[1] <= ms[256]
    assert h200.KNEE_FACTOR == 1.5 and f"about {knee:.0f} tokens per pass" in h200.knee_sentence(h200.recorded_curves()[0])
    for lesson in ("01-memory-bound.md", "03-past-the-ridge.md"):
        text = (ROOT / "lessons" / lesson).read_text()
        gpu_section = text.split("## On a GPU", 1)[1].split("\n## ", 1)[0]
        words = " ".join(gpu_section.split())
        assert "knee" in words and f"about {knee:.0f}" in words, lesson
        assert "190" not in text and "~190" not in text, lesson


def test_the_panel_states_the_kv_ridge_from_the_model():
    k = gpu.kv_ridge("H100-SXM", "8B", 1024, 4)
    costs = architecture("8B").costs("bfloat16")
    assert k["kv_kb_per_token"] == pytest.approx(costs.kv_bytes_per_token / 1e3) and round(k["weights_only"]) == 295
    text = gpu.kv_sentence("H100-SXM", "8B", 1024, 4)
    assert "585 tokens per pass" in text and "never, at any batch" in text and "Long contexts keep large passes memory-bound" in text
    assert "zero context" in gpu.CAN_SHOW and all("zero context" in c.name for c in h200.recorded_curves()[0] if not c.context)
    one_token = gpu.seed_framing()["one_token_flops_ms"]
    assert f"{one_token:.2g} ms" in gpu.seed_sentence() and "0.05 ms" not in (ROOT / "lessons/01-memory-bound.md").read_text()


def test_the_predictor_explains_its_win_past_the_weights_only_ridge():
    costs, roof = architecture("8B").costs("bfloat16"), predictor.Roof.from_gpu(chip("H100-SXM"), "bfloat16")
    value = predictor.speedup(costs, roof, 0.7, 4, 0.05, 64, 1024)
    text = kv_ridge_text(costs, roof, 1024, 0.7, 0.05, "graph")
    assert round(value, 2) == 2.31 and "2.31×" in text and "past the weights-only ridge of 295" in text
    assert "585 tokens per pass" in text and "still memory-bound" in text and "8.6 GB" in text
    assert "weights only" in ridge_sentence(costs, roof, 0) and "never for rows of one token" in ridge_sentence(costs, roof, 1024)


def test_the_predictors_pass_chart_marks_the_ridge_with_kv():
    from app.views.predictor import pass_time_figure

    costs, roof = architecture("8B").costs("bfloat16"), predictor.Roof.from_gpu(chip("H200"), "bfloat16")
    texts = lambda fig: " | ".join(str(a.text) for a in fig.layout.annotations)  # noqa: E731
    at_256 = pass_time_figure(costs, roof, 256, "graph", "8B on H200")
    assert "ridge ≈ 206 tokens/pass (weights only)" in texts(at_256) and "one-token rows ≈ 377" in texts(at_256)
    assert "never reaches the ridge" in texts(pass_time_figure(costs, roof, 1024, "graph", "8B on H200"))
    assert "with KV" not in texts(pass_time_figure(costs, roof, 0, "graph", "8B on H200"))


def test_frame_wraps_the_subtitle_keeps_phrases_whole_and_puts_the_legend_under_the_axis():
    label = "recorded on AMD EPYC (2 threads), 2026-12-01, " + ", ".join(f"note number {i} about the machine" for i in range(8))
    fig = go.Figure([go.Bar(x=[1], y=[1], name=f"series {i}") for i in range(12)])
    frame(fig, "A claim", label)
    lines = fig.layout.title.text.split("<br>")
    subs = [line for line in lines if line.startswith("<sup>")]
    assert len(subs) >= 3 and all(len(s) <= LABEL_CHARS + len("<sup></sup>") for s in subs)
    assert "recorded on AMD EPYC (2 threads)" in subs[0]
    assert fig.layout.legend.yref == "container" and fig.layout.legend.y == 0 and fig.layout.legend.yanchor == "bottom"
    assert fig.layout.margin.b >= 60 + 24 * 2 and fig.layout.margin.t >= 40 + 24 + 20 * len(subs)


def test_the_two_ridge_labels_point_away_from_each_other():
    fig = gpu.model_figure(EXPERIMENTS["past_the_ridge"], {"batch": 16, "depth": 4})
    labels = sorted((a.x, a.xanchor) for a in fig.layout.annotations if "ridge" in str(a.text))
    assert [anchor for _, anchor in labels] == ["right", "left"]  # H200 (206) leftwards, H100-SXM (295) rightwards


def test_the_gpu_panel_shows_the_run_re_timed():
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    measurement = json.dumps({"ar": lane_of("ngram-copy-ar"), "spec": lane_of("ngram-copy-spec")})
    page = (
        "import json\n"
        "from app.lessons.kit.page import show_gpu_panel\n"
        f"m = json.loads({measurement!r})\n"
        "show_gpu_panel('more_flops', {'depth': 4, 'batch': 1}, '', {'measurement': m, 'label': 'measured live'})\n"
        "show_gpu_panel('turn_it_off', {'depth': 4, 'batch': 1}, '', {'measurement': {'ar': {}}, 'label': 'recorded'})\n"
    )
    at = AppTest.from_string(page, default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    text = " ".join(str(e.value) for e in [*at.markdown, *at.caption])
    assert LABEL in text and "NVIDIA H200, 2026-11-30" in text and "cannot be re-timed" in text
    assert len(at.get("plotly_chart")) == 5  # re-timed, curves and model in the first panel; curves and model in the second


def bars_of(fig, axis: str) -> list:
    """The bar traces drawn in one panel (its y axis: "y", "y2", ...), in series order."""
    return [t for t in fig.data if t.type == "bar" and t.yaxis == axis]


def test_the_re_timed_chart_stacks_speedups_over_rates_with_every_value_over_its_bar():
    m = {"ar": lane_of("ngram-copy-ar"), "spec": lane_of("ngram-copy-spec")}
    fig = figure(m, "recorded on AMD EPYC (2 threads), 2026-12-01")
    table = rows(m)
    speeds, rates = bars_of(fig, "y"), bars_of(fig, "y2")
    assert len(speeds) == len(rates) == 2 and not bars_of(fig, "y3")  # this machine's and the H200's, one panel each
    assert [t.marker.pattern.shape for t in speeds] == ["", "/"] and all(t.textposition == "none" for t in speeds + rates)
    assert list(speeds[1].y) == [r["× plain on the H200 (re-timed)"] for r in table]
    assert list(rates[0].y) == [r["this machine, decode tokens/s (measured)"] for r in table]
    labels = [t for t in fig.data if t.type == "scatter" and t.yaxis == "y"]  # grouped_bars' labels over the bars
    assert [list(t.text) for t in labels] == [[f"{r['× plain here']:.2f}×" for r in table], [f"{v:.2f}×" for v in speeds[1].y]]
    assert "drafting: measured on the H200 machine" in speeds[1].hovertext[1] and speeds[1].customdata[1] == DRAFTING[MEASURED]
    axis = fig.layout.yaxis2
    assert axis.type == "log" and all(str(t)[0] in "125" for t in axis.tickvals)
    drawn = [v for t in rates for v in t.y if v]
    assert 10 ** axis.range[0] < min(drawn) and 10 ** axis.range[1] > max(drawn)


def test_a_ceiling_is_cross_hatched_and_its_value_says_it_is_a_ceiling():
    ar, spec = lane_of("model-open-ar"), lane_of("model-open-spec") | {"drafter": "a drafter nobody timed"}
    fig = figure({"ar": ar, "spec": spec})
    ceiling = [t for t in bars_of(fig, "y") if "a ceiling" in t.name]
    assert len(ceiling) == 1 and ceiling[0].marker.pattern.shape == "x" and ceiling[0].y[0] is None
    value = ceiling[0].y[1]
    assert ceiling[0].text[1] == f"≤{value:.2f}× (drafting not priced: a ceiling)"
    labels = [t for t in fig.data if t.type == "scatter" and t.yaxis == "y" and t.text and "ceiling" in t.text[0]]
    assert labels and labels[0].text[0] == f"≤{value:.2f}×<br>ceiling"


def test_many_runs_are_cut_into_panels_a_narrow_chart_can_label():
    assert [len(c) for c in chunks(list(range(12)))] == [4, 4, 4] and [len(c) for c in chunks(list(range(7)))] == [4, 3]
    assert chunks([]) == [[]] and labelled(4, 2) and not labelled(4, 3) and labelled(2, 3)  # a ~490 px plot
    ar, spec = lane_of("model-open-ar"), lane_of("model-open-spec")
    unpriced = spec | {"drafter": "a drafter nobody timed"}
    m = {"runs": [{"batch": b, "ar": ar, "spec": spec if b < 4 else unpriced} for b in (1, 2, 4, 8)]}
    fig = figure(m)
    table = rows(m)
    for axis, part in (("y", table[:4]), ("y2", table[4:])):  # eight runs: two panels of four, speedups first
        runs = {t.name: list(t.y) for t in bars_of(fig, axis)}
        ceiling = next((v for k, v in runs.items() if "a ceiling" in k), [None] * 4)
        want = [r["× plain on the H200 (re-timed)"] if r["drafting on the H200"] == DRAFTING[CEILING] else None for r in part]
        assert ceiling == want
    assert len(bars_of(fig, "y4")) == 3 and fig.layout.yaxis4.type == "log" and not bars_of(fig, "y5")
    assert fig.layout.margin.b >= FOOT_PX + LEGEND_LINE_PX * 3  # the legend's three entries fit under the plot


@pytest.mark.parametrize("name", ["more_flops", "past_the_ridge", "turn_it_off", "adaptive", "by_load", "width"])
def test_this_machines_speedup_in_the_gpu_view_is_the_lessons_own(name):
    """The re-timed view's "× plain here" is the number the lesson's chart and table show for the same lane (the
    rule's ratio over the paired rounds), not a second one from the two medians (lesson 3 read 0.54× there, 0.48×
    in its chart)."""
    from app.lessons.kit import numbers

    m = json.loads((ROOT / "assets" / "lessons" / f"{name}.json").read_text())["measurement"]
    entries = lanes_of(m)
    checked = 0
    for e, row in zip(entries, rows(m)):
        base = base_of(e, entries)
        if base is None or e is base or not e["lane"].get("decode_tokens_per_s_runs"):
            continue
        assert row["× plain here"] == round(numbers.decode_ratio(e["lane"], base["lane"])[0], 2), (name, row["run"])
        checked += 1
    assert checked, name
