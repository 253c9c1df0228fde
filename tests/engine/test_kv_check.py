"""The predictor's KV check (engine/roofline/kv_check.py): the shipped recording, the comparison hand-computed, hostile
files refused in one line naming the field, and a live measurement (engine/bench/kv_passes.py) the reader accepts."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from engine.bench.kv_passes import measure_kv_passes
from engine.costs import ModelCosts
from engine.hardware import probe
from engine.roofline.architectures import architecture
from engine.roofline.kv_check import (
    KV_RECORDING,
    KV_SCHEMA,
    MAX_KV_BYTES,
    kv_growth,
    kv_rows,
    parse_kv_check,
    read_kv_check,
)
from engine.roofline.predictor import pass_ms
from engine.roofline.recordings import RecordingError

# One layer, one KV head of 64 dims in bf16: 2 * 1 * 1 * 64 * 2 = 256 bytes of KV per token; 1 GB of weights.
COSTS = ModelCosts(
    linear_params=5 * 10**8, head_params=0, weight_bytes=10**9, n_layers=1, n_heads=1, n_kv_heads=1, head_dim=64, elem_bytes=2
)
RECORD = {
    "schema": KV_SCHEMA,
    "machine": "Intel(R) Xeon(R) Processor (2 threads)",
    "device": "cpu",
    "dtype": "bfloat16",
    "date": "2026-12-06",
    "note": "a quiet machine",
    "source": "a test",
    "torch": "2.9.0",
    "backend": "native",
    "rounds": 3,
    "repeats": 5,
    "probe": {"peak_bandwidth": 1e10, "peak_flops": 1e12, "quick": False, "device_name": "extra facts pass"},
    "model": {"name": "toy", **dataclasses.asdict(COSTS)},
    "passes": [
        {"batch": 2, "new_tokens": 1, "context": 1000, "ms": 200.0, "ms_low": 190.0, "ms_high": 230.0},
        {"batch": 2, "new_tokens": 1, "context": 1_000_000, "ms": 400.0, "ms_low": 400.0, "ms_high": 410.0},
        {"batch": 1, "new_tokens": 1, "context": 1000, "ms": 150.0, "ms_low": 150.0, "ms_high": 150.0},
    ],
}


def test_the_comparison_hand_computed():
    rec = parse_kv_check(RECORD, "toy.json")
    assert rec.machine.startswith("Intel") and rec.date == "2026-12-06" and rec.costs == COSTS and rec.device == "cpu"
    rows = kv_rows(rec)
    assert [(r.batch, r.context) for r in rows] == [(1, 1000), (2, 1000), (2, 1_000_000)]  # by batch, tokens, context
    # batch 2 over 1,000 tokens: 1e9 weight bytes + 2 rows * 256 B * 1,001 tokens = 1,000,512,512 B at 10 GB/s = 100.05 ms,
    # above the FLOPs' 1e9 * 2 rows / 1e12 = 2 ms: memory-bound, no overhead added.
    two = rows[1]
    assert two.predicted_ms == pytest.approx(100.0512512) == pass_ms(COSTS, rec.roof, 2, 1, 1000, "none")
    assert two.ratio == pytest.approx(100.0512512 / 200.0) and two.bound == "memory"
    assert two.kv_share == pytest.approx(512_512 / 1_000_512_512)
    assert (two.low_ms, two.measured_ms, two.high_ms) == (190.0, 200.0, 230.0)
    # a million tokens per row: 2 * 256 * 1,000,001 = 512,000,512 B more than the weights: the KV term is a third of the bytes
    assert rows[2].kv_share == pytest.approx(512_000_512 / 1_512_000_512)
    (growth,) = kv_growth(rows)  # batch 1 has one context only: no growth for it
    assert (growth.batch, growth.short, growth.long) == (2, 1000, 1_000_000)
    assert growth.measured_ms == 200.0
    assert growth.predicted_ms == pytest.approx(2 * 256 * 999_000 / 1e10 * 1000)  # the KV bytes added, at the bandwidth
    assert growth.ratio == pytest.approx(growth.predicted_ms / 200.0)


def test_the_shipped_recording_loads_labelled_with_its_machine_and_the_embedded_shape():
    rec = read_kv_check(KV_RECORDING)
    assert rec.device == "cpu" and "Processor" in rec.machine and rec.dtype == "bfloat16" and len(rec.date) == 10
    assert "load average" in rec.note and rec.rounds >= 3 and not rec.quick_probe
    assert {(p.batch, p.new_tokens, p.context) for p in rec.passes} == {
        (b, n, c) for b in (1, 8) for n in (1, 4) for c in (256, 1024, 4096)
    }
    assert rec.costs.kv_bytes_per_token == architecture("135M").costs("bfloat16").kv_bytes_per_token
    rows = kv_rows(rec)
    assert all(0 < r.ratio < 2 and r.low_ms <= r.measured_ms <= r.high_ms for r in rows)
    assert len(kv_growth(rows)) == 4


def _refusal(tmp_path, data=None, raw: bytes | None = None) -> str:
    path = tmp_path / "kv.json"
    path.write_bytes(raw if raw is not None else json.dumps(data).encode())
    with pytest.raises(RecordingError) as info:
        read_kv_check(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith("kv.json")
    return message


def _edit(change) -> dict:
    data = copy.deepcopy(RECORD)
    change(data)
    return data


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d.update(schema="speclab.kv_check/9"), "the recording.schema"),
        (lambda d: d.pop("machine"), "missing machine"),
        (lambda d: d.update(surprise=1), "unknown field 'surprise'"),
        (lambda d: d.update(date="yesterday"), "the recording.date"),
        (lambda d: d.update(device="tpu"), "the recording.device"),
        (lambda d: d["passes"][0].update(ms_low=250.0), "passes[0] must have 0 < ms_low <= ms <= ms_high"),
        (lambda d: d["passes"][1].update(batch=0), "passes[1] must have batch and new_tokens of at least 1"),
        (lambda d: d["passes"][2].update(ms="fast"), "the recording.passes[2].ms"),
        (lambda d: d["passes"].append(dict(d["passes"][0])), "passes[3] repeats an earlier pass"),
        (lambda d: d.update(passes=[]), "passes must hold at least one pass"),
        (lambda d: d["model"].update(elem_bytes=3), "model must have layers, KV heads"),
        (lambda d: d["model"].update(head_params=6 * 10**8), "model.head_params must be at most linear_params"),
        (lambda d: d["probe"].update(peak_bandwidth=0), "probe must have positive peaks"),
        (lambda d: d["model"].update(n_layers=-1), "the recording.model.n_layers"),
    ],
)
def test_a_bad_file_is_refused_in_one_line_naming_the_field(tmp_path, change, named):
    assert named in _refusal(tmp_path, _edit(change))


def test_files_that_are_not_recordings_are_refused_before_parsing(tmp_path):
    assert "not valid JSON" in _refusal(tmp_path, raw=b"{not json")
    assert "NaN" in _refusal(tmp_path, raw=json.dumps(RECORD).replace("200.0", "NaN").encode())
    assert "larger than" in _refusal(tmp_path, raw=b" " * (MAX_KV_BYTES + 1))
    assert "no such file" in str(pytest.raises(RecordingError, read_kv_check, tmp_path / "absent.json").value)


def test_passes_measured_in_rounds_make_a_recording_the_reader_accepts(tiny):
    peaks = probe(tiny.device, tiny.dtype, quick=True)
    lines = []
    record = measure_kv_passes(tiny, peaks, contexts=[64, 16], batches=[2], tokens=[1], repeats=1, rounds=2, log=lines.append)
    assert lines == ["round 1 of 2: context 16", "round 1 of 2: context 64", "round 2 of 2: context 16", "round 2 of 2: context 64"]
    rec = parse_kv_check(record, "live")
    assert rec.machine == peaks.device_name and rec.device == "cpu" and rec.rounds == 2 and rec.costs == tiny.target_costs
    assert [(p.batch, p.new_tokens, p.context) for p in rec.passes] == [(2, 1, 16), (2, 1, 64)]
    assert all(0 < p.ms_low <= p.ms <= p.ms_high for p in rec.passes)
    with pytest.raises(ValueError, match="does not fit the model's window"):
        measure_kv_passes(tiny, peaks, contexts=[tiny.max_context], batches=[1], tokens=[1])
    with pytest.raises(ValueError, match="one of each at least"):
        measure_kv_passes(tiny, peaks, contexts=[], batches=[1], tokens=[1])
