"""engine/bench/rates.py: the benchmark scripts' median [min, max] table and ratios (of medians, per round)."""

from engine.bench.rates import rate_lines, ratio_lines


def test_rate_lines_show_median_min_max():
    lines = rate_lines({"fast": [30.0, 10.0, 20.0], "slow": [5.0, 6.0, 7.0], "none": []})
    assert lines[0].split() == ["contender", "median", "tok/s", "min", "max"]
    assert lines[1].split() == ["fast", "20.00", "10.00", "30.00"]
    assert lines[2].split() == ["slow", "6.00", "5.00", "7.00"]
    assert len(lines) == 3  # a contender without rounds is left out


def test_ratio_lines_pair_rounds_and_skip_missing():
    rates = {"a": [10.0, 40.0, 20.0], "b": [5.0, 10.0, 10.0]}
    lines = ratio_lines(rates, [("a", "b"), ("a", "missing")])
    assert len(lines) == 2
    # medians 20 / 10 = 2.00x; per round 2, 4, 2 -> median 2, min 2, max 4
    assert lines[1].split() == ["a", "/", "b", "2.00x", "2.00x", "2.00x", "4.00x"]


def test_backend_lane_sets_the_pass_and_decodes(tiny, monkeypatch):
    """engine.bench.harness.backend_lane: the benchmark scripts' contender runs on its backend, n tokens."""
    from conftest import PROMPTS

    from engine import DecodeConfig
    from engine.bench import harness

    seen = []
    real = harness._ours
    monkeypatch.setattr(harness, "_ours", lambda pair, prompts, cfg, repeats: seen.append(cfg.backend) or real(pair, prompts, cfg, repeats))
    run = harness.backend_lane(tiny, DecodeConfig(mode="autoregressive", max_new_tokens=99), "torch")
    got = run(PROMPTS[:1], 5)
    assert seen == ["torch"]
    assert len(got["outputs"][0]) == 5 and got["tokens_per_s"] > 0
