"""One decode-rate rule (engine/trace/rates.py): a trace's summary, the bench's cells and the app's lanes all take
their decode rate, and its fallback to the whole-run rate, from it; no other module computes one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import PROMPTS

from engine import DecodeConfig, generate
from engine.bench.cells import run_cell
from engine.trace.rates import decode_rate, decode_tokens, joined_decoding, ranking_rate

ROOT = Path(__file__).resolve().parents[2]


def test_a_traces_decode_rate_is_its_decode_tokens_over_the_time_after_the_prefill(tiny):
    trace = generate(tiny, PROMPTS[:2], DecodeConfig(depth=2, drafter="model", max_new_tokens=10))
    s = trace.summary
    tokens = decode_tokens(trace.steps)
    assert tokens == sum(len(q) for q in trace.output_ids) - 2  # every row's first token came from the prefill
    assert s["decode_tokens_per_s"] == pytest.approx(tokens / (s["wall_s"] - s["ttft_s"]))
    assert ranking_rate(s) == s["decode_tokens_per_s"]
    joined = joined_decoding([trace, trace])
    assert joined["decode_tokens"] == 2 * tokens and joined["ttft_s"] == pytest.approx(2 * s["ttft_s"])
    assert joined["decode_tokens_per_s"] == pytest.approx(s["decode_tokens_per_s"])


def test_no_decode_step_no_decode_rate_and_the_whole_run_rate_ranks_it():
    assert decode_rate(0, 1.0) is None and decode_rate(5, 0.0) is None and decode_rate(6, 2.0) == 3.0
    assert ranking_rate({"decode_tokens_per_s": None, "tokens_per_s": 7.5}) == 7.5
    with pytest.raises(KeyError):  # no fallback for stats without the field: every run's stats carry it
        ranking_rate({"tokens_per_s": 7.5})
    assert ranking_rate({"decode_tokens_per_s": 9.0, "tokens_per_s": 7.5}) == 9.0


def test_a_bench_cell_ranks_its_runs_by_the_same_rule(tiny):
    cell = run_cell(tiny, PROMPTS[:1], DecodeConfig(mode="autoregressive", max_new_tokens=6), repeats=3)
    assert sorted(cell["decode_tokens_per_s_runs"])[1] == cell["decode_tokens_per_s"]  # the median of the rule's rates
    one_token = run_cell(tiny, PROMPTS[:1], DecodeConfig(mode="autoregressive", max_new_tokens=1), repeats=1)
    assert one_token["decode_tokens_per_s"] == one_token["tokens_per_s"]  # nothing decoded: the whole run ranks it


def test_only_the_rates_module_computes_a_decode_rate():
    pattern = re.compile(r"/\s*decode_s\b")
    found = sorted(
        str(path.relative_to(ROOT))
        for folder in ("engine", "app/common", "app/views", "app/playground", "app/sweep")
        for path in (ROOT / folder).rglob("*.py")
        if pattern.search(path.read_text())
    )
    assert found == ["engine/trace/rates.py"]
