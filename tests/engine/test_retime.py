"""Re-timing a run's pass shapes on recorded pass costs (engine/roofline/retime.py), and the ridge that counts each
row's KV cache (engine.costs.ridge_tokens_with_kv)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from engine.costs import ModelCosts, ridge_point, ridge_tokens, ridge_tokens_with_kv
from engine.roofline.architectures import architecture
from engine.roofline.gpus import gpu
from engine.roofline.recordings import RecordingError
from engine.roofline.retime import DraftPrices, PassPrices, recorded_draft_prices, retime

ROOT = Path(__file__).resolve().parents[2]
CURVE = PassPrices((1, 4, 16), (2.0, 2.0, 6.0), "a hand-made curve")


def test_a_pass_is_priced_on_the_recorded_points_and_the_line_between_them_never_beyond():
    assert CURVE.price(1) == 2.0 and CURVE.price(16) == 6.0
    assert CURVE.price(10) == pytest.approx(4.0)  # halfway from 4 (2 ms) to 16 (6 ms)
    assert CURVE.price(17) is None and CURVE.price(0.5) is None
    with pytest.raises(ValueError):
        PassPrices((4, 1), (1.0, 1.0), "unsorted")
    with pytest.raises(ValueError):
        PassPrices((1, 2), (1.0,), "one time short")


def test_retime_sums_each_steps_recorded_price_and_refuses_a_pass_outside_the_recording():
    passes = [[1, 0, 10], [10, 4, 5], [16, 0, 0]]  # 10 plain steps, 5 drafting steps of 2 rows x 5 tokens
    r = retime(passes, decode_tokens=40, prices=CURVE)
    assert r.steps == 15 and r.drafted_steps == 5 and r.target_ms == pytest.approx(10 * 2.0 + 5 * 4.0)
    assert not r.draft_priced and r.draft_ms == 0.0 and r.tokens_per_s == pytest.approx(40 / 0.040)
    drafted = retime(passes, 40, CURVE, DraftPrices((1, 8), (0.5, 3.0), "hand"))
    assert drafted.draft_ms == pytest.approx(5 * 0.5) and drafted.tokens_per_s < r.tokens_per_s  # 2 rows: the batch-1 price
    beyond = retime([[1, 0, 3], [64, 0, 1]], 4, CURVE)
    assert beyond.outside == 1 and beyond.largest == 64 and beyond.tokens_per_s is None
    for bad in ([[0, 0, 1]], [[4, -1, 1]], [[4, 0]]):
        with pytest.raises(ValueError):
            retime(bad, 1, CURVE)


def test_ngram_drafting_is_priced_from_the_h200_bench_grid_and_no_other_drafter_is():
    draft = recorded_draft_prices("ngram")
    raw = json.loads((ROOT / "docs/measurements/h200-gpu_bench.json").read_text())
    rows = [r for s in raw["shapes"] if (s.get("grid") or {}).get("drafter") == "ngram" for r in s["grid"]["rows"]]
    for batch, ms in zip(draft.batches, draft.ms, strict=True):
        assert ms == statistics.median(r["draft_ms_per_forward"] for r in rows if r["batch"] == batch and r["draft_ms_per_forward"])
    assert draft.batches == (1, 8, 32, 64) and "NVIDIA H200" in draft.label and "2026-11-30" in draft.label
    assert draft.price(16) == draft.ms[1] and draft.price(1000) == draft.ms[-1]  # the nearest recorded batch
    assert recorded_draft_prices("eagle") is None and recorded_draft_prices("model") is None


def test_a_bad_bench_file_is_one_line(tmp_path):
    bad = tmp_path / "bench.json"
    bad.write_text(json.dumps({"device": "x", "date": "d", "shapes": [{"grid": {"drafter": "ngram", "rows": [{"batch": 1}]}}]}))
    with pytest.raises(RecordingError, match="draft_ms_per_forward"):
        recorded_draft_prices("ngram", bad)
    with pytest.raises(RecordingError, match="cannot be read"):
        recorded_draft_prices("ngram", tmp_path / "missing.json")


def test_the_ridge_with_kv_is_where_flops_per_byte_reach_the_ridge_point():
    costs, h100 = architecture("8B").costs("bfloat16"), gpu("H100-SXM")
    peak, bw = h100.peak_flops("bfloat16"), h100.bandwidth
    for context, per_row in ((0, 1), (150, 1), (1024, 5), (256, 5)):
        tokens = ridge_tokens_with_kv(costs, peak, bw, context, per_row)
        rows = tokens / per_row
        intensity = costs.forward_flops(rows, per_row, context) / costs.forward_bytes(rows, per_row, context)
        assert intensity == pytest.approx(ridge_point(peak, bw))
    assert ridge_tokens_with_kv(costs, peak, bw, 0, 1) == pytest.approx(ridge_tokens(costs, peak, bw), rel=0.01)
    assert ridge_tokens_with_kv(costs, peak, bw, 150, 1) > ridge_tokens_with_kv(costs, peak, bw, 0, 1)
    assert math.isinf(ridge_tokens_with_kv(costs, peak, bw, 1024, 1))  # one-token rows at 1,024: no batch reaches it
    assert round(ridge_tokens_with_kv(costs, peak, bw, 1024, 5)) == 585


def test_without_attention_or_kv_the_ridge_is_the_weights_only_one():
    toy = ModelCosts(
        linear_params=10**9, head_params=0, weight_bytes=2 * 10**9, n_layers=1, n_heads=1, n_kv_heads=1, head_dim=0, elem_bytes=2
    )
    assert ridge_tokens_with_kv(toy, 100e12, 1e12, 4096, 3) == pytest.approx(ridge_tokens(toy, 100e12, 1e12))
