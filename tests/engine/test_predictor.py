"""The roofline predictor (engine/roofline/predictor.py), its GPU and architecture tables, and the recordings it is checked on."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from engine import __main__ as cli
from engine.costs import ModelCosts, expected_speedup
from engine.roofline.architectures import ARCHITECTURES, architecture
from engine.roofline.gpus import GPUS, gpu, gpu_for_device
from engine.roofline.predictor import (
    FLOOR_MEASURED,
    Roof,
    crossover_batch,
    floor_ms,
    model_error,
    pass_ms,
    prediction_table,
    regime,
    ridge_tokens_per_pass,
    speedup,
    speedup_grid,
)
from engine.roofline.recordings import RecordingError, check, load_recordings, load_report, parse_report, predict_record

ROOT = Path(__file__).resolve().parents[2]
# A hand-sized model: 1e9 matmul weights in bf16 (2 GB), no attention and no KV cache, one layer.
TOY = ModelCosts(linear_params=10**9, head_params=0, weight_bytes=2 * 10**9, n_layers=1, n_heads=1, n_kv_heads=1, head_dim=0, elem_bytes=2)
TOY_ROOF = Roof("toy", bandwidth=1e12, flops=100e12)  # ridge 100 FLOP/byte


# --- tables ------------------------------------------------------------------------------------
def test_gpu_table_has_the_named_gpus_with_dense_peaks():
    assert set(GPUS) == {"T4", "L4", "A10G", "A100-40GB", "A100-80GB", "H100-SXM", "H200", "B200", "RTX4090"}
    for entry in GPUS.values():
        assert entry.bandwidth > 1e11 and entry.memory_gb >= 16 and entry.source
        assert entry.flops["float32"] > 1e12
        for dtype, sparse in entry.sparse_printed.items():  # the sheet's "with sparsity" figure is twice the dense one
            assert entry.peak_flops(dtype) == pytest.approx(sparse / 2, rel=0.002)
    assert GPUS["H200"].peak_flops("bfloat16") == 989.5e12 and GPUS["H200"].bandwidth == 4.8e12
    assert GPUS["A10G"].note  # its FLOP/s are unconfirmed, and the table says so
    with pytest.raises(ValueError, match="no bfloat16"):
        GPUS["T4"].peak_flops("bfloat16")
    with pytest.raises(ValueError, match="dtype must be"):
        GPUS["H200"].peak_flops("int4")


def test_gpu_lookup_by_key_and_device_name():
    assert gpu("h200") is GPUS["H200"] and gpu("RTX4090") is GPUS["RTX4090"]
    with pytest.raises(ValueError, match="unknown GPU"):
        gpu("H300")
    assert gpu_for_device("NVIDIA H200") is GPUS["H200"]
    assert gpu_for_device("NVIDIA A100-SXM4-80GB") is GPUS["A100-80GB"]
    assert gpu_for_device("Tesla T4") is GPUS["T4"]
    assert gpu_for_device("NVIDIA GeForce RTX 4090") is GPUS["RTX4090"]
    assert gpu_for_device("Intel Xeon") is None


def test_architectures_match_published_and_recorded_sizes():
    assert set(ARCHITECTURES) == {"135M", "1.7B", "7B", "8B", "27B", "70B"}
    recorded = json.loads((ROOT / "docs/measurements/h200-gpu_graphs.json").read_text())
    weight_bytes = {s["shape"]: s["passes"][0]["weight_bytes"] for s in recorded["shapes"]}  # every parameter, bf16
    assert 2 * architecture("1.7B").parameters == weight_bytes["smollm2-1.7b"]
    qwen = architecture("qwen2.5-7b")  # the script's random-weight shape has no q/k/v biases
    assert 2 * (qwen.parameters - qwen.layers * (qwen.heads + 2 * qwen.kv_heads) * qwen.head_dim) == weight_bytes["qwen2.5-7b"]
    published = {"8B": 8.03e9, "27B": 27.2e9, "70B": 70.6e9}  # the model cards' parameter counts
    for key, count in published.items():
        assert architecture(key).parameters == pytest.approx(count, rel=0.005)
    assert architecture("8B").costs("bfloat16").kv_bytes_per_token == 2 * 32 * 8 * 128 * 2
    assert architecture("8B").kv_bytes(1000, "float32") == 2 * 32 * 8 * 128 * 4 * 1000
    with pytest.raises(ValueError, match="unknown model size"):
        architecture("13B")


def test_embedded_shape_costs_equal_the_engines_count_of_the_real_architecture():
    transformers = pytest.importorskip("transformers")
    arch = replace(architecture("135M"), layers=2)  # per-layer counts are what is checked; 2 layers keep it fast
    cfg = transformers.LlamaConfig(
        vocab_size=arch.vocab,
        hidden_size=arch.hidden,
        intermediate_size=arch.intermediate,
        num_hidden_layers=arch.layers,
        num_attention_heads=arch.heads,
        num_key_value_heads=arch.kv_heads,
        head_dim=arch.head_dim,
        tie_word_embeddings=True,
    )
    model = transformers.LlamaForCausalLM(cfg)
    assert arch.costs("float32") == ModelCosts.from_model(model)


# --- pass time --------------------------------------------------------------------------------
def test_hand_computed_pass_times_and_the_ridge():
    # 1 token: 2e9 FLOPs / 1e14 = 0.02 ms, 2e9 bytes / 1e12 = 2 ms -> memory-bound, 2 ms.
    assert pass_ms(TOY, TOY_ROOF, 1, 1, 0, floor="none") == pytest.approx(2.0)
    assert regime(TOY, TOY_ROOF, 1, 1, 0, floor="none") == "memory"
    # 200 tokens: 4e11 FLOPs -> 4 ms, compute-bound.
    assert pass_ms(TOY, TOY_ROOF, 1, 200, 0, floor="none") == pytest.approx(4.0)
    assert regime(TOY, TOY_ROOF, 1, 200, 0, floor="none") == "compute"
    # ridge = FLOP/s / bandwidth = 100 FLOP/byte; 2 bytes per weight and 2 FLOPs per weight per token -> 100 tokens.
    assert TOY_ROOF.ridge_point == pytest.approx(100.0)
    assert ridge_tokens_per_pass(TOY, TOY_ROOF) == pytest.approx(100.0)
    assert pass_ms(TOY, TOY_ROOF, 1, 100, 0, floor="none") == pytest.approx(2.0)  # both roofs meet there


def test_ridge_in_tokens_for_real_shapes():
    for dtype, factor in (("bfloat16", 1.0), ("float32", 2.0)):  # float32 streams 4 bytes per 2 FLOPs
        for arch in ARCHITECTURES.values():
            costs = arch.costs(dtype)
            roof = Roof.from_gpu(GPUS["H100-SXM"], dtype)
            n_star = ridge_tokens_per_pass(costs, roof)
            assert n_star == pytest.approx(factor * roof.ridge_point, rel=0.01)
            # at context 0, a pass of n* tokens takes as long to compute as to stream (KV writes aside)
            nbytes, flops = costs.forward_bytes(1, round(n_star), 0), costs.forward_flops(1, round(n_star), 0)
            assert flops / roof.flops == pytest.approx(nbytes / roof.bandwidth, rel=0.1)


def test_overheads_come_from_the_recorded_h200_run_and_scale_with_layers():
    recorded = json.loads((ROOT / "docs/measurements/h200-gpu_graphs.json").read_text())
    first = next(s for s in recorded["shapes"] if s["shape"] == "smollm2-1.7b")["passes"][0]
    assert (first["batch"], first["new_tokens"]) == (1, 1)
    assert FLOOR_MEASURED == {"eager": first["eager_ms"], "graph": first["graph_ms"]}
    costs = architecture("1.7B").costs()
    roof = Roof.from_gpu(GPUS["H200"], "bfloat16")
    streaming = 1000 * costs.forward_bytes(1, 1, 0) / 4.8e12  # memory-bound: bytes / the sheet's bandwidth
    assert streaming == pytest.approx(0.713, abs=0.001)
    for mode in ("graph", "eager"):  # overhead = the measured pass minus its roofline time ...
        assert floor_ms(costs, mode) == pytest.approx(first[f"{mode}_ms"] - streaming)
        # ... so the model gives that very pass its measured time (the head on the last position, as measured)
        assert pass_ms(costs, roof, 1, 1, 0, mode, logits_tokens=1) == pytest.approx(first[f"{mode}_ms"])
    assert floor_ms(architecture("70B").costs(), "graph") == pytest.approx(floor_ms(costs, "graph") * 80 / 24)
    assert floor_ms(costs, "none") == 0.0
    with pytest.raises(ValueError, match="floor must be"):
        floor_ms(costs, "compiled")
    assert regime(costs, roof, 1, 1, 0, "eager") == "overhead" and regime(costs, roof, 1, 1, 0, "none") == "memory"


def test_pass_time_is_monotonic():
    for arch in ARCHITECTURES.values():
        costs = arch.costs()
        for floor in ("graph", "eager", "none"):
            roof = Roof.from_gpu(GPUS["A100-80GB"], "bfloat16")
            by_tokens = [pass_ms(costs, roof, 1, n, 512, floor) for n in (1, 2, 8, 64, 512, 4096)]
            by_batch = [pass_ms(costs, roof, b, 2, 512, floor) for b in (1, 4, 32, 256)]
            by_context = [pass_ms(costs, roof, 8, 1, L, floor) for L in (0, 256, 4096, 65536)]
            for series in (by_tokens, by_batch, by_context):
                assert all(a <= b for a, b in zip(series, series[1:]))
    with pytest.raises(ValueError):
        pass_ms(TOY, TOY_ROOF, 0, 1, 0)


# --- speedup ----------------------------------------------------------------------------------
def test_speedup_reduces_to_leviathan_when_the_verify_pass_is_flat():
    # batch 1, memory-bound: a 5-token verify costs one step (2 ms), so Theorem 3.8 holds exactly.
    assert speedup(TOY, TOY_ROOF, 0.8, 4, 0.1, 1, 0, "none") == pytest.approx(expected_speedup(0.8, 4, 0.1))
    assert speedup(TOY, TOY_ROOF, 0.8, 4, 0.1, 1, 0, "none") == pytest.approx(3.3616 * 2 / 2.8)
    # batch 50: T(50, 1) = 2 ms (memory), T(50, 5) = 250 tokens x 2e9 FLOPs / 1e14 = 5 ms (compute).
    assert speedup(TOY, TOY_ROOF, 0.8, 4, 0.1, 50, 0, "none") == pytest.approx(3.3616 * 2 / (0.8 + 5.0))
    assert speedup(TOY, TOY_ROOF, 0.8, 0, 0.1, 50, 0, "none") == 1.0  # depth 0 is plain decoding
    for bad in ((1.5, 4, 0.1), (0.8, -1, 0.1), (0.8, 4, -0.1)):
        with pytest.raises(ValueError):
            speedup(TOY, TOY_ROOF, *bad, 1, 0)


def test_crossover_hand_computed():
    # speedup < 1 once T(B, 5) > (E - k·c)·T(B, 1) = (3.3616 - 0.4) · 2 ms, i.e. B · 0.1 ms > 5.9232 ms: B >= 60.
    grid = speedup_grid(TOY, TOY_ROOF, 0.8, 0.1, range(1, 129), [4], 0, "none")
    assert grid.crossover == {4: 60}
    assert grid.values[0][58] >= 1.0 > grid.values[0][59]
    assert crossover_batch([1, 2], [1.2, 1.0]) is None and crossover_batch([1, 2], [None, 0.9]) == 2


def test_speedup_monotonic_in_batch_alpha_and_c():
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    for arch in ARCHITECTURES.values():
        costs = arch.costs()
        for chip in GPUS.values():
            roof = Roof.from_gpu(chip, "float16")
            grid = speedup_grid(costs, roof, 0.7, 0.05, batches, [1, 4, 8], 1024, "graph")
            for row in grid.values:
                assert all(a >= b - 1e-12 for a, b in zip(row, row[1:]))  # more load never helps speculation
            by_alpha = [speedup(costs, roof, a, 4, 0.05, 16, 1024) for a in (0.0, 0.3, 0.6, 0.9, 1.0)]
            by_c = [speedup(costs, roof, 0.7, 4, c, 16, 1024) for c in (0.0, 0.05, 0.2, 1.0)]
            assert by_alpha == sorted(by_alpha) and by_c == sorted(by_c, reverse=True)


def test_grid_marks_cells_that_do_not_fit_memory():
    costs = architecture("70B").costs("bfloat16")  # 141 GB of weights held (139 GB streamed: the input embedding is gathered)
    assert costs.held_bytes > costs.weight_bytes
    roof = Roof.from_gpu(GPUS["B200"], "bfloat16")
    grid = speedup_grid(costs, roof, 0.7, 0.05, [1, 64], [2], 4096, "graph", memory_bytes=GPUS["B200"].memory_gb * 1e9)
    assert grid.values[0][0] is not None and grid.values[0][1] is None
    # one H200: 141 GB of weights in 90% of 141 GB leaves no room (the old count, streamed bytes in all of it, said batch 4)
    h200 = speedup_grid(costs, roof, 0.7, 0.05, [1], [2], 1024, "graph", memory_bytes=GPUS["H200"].memory_gb * 1e9)
    assert h200.values == ((None,),)
    grid = speedup_grid(costs, roof, 0.7, 0.05, [1], [2], 0, memory_bytes=GPUS["A100-80GB"].memory_gb * 1e9)
    assert grid.values == ((None,),) and grid.best_depth(1) is None
    with pytest.raises(ValueError):
        speedup_grid(costs, roof, 0.7, 0.05, [4, 1], [2], 0)


def test_model_error():
    assert model_error([1.1, 0.9, 2.0], [1.0, 1.0, 1.0]) == pytest.approx(0.1)
    with pytest.raises(ValueError):
        model_error([1.0], [])
    with pytest.raises(ValueError):
        model_error([1.0], [0.0])


# --- recordings -------------------------------------------------------------------------------
def test_shipped_recordings_load_and_the_model_is_checked_on_them():
    records, refused = load_recordings()
    assert not refused
    graphs = [r for r in records if r.source.endswith("h200-gpu_graphs.json")]
    assert len(graphs) == 2 * 2 * 15  # two shapes, eager and graph, 15 passes each
    first = next(r for r in graphs if r.shape == "smollm2-1.7b" and r.mode == "graph")
    assert (first.batch, first.new_tokens, first.context, first.logits_tokens) == (1, 1, 0, 1)
    assert predict_record(first) == pytest.approx(first.ms)  # the graph overhead was set from this very pass
    bench = [r for r in records if r.source.endswith("h200-gpu_bench.json")]
    assert bench and all(r.mode == "eager" and r.context == 256 and r.logits_tokens is None for r in bench)
    rows = check(records)
    assert {(r.shape, r.mode) for r in rows} >= {("smollm2-1.7b", "graph"), ("qwen2.5-7b", "eager")}
    for row in rows:
        assert row.points > 0 and 0 <= row.error_sheet < 5 and row.error_probed is not None


def _report(**changes) -> dict:
    report = {
        "device": "NVIDIA H200",
        "dtype": "bfloat16",
        "date": "2026-12-01",
        "torch": "2.11",
        "shapes": [{"shape": "smollm2-1.7b", "passes": [{"batch": 1, "new_tokens": 4, "graph_ms": 3.2, "eager_ms": 13.0}]}],
    }
    report.update(changes)
    return report


def test_report_parsing_and_refusals(tmp_path):
    assert len(parse_report(_report(), "x.json")) == 2
    row = {"batch": 2, "new_tokens": 3, "ms": 5.0, "mode": "graph", "context": 64, "logits_tokens": 3}
    (record,) = parse_report(_report(shapes=[{"shape": "qwen2.5-7b", "passes": [row]}]), "x.json")
    assert (record.mode, record.context, record.logits_tokens, record.ms) == ("graph", 64, 3, 5.0)
    assert parse_report(_report(shapes=[{"shape": "a", "error": "boom"}]), "x.json") == []
    bad = {
        "x.json: the report must be an object": [1, 2],
        "x.json: device must be a non-empty string": _report(device=""),
        "x.json: dtype must be one of": _report(dtype="int8"),
        "x.json: shapes must list at least 1": _report(shapes=[]),
        r"x.json: shapes\[0\].passes\[0\].batch must be an integer": _report(
            shapes=[{"shape": "s", "passes": [{"batch": True, "new_tokens": 1, "ms": 1.0}]}]
        ),
        r"x.json: shapes\[0\].passes\[0\].ms must be >= 0": _report(
            shapes=[{"shape": "s", "passes": [{"batch": 1, "new_tokens": 1, "ms": -1.0}]}]
        ),
        r"x.json: shapes\[0\].passes\[0\].mode must be one of graph, eager": _report(
            shapes=[{"shape": "s", "passes": [{"batch": 1, "new_tokens": 1, "ms": 1, "mode": "x"}]}]
        ),
        r"x.json: shapes\[0\].passes\[0\] has no time": _report(shapes=[{"shape": "s", "passes": [{"batch": 1, "new_tokens": 1}]}]),
    }
    for message, data in bad.items():
        with pytest.raises(RecordingError, match=message):
            parse_report(data, "x.json")
    (tmp_path / "nan.json").write_text('{"device": "d", "dtype": "bfloat16", "date": "x", "shapes": NaN}')
    (tmp_path / "junk.json").write_text("not json")
    (tmp_path / "good.json").write_text(json.dumps(_report()))
    with pytest.raises(RecordingError, match=r"nan.json: NaN is not a number this file may hold \(JSON has no NaN or Infinity\)"):
        load_report(tmp_path / "nan.json")
    records, refused = load_recordings(sorted(tmp_path.glob("*.json")))
    assert len(records) == 2 and len(refused) == 2 and all("\n" not in line for line in refused)


def test_prediction_for_unknown_devices_or_shapes_is_none():
    (record,) = parse_report(
        _report(device="NVIDIA H300", shapes=[{"shape": "smollm2-1.7b", "passes": [{"batch": 1, "new_tokens": 1, "ms": 1.0}]}]), "x"
    )
    assert predict_record(record) is None and predict_record(record, "probed") is None
    (record,) = parse_report(_report(shapes=[{"shape": "gpt-9", "passes": [{"batch": 1, "new_tokens": 1, "ms": 1}]}]), "x")
    assert predict_record(record) is None
    assert check([record])[0].error_sheet is None


# --- CLI --------------------------------------------------------------------------------------
def test_predict_cli_prints_the_table(capsys):
    assert cli.main(["predict", "--gpu", "H200", "--model", "8B", "--context", "1024"]) == 0
    out = capsys.readouterr().out
    assert "a model, not a measurement" in out and "Llama-3.1-8B" in out and "ridge 206 FLOP/byte" in out
    assert "depth 8: falls below plain decoding at batch" in out
    assert cli.main(["predict", "--gpu", "T4", "--model", "8B"]) == 2
    assert "no bfloat16" in capsys.readouterr().err
    assert cli.main(["predict", "--gpu", "H300"]) == 2
    assert cli.main(["predict", "--context", "-1"]) == 2
    text = prediction_table("B200", "70B", 0, 0.9, 0.0, "float16", "none")
    assert "note: B200 bandwidth" in text and not math.isnan(len(text))
