"""Sweep page (AppTest with the real embedded pair, tiny settings) and its pure roofline view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from app.views import roofline  # noqa: E402
from app.views.sweep import GRID_HELP  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

ROWS = [
    {"batch": 1, "new_tokens": n, "tokens_per_pass": n, "ms": ms, "ms_per_token": ms / n}
    for n, ms in [(1, 40.0), (2, 41.0), (4, 43.0), (8, 48.0), (16, 56.0), (32, 75.0), (64, 121.0)]
]


def test_pass_cost_figure_and_free_span():
    fig = roofline.pass_cost_figure(ROWS, ridge_tokens=12.0)
    assert len(fig.data) == 2  # ms per pass and ms per token for the one batch
    assert list(fig.data[0].y) == [r["ms"] for r in ROWS]
    assert any("ridge" in (a.text or "") for a in fig.layout.annotations)
    # 16 tokens cost 56 ms <= 1.25 x 40 ms? no (1.4x); 8 tokens cost 48 ms = 1.2x: the free span is 8.
    assert roofline.memory_bound_span(ROWS) == 8
    assert roofline.memory_bound_span([]) is None


def _sweep() -> AppTest:
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=300)
    at.switch_page("sweep/sweep.py")
    return at.run()


def test_sweep_measures_passes_and_grid():
    at = _sweep()
    assert not at.exception
    assert at.radio(key="grid_drafter").value == "EAGLE head"  # the embedded pair has one: it is the default
    assert "The question this grid answers" in "\n".join(m.value for m in at.markdown)
    at.multiselect(key="pass_batches").set_value([1])
    at.select_slider(key="pass_tokens").set_value(4)
    at.slider(key="pass_context").set_value(32)
    at.button[0].click().run()  # "Measure passes" (form submit)
    assert not at.exception
    rows = at.session_state["pass_rows"]
    assert [r["tokens_per_pass"] for r in rows] == [1, 2, 3, 4] and all(r["ms"] > 0 for r in rows)
    assert len(at.get("plotly_chart")) >= 1
    regime = "\n".join(m.value for m in at.markdown)
    assert "of peak bandwidth" in regime and "The rule:" in regime  # the regime each pass shows, read from its shares
    assert any(f"**{name}**" in regime for name in ("memory-bound", "compute-bound", "overhead/latency-bound"))
    at.multiselect(key="grid_batches").set_value([1])
    at.multiselect(key="grid_depths").set_value([2])
    at.radio(key="grid_drafter").set_value("n-gram")
    at.slider(key="grid_tokens").set_value(8)
    at.button[1].click().run()
    assert not at.exception
    grid = at.session_state["grid"]
    assert len(grid["rows"]) == 1 and grid["rows"][0]["speedup"] > 0
    assert len(grid["rows"][0]["ar_decode_runs"]) == len(grid["rows"][0]["spec_decode_runs"]) == 1  # the default: one round
    assert "One run each: can't tell; add rounds" in "\n".join(m.value for m in at.markdown)  # no winner from one run
    helped = [json.loads(d.proto.columns) for d in at.dataframe if "mean k" in d.proto.columns]
    assert helped and all(set(GRID_HELP) <= set(h) and h["mean k"]["help"] == GRID_HELP["mean k"] for h in helped)
    # the draft model with drafts stopped below joint confidence 0.5: the threshold reaches the engine
    at.radio(key="grid_drafter").set_value("draft model")
    at.slider(key="grid_conf").set_value(0.5)
    at.button[1].click().run()
    assert not at.exception and not at.error
    row = at.session_state["grid"]["rows"][0]
    assert row["confidence_threshold"] == 0.5 and 1 <= row["drafted_per_step"] <= 2
    assert "joint confidence 0.50" in "\n".join(c.value for c in at.caption)


def test_sweep_guards_bad_input():
    at = _sweep()
    at.multiselect(key="pass_batches").set_value([])
    at.button[0].click().run()
    assert "Pick at least one batch size" in "\n".join(e.value for e in at.error)
    at.multiselect(key="pass_batches").set_value([32])
    at.select_slider(key="pass_tokens").set_value(128)
    at.button[0].click().run()
    assert "above this page's guard" in "\n".join(e.value for e in at.error)
    assert "pass_rows" not in at.session_state


def test_sweep_measures_adaptive_policies_beside_the_fixed_depths():
    at = _sweep()
    at.multiselect(key="grid_batches").set_value([1, 2])
    at.multiselect(key="grid_depths").set_value([0])
    at.radio(key="grid_drafter").set_value("n-gram")
    at.slider(key="grid_tokens").set_value(8)
    at.checkbox(key="grid_adaptive").check()
    at.button[1].click().run()
    assert "largest depth as their maximum, and it is 0" in "\n".join(e.value for e in at.error)
    at.multiselect(key="grid_depths").set_value([2])
    at.button[1].click().run()
    assert not at.exception and not at.error
    rows = at.session_state["grid"]["rows"]
    assert [(r["batch"], r["policy"], r["depth"]) for r in rows] == [
        (1, "fixed", 2),
        (1, "batch_table", 2),
        (1, "goodput", 2),
        (2, "fixed", 2),
        (2, "batch_table", 2),
        (2, "goodput", 2),
    ]
    figures = [json.dumps(json.loads(e.proto.spec), ensure_ascii=False) for e in at.get("plotly_chart")]
    assert any("goodput ≤2" in spec for spec in figures)  # the grid's adaptive column
    assert any("max(AR, best fixed k)" in spec for spec in figures)  # the envelope view
    lines = "\n".join(m.value for m in at.markdown)
    assert "goodput ran at" in lines and "batch_table ran at" in lines and "of max(AR, best fixed k)" in lines


def test_sweep_settings_come_from_the_link_and_hostile_values_fall_back():
    """Every Sweep control is bound to the URL: a link sets them (multiselects as repeated parameters); a value a
    control cannot take is named in a notice and the default is used; nothing is measured until a button press."""
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=300)
    at.query_params["grid_batches"] = ["1", "2"]
    at.query_params["grid_drafter"] = "n-gram"
    at.query_params["grid_tokens"] = "16"
    at.query_params["pass_tokens"] = "32"
    at.query_params["grid_depths"] = ["77", "<b>x</b>"]
    at.query_params["pass_context"] = "1e309"
    at.switch_page("sweep/sweep.py")
    at.run()
    assert not at.exception
    assert at.multiselect(key="grid_batches").value == [1, 2] and at.radio(key="grid_drafter").value == "n-gram"
    assert at.slider(key="grid_tokens").value == 16 and at.select_slider(key="pass_tokens").value == 32
    assert at.multiselect(key="grid_depths").value == [2, 4, 8] and at.slider(key="pass_context").value == 150
    notices = "\n".join(w.value for w in at.warning)
    assert "**Depths k** the value `77, <b>x</b>`, which this page cannot use; it uses `2, 4, 8` instead" in notices
    assert "**KV cache length per row** the value `1e309`" in notices
    assert "Batch sizes (grid)" not in notices  # values it could use are not named
    assert "pass_rows" not in at.session_state and "grid" not in at.session_state


def test_sweep_rounds_are_kept_per_cell_and_the_one_rule_names_the_winner():
    """Rounds per cell: every contender of a batch size once per round, each round's decoding-alone rate kept, and the
    table's verdict, the grid's summary line and the hover text all come from engine/verdict.py over them."""
    from app.views import sweep
    from engine.verdict import RULE, judge

    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=300)
    at.query_params["grid_rounds"] = "9"  # more than the slider takes: a notice, and the default
    at.switch_page("sweep/sweep.py")
    at.run()
    assert not at.exception and at.slider(key="grid_rounds").value == 1
    assert "**Rounds per cell** the value `9`" in "\n".join(w.value for w in at.warning)
    at.multiselect(key="grid_batches").set_value([1])
    at.multiselect(key="grid_depths").set_value([2])
    at.radio(key="grid_drafter").set_value("n-gram")
    at.slider(key="grid_tokens").set_value(8)
    at.slider(key="grid_rounds").set_value(3)
    at.button[1].click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    grid = at.session_state["grid"]
    row = grid["rows"][0]
    assert grid["repeats"] == 3 and len(row["ar_decode_runs"]) == len(row["spec_decode_runs"]) == 3
    assert row["spec_decode_tokens_per_s"] in row["spec_decode_runs"]  # the median shown is one of the kept rounds
    v = judge(row["spec_decode_runs"], row["ar_decode_runs"])
    assert v.rounds == 3 and v.lo is not None
    assert sweep.grid_table(grid["rows"])[0]["verdict (the one rule)"] == f"{v.kind}: {v.interval}"
    lines = "\n".join(m.value for m in at.markdown)
    assert sweep.grid_verdicts(grid["rows"]) in lines and f"{v.kind}" in sweep.grid_verdicts(grid["rows"])
    assert RULE in "\n".join(c.value for c in at.caption) and "3 interleaved rounds per cell" in "\n".join(c.value for c in at.caption)


def test_the_grid_decodes_one_task_of_spec_bench():
    """The Prompts choice: a Spec-Bench task's first turns fill the grid's rows, and the page says which prompts."""
    from engine.bench.prompts import prompt_set_list

    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=300)
    at.switch_page("sweep/sweep.py")
    at.run()
    at.multiselect(key="grid_batches").set_value([1])
    at.multiselect(key="grid_depths").set_value([2])
    at.radio(key="grid_drafter").set_value("n-gram")
    at.slider(key="grid_tokens").set_value(8)
    at.selectbox(key="grid_prompts").set_value("Spec-Bench: QA")
    at.button[1].click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    grid = at.session_state["grid"]
    assert grid["prompt_set"] == "spec-bench:qa" and prompt_set_list("spec-bench:qa")[0].startswith(grid["rows"][0].get("prompt", "")[:20])
    assert "Prompts: Spec-Bench: QA" in "\n".join(c.value for c in at.caption).replace("\\", "")


def test_the_grid_has_a_context_axis():
    """Contexts 0 and 256: one grid each (the second's rows are the document's questions after ~256 tokens of it), a
    line per cell setting its speedup at each context side by side, and a second heatmap."""
    at = _sweep()
    at.multiselect(key="grid_batches").set_value([1])
    at.multiselect(key="grid_depths").set_value([2])
    at.radio(key="grid_drafter").set_value("n-gram")
    at.slider(key="grid_tokens").set_value(8)
    at.multiselect(key="grid_contexts").set_value([0, 256])
    at.button[1].click().run()
    assert not at.exception and not at.error
    grid = at.session_state["grid"]
    assert grid["contexts"] == [0, 256] and [r["context"] for r in grid["rows"]] == [0, 256]
    text = "\n".join(m.value for m in at.markdown)
    assert "Speedup against context" in text and "batch 1, depth 2: " in text and " at 256 (" in text
    assert "#### Context 256 tokens per row" in text
    figures = [json.loads(f.proto.spec) for f in at.get("plotly_chart")]
    titles = [f["layout"].get("title", {}).get("text", "") for f in figures]
    assert any("at context 256 tokens per row" in t for t in titles) and any("context 0 (no document)" in t for t in titles)
    (line,) = [f for f in figures if f["layout"]["xaxis"]["title"]["text"].startswith("context (tokens")][0]["data"]
    assert line["x"] == ["0 (none)", "256"] and line["y"] == [r["speedup"] for r in grid["rows"]]
    assert "the document's questions, one per row" in "\n".join(c.value for c in at.caption)


def test_a_grid_past_the_kv_guard_is_named():
    at = _sweep()
    at.multiselect(key="grid_batches").set_value([16])
    at.multiselect(key="grid_depths").set_value([2])
    at.multiselect(key="grid_contexts").set_value([4096])
    at.button[1].click().run()
    assert not at.exception and "grid" not in at.session_state
    (error,) = [e.value for e in at.error]
    guard = "batch 16 × context 4,096 = 65,536 tokens of KV cache, above this server's guard of 32,768."
    assert error == guard + " Fix: smaller batch sizes or contexts."
    at.multiselect(key="pass_batches").set_value([16])
    at.slider(key="pass_context").set_value(4096)
    at.button[0].click().run()  # the pass curve's cache length meets the same guard
    assert not at.exception and "pass_rows" not in at.session_state
    assert "65,536 tokens of KV cache, above this server's guard" in "\n".join(e.value for e in at.error)
