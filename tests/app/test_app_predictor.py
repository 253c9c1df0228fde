"""AppTest (headless) for the Predictor page: the model drawn from URL-bound controls, recorded passes over it,
hostile links, and a live measurement of this machine's pass-cost curve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from engine.roofline.kv_check import KV_RECORDING, read_kv_check  # noqa: E402

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
CONTROLS = {"selectbox": {"gpu", "model"}, "radio": {"dtype", "floor"}, "select_slider": {"ctx"}, "slider": {"alpha", "c"}}


def _page(**params) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=240)
    for key, value in params.items():
        at.query_params[key] = str(value)
    at.switch_page("predictor/predictor.py")
    return at.run()


def _texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def _figures(at) -> list[str]:
    return [str(e.proto.spec) for e in at.get("plotly_chart")]


def test_defaults_draw_the_model_with_its_label_and_bind_every_control():
    at = _page()
    assert not at.exception and not at.error
    assert at.title[0].value.endswith("Predictor")
    assert at.selectbox(key="gpu").value == "NVIDIA H200 SXM 141 GB" and at.selectbox(key="model").value.startswith("8B")
    for kind, keys in CONTROLS.items():
        bound = {w.key: w.proto.query_param_key for w in getattr(at, kind)}
        assert all(bound.get(key) == key for key in keys), kind
    figures = _figures(at)
    assert len(figures) == 3 and all("model, not a measurement" in f for f in figures[:2])
    rec = read_kv_check(KV_RECORDING)
    assert f"{rec.machine}, {rec.date}" in figures[2]  # section 5: the KV check's recording, by the machine that made it
    markdown = _texts(at.markdown)
    assert "**A model, not a measurement.**" in markdown
    assert "depth 8: falls below plain decoding at batch" in markdown  # computed from the grid, not written in
    assert "No recorded pass for this GPU, model and dtype" in _texts(at.caption)
    table = at.dataframe[0].value
    assert {"NVIDIA H200"} == set(table["device"]) and "graph" in set(table["mode"])


def test_a_recorded_shape_is_overlaid_with_the_models_error():
    at = _page(gpu="NVIDIA H200 SXM 141 GB", model="1.7B · SmolLM2-1.7B", ctx=0, floor="CUDA graph")
    assert not at.exception and not at.error
    assert at.select_slider(key="ctx").value == 0 and at.selectbox(key="model").value == "1.7B · SmolLM2-1.7B"
    summary = _texts(at.markdown)
    assert "measured on NVIDIA H200, CUDA graph (2026-11-30, h200-gpu_graphs.json): 15 passes" in summary
    assert "model error (median |model / measured − 1|)" in summary
    assert "measured on NVIDIA H200" in _figures(at)[0]


def test_changing_controls_changes_the_prediction():
    at = _page()
    before = _texts(at.markdown)
    at.slider(key="alpha").set_value(0.3).run()
    at.selectbox(key="gpu").set_value("NVIDIA GeForce RTX 4090 (24 GB)").run()
    assert not at.exception
    after = _texts(at.markdown)
    assert after != before and "RTX 4090" in _texts(at.caption)
    at.selectbox(key="model").set_value("70B · Llama-3.1-70B").run()
    assert "do not fit" in _texts(at.warning)  # 139 GB of weights on a 24 GB card
    assert "no batch in the grid fits" in _texts(at.markdown)


def test_no_bf16_units_is_one_line_and_the_rest_of_the_page_stays():
    at = _page(gpu="NVIDIA T4 (16 GB)", dtype="bfloat16")
    assert not at.exception
    assert len(at.error) == 1 and "no bfloat16" in at.error[0].value and "Fix: choose float16" in at.error[0].value
    assert at.dataframe  # the check against the recordings still shows


def test_a_hostile_link_falls_back_to_the_defaults_with_a_notice():
    at = _page(gpu="<script>alert(1)</script>", alpha="5", ctx="-3", floor="warp", c="0.1")
    assert not at.exception and not at.error
    assert at.selectbox(key="gpu").value == "NVIDIA H200 SXM 141 GB" and at.slider(key="alpha").value == 0.7
    assert at.select_slider(key="ctx").value == 1024 and at.radio(key="floor").value == "CUDA graph"
    notices = _texts(at.warning)
    for label in ("GPU", "α", "Context length", "Overhead per pass"):
        assert f"**{label}**" in notices, label
    assert "**c**" not in notices and at.slider(key="c").value == 0.1  # a value the slider takes is followed
    assert "<script>" not in "\n".join(str(e.proto.body) for e in at.get("html"))


def test_this_machine_is_measured_on_request_and_checked():
    at = _page()
    at.button(key="measure_cpu").click().run()
    assert not at.exception and not at.error, _texts(at.error)
    check = at.session_state["cpu_check"]
    assert len(check["curve"].tokens) >= 10 and all(ms > 0 for ms in check["curve"].ms)
    figures = _figures(at)
    assert len(figures) == 4 and "probed peaks" in figures[2]
    assert "passes; model error" in _texts(at.markdown)


def test_the_kv_term_is_drawn_against_this_cpus_recorded_passes():
    """Section 5: the shipped recording's chart (labelled with its machine and date), its table, the model-to-measured
    ratio per context read from the numbers, and the caption naming the machine and the probe."""
    from engine.roofline.kv_check import kv_rows

    rec = read_kv_check(KV_RECORDING)
    at = _page()
    assert not at.exception and not at.error
    figure = json.loads(_figures(at)[2])
    names = [trace["name"] for trace in figure["data"]]
    assert f"{rec.machine}, {rec.date}" in figure["layout"]["title"]["text"]
    assert "measured: batch 8 × 4 tokens" in names and "model: batch 1 × 1 token" in names and len(names) == 8
    table = at.dataframe[1].value
    assert list(table["context"]) == sorted(table["context"]) and len(table) == len(rec.passes)
    first = min(kv_rows(rec), key=lambda r: (r.context, r.batch, r.new_tokens))
    assert table["model ÷ measured"].iloc[0] == round(first.ratio, 2) and table["measured ms"].iloc[0] == round(first.measured_ms, 2)
    text = _texts(at.markdown)
    assert f"**Recorded: {rec.machine}, {rec.date}.**" in text and "Model ÷ measured, the median over the passes at each context: " in text
    assert "from 256 to 4,096 tokens of context the pass grew by" in text
    caption = _texts(at.caption)
    assert f"Recorded on {rec.machine}, {rec.dtype}, {rec.date} (UTC)" in caption and "GPU" not in caption.split("Recorded on")[1]


def test_a_broken_kv_recording_is_one_line_and_the_page_keeps_serving(tmp_path, monkeypatch):
    import engine.roofline.kv_check as kv_check

    bad = tmp_path / "kv_check.json"
    bad.write_text('{"schema": "speclab.kv_check/1", "machine": 3}')
    monkeypatch.setattr(kv_check, "KV_RECORDING", bad)
    at = _page()
    assert not at.exception and not at.error
    (warning,) = [w.value for w in at.warning if "KV check" in w.value]
    assert "kv_check.json" in warning and "\n" not in warning
    assert len(_figures(at)) == 2 and at.dataframe  # the model's figures and the GPU check still show


def test_the_kv_passes_are_measured_again_on_request():
    at = _page()
    at.button(key="measure_kv").click().run()
    assert not at.exception and not at.error, _texts(at.error)
    live = at.session_state["kv_live"]
    assert {p.context for p in live.passes} == {256, 1024, 4096} and live.rounds == 1 and live.quick_probe
    figures = _figures(at)
    assert len(figures) == 4 and "measured now" in figures[3]
    assert "**Measured now: this CPU, " in _texts(at.markdown)


def test_a_link_may_name_the_gpu_and_model_by_their_short_keys():
    at = _page(gpu="t4", model="70B", dtype="float16")
    assert not at.exception and not at.error
    assert at.selectbox(key="gpu").value == "NVIDIA T4 (16 GB)" and at.selectbox(key="model").value.startswith("70B ·")
    assert "**GPU**" not in _texts(at.warning) and "**Model size**" not in _texts(at.warning)
    at = _page(gpu="T5")  # not a key: the default, with the notice
    assert at.selectbox(key="gpu").value == "NVIDIA H200 SXM 141 GB" and "**GPU**" in _texts(at.warning)
