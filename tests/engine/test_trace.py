"""Traces: JSON round trip, refusal of corrupt files, summary fields."""

from __future__ import annotations

import json

import pytest
from conftest import PROMPTS

from engine import DecodeConfig, Trace, TraceError, generate


# --- trace -------------------------------------------------------------------------------------
def test_trace_round_trip(tiny, tmp_path):
    trace = generate(tiny, PROMPTS, DecodeConfig(depth=3, drafter="ngram", max_new_tokens=12))
    path = tmp_path / "t.json"
    trace.to_json(path)
    loaded = Trace.from_json(path)
    assert loaded.to_dict() == json.loads(path.read_text())
    assert loaded.output_ids == trace.output_ids and loaded.summary == trace.summary
    assert loaded.steps[1].seqs[0].drafted == trace.steps[1].seqs[0].drafted
    assert [s.policy_ms for s in loaded.steps] == [s.policy_ms for s in trace.steps]  # the strict loader keeps it
    assert list(tmp_path.iterdir()) == [path]  # atomic write leaves no temp file


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be an object"),
        (b'{"schema": "other/9"}', "unsupported trace schema"),
        (b'{"schema": "speclab.trace/1", "config": {}}', "missing"),
        (b'{"schema": "speclab.trace/1", "config": {}, "sequences": [], "summary": {}, "steps": [{"bogus": 1}]}', "malformed"),
    ],
)
def test_corrupt_trace_is_refused(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=message):
        Trace.from_json(path)


def test_summary_fields(tiny):
    trace = generate(tiny, PROMPTS, DecodeConfig(depth=2, max_new_tokens=8))
    for key in [
        "new_tokens",
        "wall_s",
        "tokens_per_s",
        "target_forwards",
        "device",
        "dtype",
        "acceptance_rate",
        "alpha",
        "mean_accepted",
        "tokens_per_step",
        "per_position_acceptance",
        "flops",
        "flops_wasted",
        "bytes",
    ]:
        assert key in trace.summary
    assert trace.summary["new_tokens"] == 24
    assert abs(trace.summary["tokens_per_step"] - trace.summary["mean_accepted"] - 1) < 1e-12
    assert len(trace.summary["per_position_acceptance"]) == 2


def test_decoding_is_timed_apart_from_the_prompts_pass(tiny):
    """ttft_s is the prefill step's end; decode_tokens_per_s counts only tokens written after it, over the time after
    it; at batch 1, tpot_ms x decode_tokens_per_s = 1000. tokens_per_s keeps its whole-run meaning."""
    one = generate(tiny, PROMPTS[:1], DecodeConfig(depth=2, max_new_tokens=8))
    s = one.summary
    prefill = one.steps[0]
    assert prefill.kind == "prefill" and s["ttft_s"] == pytest.approx(prefill.t_end_s)
    written = sum(len(q.emitted) for st in one.steps if st.kind == "decode" for q in st.seqs)
    assert written == s["new_tokens"] - 1  # the first token comes from the prompt's pass
    assert s["decode_tokens_per_s"] == pytest.approx(written / (s["wall_s"] - s["ttft_s"]))
    assert s["tpot_ms"] * s["decode_tokens_per_s"] == pytest.approx(1000.0, rel=1e-6)
    assert s["tokens_per_s"] == pytest.approx(s["new_tokens"] / s["wall_s"])
    batch = generate(tiny, PROMPTS, DecodeConfig(mode="autoregressive", max_new_tokens=6)).summary
    assert batch["ttft_s"] > 0 and batch["decode_tokens_per_s"] > 0 and batch["tpot_ms"] > 0


def test_a_run_with_nothing_after_the_first_token_has_no_decode_rate(tiny):
    s = generate(tiny, PROMPTS[:1], DecodeConfig(mode="autoregressive", max_new_tokens=1)).summary
    assert s["new_tokens"] == 1 and s["ttft_s"] > 0
    assert s["decode_tokens_per_s"] is None and s["tpot_ms"] is None


def test_every_shipped_trace_carries_its_decode_timing_and_a_trace_without_it_is_refused():
    """The shipped sample traces carry the decode fields, equal to what engine.trace.records.decode_timing computes
    from their own steps (they were migrated once, from those steps); a trace without one of them is refused in one
    line naming it, so no reader falls back to the whole-run rate."""
    from pathlib import Path

    from engine.trace.records import decode_timing

    paths = sorted((Path(__file__).resolve().parents[2] / "assets" / "traces").glob("*-*.json"))
    assert len(paths) == 4
    for path in paths:
        trace = Trace.from_json(path)
        assert {k: trace.summary[k] for k in ("ttft_s", "decode_tokens_per_s", "tpot_ms")} == decode_timing(
            trace.steps, trace.summary["wall_s"]
        )
        assert trace.summary["decode_tokens_per_s"] > 0
        for key in ("ttft_s", "decode_tokens_per_s", "tpot_ms"):
            raw = json.loads(path.read_text())
            raw["summary"].pop(key)
            with pytest.raises(TraceError, match=f"summary is missing {key}"):
                Trace.from_json_bytes(json.dumps(raw).encode())


def test_a_bad_decode_rate_is_refused_with_one_line(tiny, tmp_path):
    raw = generate(tiny, PROMPTS[:1], DecodeConfig(depth=2, max_new_tokens=4)).to_dict()
    raw["summary"]["decode_tokens_per_s"] = "fast"
    with pytest.raises(TraceError, match="summary.decode_tokens_per_s"):
        Trace.from_json_bytes(json.dumps(raw).encode())
