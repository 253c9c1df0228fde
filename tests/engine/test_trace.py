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
