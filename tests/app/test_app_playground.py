"""AppTest (headless) for the Playground with the real embedded pair at small settings."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
TIMEOUT = 240  # the first run loads and warms the model pair (cached for the rest of the module)
CUSTOM = "✏️ Custom text…"
CONTROLS = {
    "slider": {"batch", "depth", "tokens", "temp", "top_p", "conf", "policy_n", "tree", "tree_k", "rounds"},
    "selectbox": {"prompt", "pair"},
    "radio": {"drafter", "policy"},
    "toggle": {"fp32", "auto"},
    "text_input": {"table"},
    "select_slider": {"context"},
}


def _app(**params) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = str(value)
    return at.run()


def _texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def _figures(at) -> list[str]:
    """The plotly figures on the page, as the JSON the browser receives."""
    return [str(e.proto.spec) for e in at.get("plotly_chart")]


def _html(at) -> str:
    return "\n".join(str(e.proto.body) for e in at.get("html"))


def test_page_loads_with_controls_bound_to_query_params():
    at = _app(depth=2, tokens=16, drafter="draft model")
    assert not at.exception
    assert at.title[0].value.endswith("Playground")
    for kind, keys in CONTROLS.items():
        assert keys <= {w.key for w in getattr(at, kind)}, kind
    # the URL sets the widgets ...
    assert at.slider(key="depth").value == 2
    assert at.slider(key="tokens").value == 16
    assert at.radio(key="drafter").value == "draft model"
    # ... and every control writes the URL (the browser syncs it from the widget's query_param_key)
    for kind, keys in CONTROLS.items():
        for widget in getattr(at, kind):
            if widget.key in keys:
                assert widget.proto.query_param_key == widget.key, widget.key
    assert not at.error


def result_device(at) -> str:
    return str(at.session_state["result"]["spec"].meta.get("device"))


def test_run_produces_both_lanes_and_summary():
    at = _app(tokens=8, depth=3)
    at.button(key="run").click().run()
    assert not at.exception
    assert not at.error, _texts(at.error)
    labels = {m.label for m in at.metric}
    for label in (
        "AR tokens/s, decoding",
        "Speculative tokens/s, decoding",
        "Acceptance rate",
        "Measured speedup",
        "Leviathan predicted",
        "AR FLOPs",
        "Speculative FLOPs",
        "FLOPs wasted on rejections",
        "Target forwards",
    ):
        assert label in labels
    # issue 19: the corrected Leviathan model and the operations factor sit beside the measured numbers
    assert {"Leviathan with the measured verify cost", "Leviathan operations factor", "k drafted"} <= labels
    captions = _texts(at.caption)
    assert "at least as much arithmetic" in captions and "always does more" not in captions
    assert "not hardware counters" in captions and "system-wide" in captions  # the gauges say what they are
    if result_device(at) == "cpu":  # issue 30: the machine line names the torch threads and why
        assert "torch threads:" in captions and "Measured on" in captions
    html = _html(at)
    assert "min(1, p/q)" not in html and "argmax" in html  # greedy: the argmax decided, not p/q
    assert "Autoregressive" in _texts(at.markdown) and "Speculative" in _texts(at.markdown)
    assert "tok tok-plain" in html  # the AR lane
    assert "tok-acc" in html or "tok-rej" in html  # the speculative lane drafted something
    assert "Race replay" in _texts(at.subheader)
    result = at.session_state["result"]
    assert len(result["ar"].output_ids[0]) == len(result["spec"].output_ids[0]) == 8
    # a rerun without Run redraws the stored result: the model is not rerun
    at.run()
    assert at.session_state["result"] is result

    # where greedy lanes part (bf16 rounding), the first differing token is marked and explained.
    # The run is labelled bfloat16 as a bf16 run records it: "auto" picks float32 on a CPU without native bf16.
    result["spec"].sequences[0]["output_ids"][3] += 1
    result["spec"].summary["dtype"] = "bfloat16"
    at.run()
    assert not at.exception and not at.error, _texts(at.error)
    assert "float32" in _texts(at.warning) and "round" in _texts(at.warning)
    assert "tok-diff" in _html(at)
    at.button(key="to_fp32").click().run()
    assert at.toggle(key="fp32").value is True


def test_eagle_drafter_runs_from_the_url():
    at = _app(tokens=8, depth=3, drafter="EAGLE head", conf=0.3)
    at.button(key="run").click().run()
    assert not at.exception and not at.error, _texts(at.error)
    spec = at.session_state["result"]["spec"]
    assert spec.config["drafter"] == "eagle" and "EAGLE head" in spec.meta["draft_name"]
    assert spec.config["confidence_threshold"] == 0.3  # the URL's confidence slider reaches the engine
    assert any(s.drafted for step in spec.steps for s in step.seqs)


def test_eagle_tree_runs_from_the_url_and_shows_its_trees():
    at = _app(tokens=8, depth=3, drafter="EAGLE head", tree=8, tree_k=2, fp32="true")
    assert at.slider(key="tree").value == 8 and at.slider(key="tree_k").value == 2
    at.button(key="run").click().run()
    assert not at.exception and not at.error, _texts(at.error)
    result = at.session_state["result"]
    spec = result["spec"]
    assert (spec.config["tree_nodes"], spec.config["tree_topk"]) == (8, 2)
    assert result["ar"].config["tree_nodes"] == 0
    assert spec.output_ids == result["ar"].output_ids  # float32 greedy: the tree changes nothing
    assert any(s.tree is not None for step in spec.steps for s in step.seqs)
    assert "sl-tree" in _html(at) and 'data-kind="accepted"' in _html(at)


def test_hostile_or_impossible_tree_links_are_named_not_raised():
    at = _app(tree="999", tree_k="-3", drafter="EAGLE head", tokens=8)
    assert not at.exception
    assert at.slider(key="tree").value == 0 and at.slider(key="tree_k").value == 4
    notices = _texts(at.warning)
    assert "**Tree nodes**" in notices and "**Tree top-k**" in notices
    at = _app(tree=64, tree_k=1, depth=3, drafter="EAGLE head", tokens=8)  # 3 levels of top-1 hold 3 nodes
    assert not at.exception
    errors = _texts(at.error)
    assert "tree_nodes=64 is more than depth 3 with top-1 can draft" in errors and "Fix:" in errors
    at.button(key="run").click().run()
    assert not at.exception and "Run skipped" in _texts(at.warning)


def test_batch_of_two_uses_different_prompts():
    at = _app(tokens=8, batch=2, depth=2)
    at.button(key="run").click().run()
    assert not at.exception and not at.error
    result = at.session_state["result"]
    prompts = [s["prompt"] for s in result["ar"].sequences]
    assert len(prompts) == 2 and prompts[0] != prompts[1]
    assert "sequence 2" in _html(at)


def test_a_spec_bench_task_fills_the_batch_with_its_own_prompts():
    from engine.bench.prompts import batch_prompts

    at = _app(prompt="Spec-Bench: QA (a batch of its prompts)", tokens=8, batch=2, depth=2)
    assert not at.exception and not at.warning
    at.button(key="run").click().run()
    assert not at.exception and not at.error
    result = at.session_state["result"]
    prompts = [s["prompt"] for s in result["ar"].sequences]
    assert prompts == batch_prompts("spec-bench:qa", 2)
    assert result["ar"].config["task"] == result["spec"].config["task"] == "qa"  # goodput learns per task, as the bench


def test_a_context_puts_the_shared_document_before_every_prompt():
    """The context slider: both lanes decode prompts that begin with the shipped document (about 256 tokens per row),
    shared as a prefix and prefilled once; the lanes' prompts are the same."""
    from engine.bench.context import document

    at = _app(context=256, tokens=8, batch=2, depth=2)
    assert at.select_slider(key="context").value == 256
    at.button(key="run").click().run()
    assert not at.exception and not at.error, _texts(at.error)
    ar, spec = at.session_state["result"]["ar"], at.session_state["result"]["spec"]
    first_words = document()[:200]
    for trace in (ar, spec):
        assert all(s["prompt"].startswith(first_words) for s in trace.sequences)
        assert all(200 <= s["prompt_tokens"] <= 260 for s in trace.sequences)
        assert trace.meta["shared_prefix"] > 150
        assert trace.meta["warm_prefix"] >= 1  # the warm-up filed the document: the timed lanes read it warm
    assert [s["prompt"] for s in ar.sequences] == [s["prompt"] for s in spec.sequences]


def test_empty_custom_prompt_is_named():
    at = _app(prompt=CUSTOM)
    at.button(key="run").click().run()
    assert not at.exception
    errors = _texts(at.error)
    assert "custom prompt is empty" in errors and "Fix:" in errors
    assert "result" not in at.session_state


def test_prompt_longer_than_context_is_named():
    at = _app(prompt=CUSTOM, tokens=8)
    at.text_area(key="text").input("word " * 9000).run()
    at.button(key="run").click().run()
    assert not at.exception
    errors = _texts(at.error)
    assert "context window" in errors and "Fix:" in errors


@pytest.mark.parametrize(
    "link, named",
    [
        (dict(batch=32, depth=12, tokens=256), ("memory guard", "lower the batch size")),
        (dict(context=4096, batch=16, tokens=8), ("tokens of KV cache", "lower the batch size or the context")),
    ],
    ids=["tokens", "kv-cache"],
)
def test_memory_guard_is_named(link, named):
    at = _app(**link)
    at.button(key="run").click().run()
    assert not at.exception
    errors = _texts(at.error)
    assert all(words in errors for words in named)
    assert "Run skipped" in _texts(at.warning)


def test_unavailable_model_pair_is_named(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # as on the build machines: the hub cannot be reached
    from app.common import resources

    resources.hub_available.clear()  # forget a cached answer from a machine that can reach the hub
    at = _app(pair="Qwen2.5-0.5B-Instruct → Qwen2.5-7B-Instruct (hub)")
    assert at.selectbox(key="pair").value.startswith("Qwen2.5")
    assert not at.exception
    errors = _texts(at.error)
    assert "Hugging Face Hub" in errors and "embedded pair" in errors
    assert "unavailable offline" in _texts(at.caption)


def test_every_policy_is_offered_and_bound_to_the_url():
    at = _app(policy="goodput", depth=5)
    assert not at.exception and not at.warning
    assert at.radio(key="policy").options == ["fixed k", "off above batch N", "heuristic k", "batch table", "goodput"]
    assert at.radio(key="policy").value == "goodput"
    assert at.slider(key="policy_n").disabled and at.text_input(key="table").disabled  # goodput reads neither
    at = _app(policy="batch table", table="1-4:4,5-16:0")
    assert at.radio(key="policy").value == "batch table" and at.text_input(key="table").value == "1-4:4,5-16:0"
    assert not at.text_input(key="table").disabled and not at.error


def test_a_hostile_link_falls_back_to_the_defaults_with_a_notice():
    at = _app(policy="<script>alert(1)</script>", depth="99", batch="-4", fp32="maybe", tokens=16)
    assert not at.exception
    assert at.radio(key="policy").value == "fixed k" and at.slider(key="depth").value == 4
    assert at.slider(key="batch").value == 1 and at.toggle(key="fp32").value is False
    notices = _texts(at.warning)
    for label in ("Depth policy", "Speculation depth k", "Batch size", "float32"):
        assert f"**{label}**" in notices, label
    assert "Max new tokens" not in notices  # tokens=16 is a value the slider takes
    assert "<script>" not in _html(at)  # the value is shown as text in the notice, never as markup
    at.slider(key="tokens").set_value(8).run()
    assert "**Depth policy**" in _texts(at.warning)  # the notices stay until the next Run ...
    at.button(key="run").click().run()
    assert not at.exception and not at.error and "**Depth policy**" not in _texts(at.warning)  # ... which clears them


def test_moving_a_control_after_following_a_link_raises_no_notice():
    at = _app(depth=2, policy="goodput")
    at.slider(key="depth").set_value(5).run()  # the server's copy of the query string may still say depth=2
    at.radio(key="policy").set_value("fixed k").run()
    assert not at.exception and "The link gave" not in _texts(at.warning)


def test_a_bad_batch_table_is_named_and_blocks_the_run():
    at = _app(policy="batch table", table="1-4:4,oops", tokens=8)
    assert not at.exception
    errors = _texts(at.error)
    assert "Batch table: cannot read the row `oops`" in errors and "Fix:" in errors
    at.button(key="run").click().run()
    assert "Run skipped" in _texts(at.warning) and "result" not in at.session_state
    at.text_input(key="table").input("1-4:4,3-8:2").run()
    assert "ranges overlap at batch 3" in _texts(at.error)


def test_batch_table_run_shows_the_depth_per_step_and_its_summary():
    at = _app(policy="batch table", table="1:3,2-8:1", batch=2, tokens=8, depth=3, drafter="draft model")
    at.button(key="run").click().run()
    assert not at.exception and not at.error, _texts(at.error)
    spec = at.session_state["result"]["spec"]
    assert [list(r) for r in spec.config["batch_table"]] == [[1, 1, 3], [2, 8, 1]]
    decode = [s for s in spec.steps if s.kind == "decode"]
    assert all(s.depth <= (1 if s.batch == 2 else 3) for s in decode)  # the table reached the engine
    summary = next(m.value for m in at.markdown if m.value.startswith("**Depth policy.**"))
    assert "batch table [1:3, 2-8:1] (k ≤ 3): k = 1 at" in summary and "batch 2" in summary
    assert any("Depth per step: batch table [1:3, 2-8:1]" in spec for spec in _figures(at))


def test_goodput_run_shows_the_pass_cost_it_priced_k_with():
    at = _app(policy="goodput", batch=2, tokens=8, depth=3, drafter="draft model")
    at.button(key="run").click().run()
    assert not at.exception and not at.error, _texts(at.error)
    spec = at.session_state["result"]["spec"]
    assert spec.config["policy"] == "goodput"
    assert all(0 <= s.depth <= 3 for s in spec.steps)
    summary = next(m.value for m in at.markdown if m.value.startswith("**Depth policy.**"))
    assert "goodput (k ≤ 3): k = " in summary
    basis = at.session_state["result"]["basis"]
    assert basis["table"] is None and len(basis["tokens"]) == len(basis["ms"]) >= 2
    assert any("priced k with" in e.label for e in at.expander)
