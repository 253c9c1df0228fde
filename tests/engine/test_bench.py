"""Benchmarks end to end on the tiny pair, and the GPU attention setting (no GPU needed)."""

from __future__ import annotations

import pytest
import torch
from conftest import PROMPTS

from engine import DecodeConfig


# --- bench -------------------------------------------------------------------------------------
def test_bench_grid_and_baselines_run_end_to_end(tiny):
    """The benchmark's code path (not its speed): every cell is measured, outputs match AR, the table prints."""
    from engine.bench.harness import bench, format_table

    result = bench(
        tiny, [1, 2], [2], drafter="model", max_new_tokens=6, repeats=1, baseline=True, baseline_prompts=2, sequential=3, log=lambda s: None
    )
    assert [(r["batch"], r["depth"]) for r in result["rows"]] == [(1, 2), (2, 2)]
    for r in result["rows"]:
        assert r["ar_tokens_per_s"] > 0 and r["spec_tokens_per_s"] > 0
        assert r["same_output"]  # float32 tiny models: speculative == AR
        assert r["c"] > 0 and r["predicted_speedup"] > 0
    b = result["baselines"]
    assert len(b["prompts"]) == 2
    assert b["ours_spec"]["outputs"] == b["ours_ar"]["outputs"] == b["hf_generate"]["outputs"]
    assert b["hf_drafting"]["outputs"] == b["hf_generate"]["outputs"]  # assisted generation is lossless too
    table = format_table(result)
    assert "assistant_model=draft" in table and "predicted" in table and "3 prompts one after another" in table


def test_bench_confidence_grid(tiny):
    """Each depth runs at each confidence threshold; the gated rows report how much they actually drafted."""
    from engine.bench.harness import bench, format_table

    result = bench(tiny, [1], [3], drafter="model", max_new_tokens=8, repeats=1, sequential=2, confidences=[0.0, 0.9], log=lambda s: None)
    fixed, gated = result["rows"]
    assert (fixed["confidence_threshold"], gated["confidence_threshold"]) == (0.0, 0.9)
    # (fixed drafts 3 a step, less near the end of the 8 tokens; gated stops on low confidence as well)
    assert 2 < fixed["drafted_per_step"] <= 3 and 1 <= gated["drafted_per_step"] < fixed["drafted_per_step"]
    assert fixed["same_output"] and gated["same_output"]
    assert "conf drafted" in format_table(result)
    for row in (fixed, gated):  # the speedup is decoding alone (each prompt's prefill apart), the whole run beside it
        assert row["speedup"] == row["spec_decode_tokens_per_s"] / row["ar_decode_tokens_per_s"]
        assert row["whole_run_speedup"] == row["spec_tokens_per_s"] / row["ar_tokens_per_s"]
        assert row["ar_decode_tokens_per_s"] > row["ar_tokens_per_s"]  # the prefill's time is not in the decode rate


def test_a_sequential_cell_times_each_prompts_prefill_apart(tiny):
    """Two prompts decoded one after another: both prefills are time to first token, not decoding."""
    from engine.decoding.decode import generate
    from engine.trace.rates import joined_decoding

    traces = [generate(tiny, [p], DecodeConfig(mode="autoregressive", max_new_tokens=6)) for p in PROMPTS[:2]]
    timing = joined_decoding(traces)
    assert timing["ttft_s"] == sum(t.summary["ttft_s"] for t in traces)
    decode_s = sum(t.summary["wall_s"] - t.summary["ttft_s"] for t in traces)
    assert timing["decode_tokens_per_s"] == pytest.approx(sum(t.summary["new_tokens"] - 1 for t in traces) / decode_s)


def test_bench_tree_cells_beside_the_chains(tiny):
    """Each tree setting runs at every depth it fits, interleaved with the chains; rows say their tree, count
    tree nodes per pass, and give a per-prompt median speedup when prompts run one after another."""
    from engine.bench.harness import bench, format_table

    result = bench(
        tiny, [1], [1, 2], drafter="model", max_new_tokens=6, repeats=1, sequential=2, trees=[(0, 0), (5, 2)], log=lambda s: None
    )
    cells = [(r["depth"], r["tree_nodes"], r["tree_topk"]) for r in result["rows"]]
    assert cells == [(1, 0, 0), (2, 0, 0), (2, 5, 2)]  # 5 nodes do not fit depth 1 with top-2 (2 candidates)
    tree = result["rows"][2]
    assert tree["tokens_per_pass"] == 6 and tree["same_output"] and tree["drafted_per_step"] <= 5
    assert "c" not in tree and "c" in result["rows"][1]  # Leviathan's chain formula predicts no tree
    assert all(r["prompt_median_speedup"] > 0 for r in result["rows"])
    table = format_table(result)
    assert "tree" in table and " 5/2 " in table and "med/prompt" in table


def test_bench_tree_flags_are_checked_before_loading(capsys):
    from engine.__main__ import main

    assert main(["bench", "--drafter", "ngram", "--tree-nodes", "8", "--tree-topk", "2", "--depth", "3"]) == 2
    assert "not 'ngram'" in capsys.readouterr().err
    assert main(["bench", "--drafter", "eagle", "--tree-nodes", "40", "--tree-topk", "2", "--depth", "2,3"]) == 2
    assert "no --tree-topk" in capsys.readouterr().err
    assert main(["run", "--prompt", "Hi", "--drafter", "eagle", "--tree-nodes", "8"]) == 2
    assert "tree_nodes and tree_topk go together" in capsys.readouterr().err


def test_cuda_attention_avoids_cudnn_plans_and_cpu_is_untouched(monkeypatch):
    """On CUDA the engine turns off cuDNN's attention backend (a plan per new cache length cost 55-88 ms per
    decode step on an H200) unless SPECLAB_CUDNN_ATTENTION=1; on a CPU it leaves the flag alone. Setting
    the flag needs no GPU."""
    from engine.hardware import configure_attention

    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        configure_attention(torch.device("cpu"))
        assert torch.backends.cuda.cudnn_sdp_enabled()
        monkeypatch.setenv("SPECLAB_CUDNN_ATTENTION", "1")
        configure_attention("cuda")
        assert torch.backends.cuda.cudnn_sdp_enabled()
        monkeypatch.delenv("SPECLAB_CUDNN_ATTENTION")
        configure_attention("cuda")
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)
