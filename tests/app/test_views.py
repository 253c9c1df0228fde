"""Views are pure functions: test them on a small hand-built fixture trace (no model, no streamlit)."""

from __future__ import annotations

import json
import re

import plotly.graph_objects as go
import pytest

from app.lessons.kit.numbers import load_table, winners
from app.views import charts, depth_policy, metrics, race, sweep, sweep_context, tokens
from engine.trace.file import Trace
from engine.trace.records import DraftToken, SeqStep, Step, TreeRecord, summarize


def _step(index, kind, depth, seqs, t0, t1, draft_ms=0.0, verify_ms=10.0):
    return Step(
        index=index,
        kind=kind,
        depth=depth,
        batch=len(seqs),
        tokens_per_pass=len(seqs) * (depth + 1),
        t_start_s=t0,
        t_end_s=t1,
        draft_ms=draft_ms,
        verify_ms=verify_ms,
        overhead_ms=0.5,
        target_flops=1e9 * (depth + 1),
        draft_flops=1e8 * depth,
        target_bytes=2.7e8,
        draft_bytes=1e8 if depth else 0.0,
        flops_wasted=0.0,
        util_pct=90.0,
        seqs=seqs,
    )


def _plain(seq, tid, text, p=0.9, finished=False):
    return SeqStep(
        seq=seq, drafted=[], num_accepted=0, next_id=tid, next_text=text, next_prob=p, next_kind="plain", emitted=[tid], finished=finished
    )


def _trace(steps, outputs, speculative, depth=0):
    new = sum(len(o) for o in outputs)
    wall = steps[-1].t_end_s
    return Trace(
        config={"mode": "speculative" if speculative else "autoregressive", "depth": depth, "temperature": 0.0},
        sequences=[{"prompt": f"p{i}", "prompt_tokens": 5, "output_ids": o, "text": ""} for i, o in enumerate(outputs)],
        steps=steps,
        summary=summarize(steps, new, wall, "cpu", "bfloat16", speculative),
        meta={"draft_name": "toy draft", "util_source": "psutil"},
    )


@pytest.fixture
def ar_trace():
    # two sequences, outputs: seq0 = [1,2,3,4], seq1 = [5,6,7,8]
    steps = [_step(0, "prefill", 0, [_plain(0, 1, "A"), _plain(1, 5, "E")], 0.0, 0.05)]
    for i in range(1, 4):
        steps.append(
            _step(i, "decode", 0, [_plain(0, 1 + i, "ABCD"[i]), _plain(1, 5 + i, "EFGH"[i])], 0.05 + 0.04 * (i - 1), 0.05 + 0.04 * i)
        )
    return _trace(steps, [[1, 2, 3, 4], [5, 6, 7, 8]], speculative=False)


@pytest.fixture
def spec_trace():
    # seq0: drafts [2,3] both accepted + bonus 4 -> [1,2,3,4] in one decode step.
    # seq1: drafts [6,99]: 6 accepted, 99 rejected, correction 7; then drafts [8,9] -> 8 accepted (cut at max tokens).
    s1 = [
        SeqStep(0, [DraftToken(2, "B", 0.8, 0.9, True), DraftToken(3, "C", 0.7, 0.6, True)], 2, 4, "D", 0.95, "bonus", [2, 3, 4], True),
        SeqStep(
            1, [DraftToken(6, "F", 0.9, 0.8, True), DraftToken(99, "<x>", 0.6, 0.1, False)], 1, 7, "G", 0.7, "correction", [6, 7], False
        ),
    ]
    s2 = [
        SeqStep(1, [DraftToken(8, "H", 0.5, 0.5, True), DraftToken(9, "I", 0.5, 0.5, True)], 2, 10, "J", 0.5, "bonus", [8], True),
    ]
    steps = [
        _step(0, "prefill", 0, [_plain(0, 1, "A"), _plain(1, 5, "E")], 0.0, 0.05),
        _step(1, "decode", 2, s1, 0.05, 0.10, draft_ms=4.0, verify_ms=42.0),
        _step(2, "decode", 2, s2, 0.10, 0.14, draft_ms=4.0, verify_ms=36.0),
    ]
    return _trace(steps, [[1, 2, 3, 4], [5, 6, 7, 8]], speculative=True, depth=2)


def test_token_records_kinds_and_positions(spec_trace):
    recs = tokens.token_records(spec_trace.steps, 2)
    assert [(r.text, r.kind, r.out_index) for r in recs[0]] == [
        ("A", "plain", 0),
        ("B", "accepted", 1),
        ("C", "accepted", 2),
        ("D", "bonus", 3),
    ]
    assert [(r.text, r.kind, r.out_index) for r in recs[1]] == [
        ("E", "plain", 0),
        ("F", "accepted", 1),
        ("<x>", "rejected", None),
        ("G", "correction", 2),
        ("H", "accepted", 3),
    ]  # the second accepted draft was cut by max_new_tokens
    # the output positions rebuild the output ids exactly
    for seq, out in enumerate(spec_trace.output_ids):
        assert len([r for r in recs[seq] if r.out_index is not None]) == len(out)


def test_tooltip_shows_q_p_and_acceptance(spec_trace):
    rej = [r for r in tokens.token_records(spec_trace.steps, 2)[1] if r.kind == "rejected"][0]
    tip = rej.tooltip()
    assert "q = 0.600" in tip and "p = 0.100" in tip and "min(1, p/q) = 0.167" in tip


def test_lane_html_classes_escaping_and_diff(spec_trace):
    recs = tokens.token_records(spec_trace.steps, 2)
    out = tokens.lane_html(recs, first_diff={1: 2})
    assert out.count('class="tok tok-acc"') >= 4
    assert 'class="tok tok-rej"' in out and "tok-fix" in out and "tok-bonus" in out
    assert "&lt;x&gt;" in out and "<x>" not in out  # token text is escaped
    assert out.count("tok tok-fix tok-diff") == 1  # seq 2, output token 3 (the correction) is marked
    assert "sequence 2" in out
    assert "min(1, p/q)" in out  # tooltips are title attributes


def test_first_differences():
    assert tokens.first_differences([[1, 2, 3], [4, 5]], [[1, 2, 3], [4, 6]]) == {1: 1}
    assert tokens.first_differences([[1, 2, 3]], [[1, 2]]) == {0: 2}
    assert tokens.first_differences([[1]], [[1]]) == {}


def test_race_html_is_self_contained_and_safe(ar_trace, spec_trace):
    ar = tokens.token_records(ar_trace.steps, 2)
    sp = tokens.token_records(spec_trace.steps, 2)
    sp[0][0].text = "</script><b>"
    out = race.race_html(ar, sp, ar_trace.summary["wall_s"], spec_trace.summary["wall_s"])
    assert out.count("</script>") == 1  # the payload cannot close the script tag
    payload = json.loads(re.search(r"const DATA = (.*);\n", out).group(1).replace("<\\/", "</"))
    assert [lane["name"] for lane in payload["lanes"]] == ["Autoregressive", "Speculative"]
    assert payload["lanes"][1]["total_s"] == pytest.approx(0.14)
    rejected = [t for t in payload["lanes"][1]["tokens"] if t[3] == "rejected"]
    assert rejected and "min(1, p/q)" in rejected[0][4]  # hover tooltips in the replay too
    assert "http" not in out  # nothing loaded from elsewhere
    for control in ('id="play"', 'id="step"', 'id="speed"', 'id="restart"'):
        assert control in out
    assert race.race_height(1) < race.race_height(3) == race.race_height(30)


def test_charts_are_figures(ar_trace, spec_trace):
    lat = charts.latency_figure(ar_trace, spec_trace)
    assert isinstance(lat, go.Figure)
    names = [t.name for t in lat.data]
    assert names == ["AR step", "draft", "verify (target pass)", "engine overhead"]
    assert list(lat.data[0].x) == [1, 2, 3]  # decode steps only
    assert list(lat.data[2].base) == [4.0, 4.0]  # verify stacked on draft
    tpp = charts.tokens_per_pass_figure(ar_trace, spec_trace)
    assert list(tpp.data[1].y) == [5, 1]  # emitted per speculative pass
    util = charts.utilization_figure(ar_trace, spec_trace, peak_bandwidth=34e9, peak_flops=4e11)
    bw, fl = charts.achieved(ar_trace.steps[1], 34e9, 4e11)
    assert 0 < fl < bw  # decoding is memory-bound: % of peak bandwidth exceeds % of peak FLOP/s
    assert len(util.data) == 6
    acc = charts.acceptance_figure(spec_trace)
    assert list(acc.data[0].y) == spec_trace.summary["per_position_acceptance"]


def test_compare_metrics(ar_trace, spec_trace):
    m = metrics.compare(ar_trace, spec_trace)
    a, s = ar_trace.summary, spec_trace.summary
    assert m["speedup"] == pytest.approx(s["decode_tokens_per_s"] / a["decode_tokens_per_s"])  # decoding alone
    assert m["whole_run_speedup"] == pytest.approx(s["tokens_per_s"] / a["tokens_per_s"])  # the prefill dilutes it
    assert m["whole_run_speedup"] < m["speedup"] and m["ar_ttft_s"] == a["ttft_s"]
    line = metrics.arithmetic_line(m)
    said = f"{m['speedup']:.2f}× as fast as plain decoding after the first token (decoding alone; {m['whole_run_speedup']:.2f}× over"
    assert said in line
    prefill_only = m | {"ar_decode_tokens_per_s": None}  # a run with no decode step: the one rule ranks its whole run
    assert "over the whole run (prefill included: a run with no decode step" in metrics.arithmetic_line(prefill_only)
    with pytest.raises(KeyError):  # no fallback for a comparison without the decode rates
        metrics.arithmetic_line({k: v for k, v in m.items() if not k.startswith(("ar_decode", "spec_decode"))})
    assert m["flops_ratio"] > 0
    # c = (8 ms draft / 4 drafted positions) / 10 ms AR step
    assert m["c"] == pytest.approx(0.2)
    assert m["predicted_speedup"] is not None and m["predicted_speedup"] > 1
    assert m["first_differences"] == {}
    assert "about the same as a plain step (0.93×" in metrics.verify_words(0.93)  # never cheaper than one token
    assert metrics.verify_words(1.31).startswith("A verify pass cost 1.31× a plain step")
    assert metrics.fmt_flops(2.5e9) == "2.5 GFLOP" and metrics.fmt_flops(160.02e9) == "160 GFLOP" and metrics.fmt(None) == "—"


def test_divergence_note():
    assert metrics.divergence_note(True, "bfloat16", {}) is None
    note = metrics.divergence_note(True, "bfloat16", {0: 12})
    assert "token 13" in note and "float32" in note and "round" in note
    assert "random" in metrics.divergence_note(False, "bfloat16", {0: 1})


GRID = [  # two batch sizes x two depths, one cell missing, as engine.bench.harness.bench returns them
    {
        "batch": 1,
        "depth": 2,
        "tokens_per_pass": 3,
        "ar_tokens_per_s": 20.04,
        "spec_tokens_per_s": 30.06,
        "speedup": 1.5,
        "whole_run_speedup": 1.234,
        "alpha": 0.712,
        "drafted_per_step": 1.984,
        "flops_ratio": 1.333,
    },
    {
        "batch": 1,
        "depth": 4,
        "tokens_per_pass": 5,
        "ar_tokens_per_s": 20.0,
        "spec_tokens_per_s": 36.0,
        "speedup": 1.8,
        "whole_run_speedup": 1.7,
        "alpha": 0.7,
        "flops_ratio": 1.6,
    },
    {
        "batch": 16,
        "depth": 2,
        "tokens_per_pass": 48,
        "ar_tokens_per_s": 200.0,
        "spec_tokens_per_s": 150.0,
        "speedup": 0.75,
        "whole_run_speedup": 0.8,
        "alpha": None,
        "drafted_per_step": None,
        "flops_ratio": None,
    },
]


def test_speedup_figure_is_a_batch_by_depth_heatmap():
    fig = sweep.speedup_figure(GRID)
    assert isinstance(fig, go.Figure) and len(fig.data) == 1
    heat = fig.data[0]
    assert heat.type == "heatmap"
    assert list(heat.x) == ["2", "4"] and list(heat.y) == ["1", "16"]  # depths across, batch sizes down
    assert [list(row) for row in heat.z] == [[1.5, 1.8], [0.75, None]]  # the missing cell stays empty
    assert [list(row) for row in heat.text] == [["1.50×", "1.80×"], ["0.75×", ""]]
    assert heat.zmid == 1.0  # speedup 1 (no gain) is the neutral colour
    assert fig.layout.xaxis.title.text == "speculation depth k" and fig.layout.yaxis.title.text == "batch size"
    assert len(sweep.speedup_figure([]).data) == 1  # nothing measured yet: an empty heatmap, no error


def test_grid_table_rounds_and_keeps_missing_values():
    table = sweep.grid_table(GRID)
    assert [(r["batch"], r["depth"]) for r in table] == [(1, 2), (1, 4), (16, 2)]
    assert table[0] == {
        "batch": 1,
        "context": 0,
        "policy": "fixed",
        "depth": 2,
        "tree": "chain",
        "mean k": None,
        "tokens/pass": 3,
        "AR tok/s": 20.0,
        "spec tok/s": 30.1,
        "speedup": 1.5,
        "whole-run speedup": 1.23,
        "α": 0.71,
        "drafted/step": 1.98,
        "tokens/step": None,
        "FLOPs × AR": 1.33,
        "load": "",
        "verdict (the one rule)": "can't tell: no rounds kept",
    }  # rows without policy/tree/load; "speedup" is decoding alone, the whole run's beside it
    assert table[1]["drafted/step"] is None  # older rows without the field
    decoded = sweep.grid_table([GRID[0] | {"ar_decode_tokens_per_s": 25.0, "spec_decode_tokens_per_s": 37.5}])[0]
    assert (decoded["AR tok/s"], decoded["spec tok/s"]) == (25.0, 37.5)  # the lanes' rates decoding alone, as the speedup
    assert table[2]["α"] is None and table[2]["FLOPs × AR"] is None


def test_a_cells_winner_comes_only_from_the_one_rule_over_its_rounds():
    faster = {**GRID[0], "ar_decode_runs": [20.0, 19.0, 21.0], "spec_decode_runs": [30.0, 29.0, 31.5]}
    noisy = {**GRID[1], "ar_decode_runs": [20.0, 20.0, 20.0], "spec_decode_runs": [40.0, 15.0, 36.0]}  # median 1.8x
    slower = {**GRID[2], "ar_decode_runs": [40.0, 41.0, 39.0], "spec_decode_runs": [30.0, 30.5, 29.0]}
    table = sweep.grid_table([faster, noisy, slower])
    assert table[0]["verdict (the one rule)"].startswith("faster: 1.5") and "95% range" in table[0]["verdict (the one rule)"]
    assert table[1]["verdict (the one rule)"].startswith("can't tell: ")  # a 1.8x median, but the rounds disagree
    assert table[2]["verdict (the one rule)"].startswith("slower: 0.7")
    line = sweep.grid_verdicts([faster, noisy, slower])
    assert line == (
        "Speculation against plain decoding, decoding alone, by the one rule: faster than plain in 1 cell (batch 1, k = 2); "
        "slower than plain in 1 cell (batch 16, k = 2); level in 0 cells; can't tell in 1 cell."
    )
    one = {**GRID[0], "ar_decode_runs": [20.0], "spec_decode_runs": [30.0]}
    assert sweep.grid_table([one])[0]["verdict (the one rule)"] == "one run each: can't tell; add rounds"
    assert sweep.grid_verdicts([one]).startswith("One run each: can't tell; add rounds")
    assert sweep.grid_verdicts(GRID) == "No cell kept its rounds, so no winner is named: can't tell."
    heat = sweep.speedup_figure([faster, noisy, slower]).data[0]
    assert heat.customdata[0][0].startswith("faster: ") and "%{customdata}" in heat.hovertemplate


def test_context_lines_set_each_cell_against_its_contexts():
    """A cell measured at several contexts: one line with its speedup and the one rule's word at each, shortest first;
    cells measured at one context, adaptive policies and trees get none."""
    short = {**GRID[2], "context": 0, "ar_decode_runs": [40.0, 41.0, 39.0], "spec_decode_runs": [30.0, 30.5, 29.0]}
    long = {**GRID[2], "context": 4096, "speedup": 1.25, "ar_decode_runs": [20.0, 19.0, 21.0], "spec_decode_runs": [25.0, 24.0, 26.5]}
    once = {**GRID[0], "context": 0, "ar_decode_runs": [20.0], "spec_decode_runs": [30.0]}
    tree = {**long, "tree_nodes": 8, "tree_topk": 2}
    assert sweep_context.context_lines([long, once, short, tree]) == ["batch 16, depth 2: 0.75× at 0 (slower), 1.25× at 4,096 (faster)"]
    assert sweep_context.context_lines(GRID) == []  # no context key: one context, nothing to set side by side
    assert sweep.grid_table([long])[0]["context"] == 4096
    fig = sweep_context.context_figure([long, once, short, tree])
    (line,) = fig.data  # one line: the one chain cell measured at two contexts
    assert line.name == "batch 16, k = 2" and list(line.x) == ["0 (none)", "4,096"] and list(line.y) == [0.75, 1.25]
    assert list(line.customdata) == ["slower", "faster"] and fig.layout.shapes[0].y0 == 1.0  # the rule's words; 1x drawn
    assert "context 4,096 tokens per row" in sweep.speedup_figure([long], 4096).layout.title.text
    assert "context 0 (no document)" in sweep.speedup_figure([short], 0).layout.title.text
    assert sweep.speedup_figure([short]).layout.title.text is None  # the recorded grid, no context axis: no title


def test_one_kv_guard_for_every_page():
    """batch x context against the server's guard (app/common/kv_guard.py): batch 8 at 4,096 fits a CPU, batch 16
    does not; a GPU holds sixteen times more; the refusal is one line naming the numbers and the fix."""
    from app.common.kv_guard import context_guard, context_problem

    assert context_problem(8, 4096, on_gpu=False) is None and context_problem(16, 4096, on_gpu=True) is None
    problem = context_problem(16, 4096, on_gpu=False, fix="smaller batch sizes or contexts")
    assert problem == (
        "batch 16 × context 4,096 = 65,536 tokens of KV cache, above this server's guard of 32,768. Fix: smaller batch sizes or contexts."
    )
    assert context_guard(True) == 16 * context_guard(False) and context_problem(129, 4096, on_gpu=True) is not None


def test_pass_table_shows_percent_of_measured_peaks():
    rows = [
        {
            "batch": 1,
            "new_tokens": 4,
            "tokens_per_pass": 4,
            "ms": 12.346,
            "ms_per_token": 3.0864,
            "achieved_bandwidth": 17e9,
            "achieved_flops": 2e10,
        }
    ]
    (row,) = sweep.pass_table(rows, peak_bandwidth=34e9, peak_flops=4e11)
    assert row == {
        "batch": 1,
        "tokens/row": 4,
        "tokens/pass": 4,
        "ms": 12.35,
        "ms/token": 3.086,
        "GB/s": 17.0,
        "GFLOP/s": 20.0,
        "% peak BW": 50,
        "% peak FLOP/s": 5,
    }


# --- depth per step and its summary (app/views/depth_policy.py) ---------------------------------
def _row(seq, k, accepted, emitted, finished=False):
    """A row's step record: k drafts, the first `accepted` of them kept, `emitted` tokens appended."""
    drafted = [DraftToken(100 + i, "x", 0.9, 0.9 if i < accepted else 0.1, i < accepted) for i in range(k)]
    kind = "bonus" if accepted == k else "correction"
    return SeqStep(seq, drafted, accepted, 7, "y", 0.9, kind, list(range(emitted)), finished)


def _load_trace(config: dict) -> Trace:
    """Three sequences, max 8 new tokens: k 4 at batch 3 for two steps, sequence 0 finishes, then k 2 at batch 2,
    then k 1 where the longest row has only 2 tokens left (the engine's cap: tokens left - 1)."""
    rows = [
        [_row(0, 4, 4, 5), _row(1, 4, 0, 1), _row(2, 4, 0, 1)],
        [_row(0, 4, 1, 2, True), _row(1, 4, 0, 1), _row(2, 4, 0, 1)],
        [_row(1, 2, 2, 3), _row(2, 2, 2, 3)],
        [_row(1, 1, 1, 2, True), _row(2, 1, 1, 2, True)],
    ]
    steps = [_step(0, "prefill", 0, [_plain(i, 1, "A") for i in range(3)], 0.0, 0.05)]
    for i, seqs in enumerate(rows, start=1):
        steps.append(_step(i, "decode", len(seqs[0].drafted), seqs, 0.05 * i, 0.05 * (i + 1), draft_ms=2.0))
    outputs = [[1] * 8, [1] * 8, [1] * 8]
    trace = _trace(steps, outputs, speculative=True, depth=4)
    trace.config |= {"max_new_tokens": 8, "drafter": "model", **config}
    return trace


def test_depth_points_track_k_batch_and_tokens_left():
    points = depth_policy.depth_points(_load_trace({"policy": "goodput"}))
    assert [(p.step, p.depth, p.batch) for p in points] == [(1, 4, 3), (2, 4, 3), (3, 2, 2), (4, 1, 2)]
    assert [p.tokens_left for p in points] == [7, 6, 5, 2]  # 8 - the fewest tokens any row in the pass had written
    assert [p.capped for p in points] == [False, False, False, True]
    changes = depth_policy.depth_changes(points)
    assert [(c.before.depth, c.at.depth, c.at.batch, c.at.step) for c in changes] == [(4, 2, 2, 3), (2, 1, 2, 4)]


def test_depth_summary_names_each_change_with_its_batch():
    line = depth_policy.depth_summary(_load_trace({"policy": "goodput"}))
    assert line == (
        "goodput (k ≤ 4): k = 4 at batch 3 → 2 at batch 2 (step 3) → 1 at batch 2 (step 4: the longest row had 2 tokens left to write)."
    )
    table = depth_policy.depth_summary(_load_trace({"policy": "batch_table", "batch_table": [[1, 2, 2], [3, 8, 4]]}))
    assert table.startswith("batch table [1-2:2, 3-8:4] (k ≤ 4): k = 4 at batch 3 → 2 at batch 2 (step 3)")
    derived = depth_policy.depth_summary(_load_trace({"policy": "batch_table", "batch_table": None}))
    assert derived.startswith("batch table derived from this machine's pass cost (k ≤ 4): k = 4 at batch 3")


def test_depth_summary_without_changes_and_for_shortening_drafters(spec_trace):
    assert depth_policy.depth_summary(spec_trace) == "fixed k = 2: k = 2 at all 2 decode steps, while the batch went from 2 to 1."
    ngram = depth_policy.depth_summary(_load_trace({"policy": "fixed", "drafter": "ngram"}))
    # the n-gram drafter may draft less than the policy asked: the line gives the most drafted per batch size
    assert ngram == (
        "fixed k = 4: up to k = 4 at batch 3 (mean 4.0 over 2 steps) → up to k = 2 at batch 2 (mean 1.5 "
        "over 2 steps); the n-gram drafter drafts less, or nothing, where it finds a short or no match."
    )
    gated = depth_policy.depth_summary(_load_trace({"policy": "off_above_batch", "confidence_threshold": 0.3, "disable_by_batch_size": 8}))
    assert gated.startswith("off above batch 8 (k = 4): up to k = 4 at batch 3") and "confidence falls below 0.30" in gated


def test_depth_summary_counts_changes_beyond_the_first_few():
    depths = [3, 1, 3, 1, 3, 1, 3]
    steps = [_step(0, "prefill", 0, [_plain(0, 1, "A")], 0.0, 0.01)]
    for i, k in enumerate(depths, start=1):
        steps.append(_step(i, "decode", k, [_row(0, k, k, k + 1)], 0.01 * i, 0.01 * (i + 1)))
    trace = _trace(steps, [[1] * (1 + sum(depths) + len(depths))], speculative=True, depth=3)
    trace.config |= {"policy": "heuristic", "disable_by_batch_size": 8, "max_new_tokens": 256, "drafter": "model"}
    line = depth_policy.depth_summary(trace)
    assert line.startswith("heuristic (start k = 3, off above batch 8): k = 3 at batch 1 → 1 at batch 1 (step 2)")
    assert line.endswith("… and 2 more changes (k between 1 and 3, mean 2.14 per decode step).")


def test_depth_summary_of_untrusted_configs_and_empty_runs(spec_trace):
    spec_trace.config = {"policy": "<img src=x onerror=alert(1)>", "depth": "4; rm"}
    assert depth_policy.depth_summary(spec_trace).startswith("an unknown policy: ")
    spec_trace.config = {"policy": "fixed", "depth": "<b>"}
    assert depth_policy.depth_summary(spec_trace).startswith("fixed k = ?: ")
    spec_trace.steps = spec_trace.steps[:1]  # prefill only
    assert depth_policy.depth_summary(spec_trace) == "fixed k = ?: no decode steps (every sequence finished at the prefill)."


def test_depth_figure_has_k_and_the_batch_on_a_second_axis():
    fig = depth_policy.depth_figure(_load_trace({"policy": "goodput"}))
    k, batch = fig.data
    assert list(k.x) == [1, 2, 3, 4] and list(k.y) == [4, 4, 2, 1] and k.line.shape == "hv"
    assert list(batch.y) == [3, 3, 2, 2] and batch.yaxis == "y2"
    assert [c[0] for c in k.customdata] == [3, 3, 2, 2]  # hover shows the batch beside k
    assert "goodput" in fig.layout.title.text
    curve = depth_policy.curve_figure((1, 2, 4), (10.0, 10.5, 12.0), "2026-12-01")
    assert list(curve.data[0].y) == [10.0, 10.5, 12.0] and curve.layout.xaxis.type == "log"


def test_tree_steps_show_their_size_in_the_summary_and_the_figure():
    """Goodput over trees: each tree step's nodes per row (Step.tree_nodes) in the points, the line and the figure;
    a trace written before that field gives the size through its tokens per pass where the rows hold trees."""
    trace = _load_trace({"policy": "goodput", "tree_nodes": 32, "tree_topk": 4, "drafter": "eagle"})
    for step, nodes in zip(trace.steps[1:3], (32, 9)):
        step.tree_nodes, step.tokens_per_pass = nodes, step.batch * (nodes + 1)
    points = depth_policy.depth_points(trace)
    assert [p.tree_nodes for p in points] == [32, 9, None, None]
    assert depth_policy.depth_summary(trace) == (
        "goodput (k ≤ 4, trees ≤ 32 nodes): k = 4 at batch 3 → 2 at batch 2 (step 3) → 1 at batch 2 (step 4: the longest "
        "row had 2 tokens left to write). Trees at 2 of 4 decode steps: 9 to 32 nodes per row (mean 20.5)."
    )
    k, tree, batch = depth_policy.depth_figure(trace).data
    assert list(tree.x) == [1, 2] and list(tree.y) == [32, 9] and tree.yaxis == "y" and batch.yaxis == "y2"
    older = trace.steps[2]
    older.tree_nodes = None
    older.seqs[0].tree = TreeRecord(parents=[-1] * 9, ids=[1] * 9, texts=["x"] * 9, q=[0.1] * 9, p=[0.1] * 9, accepted=[False] * 9)
    assert depth_policy.depth_points(trace)[1].tree_nodes == 9
    assert depth_policy.tree_text(depth_policy.depth_points(_load_trace({"policy": "goodput"}))) is None


# --- Sweep: adaptive policies beside the fixed depths -------------------------------------------
ADAPTIVE_GRID = [  # as engine.bench.harness.bench(policy=["fixed", "batch_table", "goodput"]) returns them
    {"batch": 1, "depth": 2, "policy": "fixed", "mean_depth": 2.0, "ar_tokens_per_s": 20.0, "spec_tokens_per_s": 30.0},
    {"batch": 1, "depth": 4, "policy": "fixed", "mean_depth": 4.0, "ar_tokens_per_s": 20.0, "spec_tokens_per_s": 36.0},
    {"batch": 1, "depth": 4, "policy": "batch_table", "mean_depth": 4.0, "ar_tokens_per_s": 20.0, "spec_tokens_per_s": 35.0},
    {"batch": 1, "depth": 4, "policy": "goodput", "mean_depth": 3.5, "ar_tokens_per_s": 20.0, "spec_tokens_per_s": 37.8},
    {"batch": 16, "depth": 2, "policy": "fixed", "mean_depth": 2.0, "ar_tokens_per_s": 200.0, "spec_tokens_per_s": 150.0},
    {"batch": 16, "depth": 4, "policy": "fixed", "mean_depth": 4.0, "ar_tokens_per_s": 200.0, "spec_tokens_per_s": 120.0},
    {"batch": 16, "depth": 4, "policy": "batch_table", "mean_depth": 0.0, "ar_tokens_per_s": 200.0, "spec_tokens_per_s": 196.0},
    {"batch": 16, "depth": 4, "policy": "goodput", "mean_depth": 0.25, "ar_tokens_per_s": 200.0, "spec_tokens_per_s": 190.0},
]
for _r in ADAPTIVE_GRID:
    _r |= {
        "speedup": _r["spec_tokens_per_s"] / _r["ar_tokens_per_s"],
        "whole_run_speedup": _r["spec_tokens_per_s"] / _r["ar_tokens_per_s"],
        "tokens_per_pass": _r["batch"] * (_r["depth"] + 1),
        "alpha": 0.6,
        "flops_ratio": 1.5,
    }


def test_speedup_figure_gives_adaptive_policies_their_own_columns():
    heat = sweep.speedup_figure(ADAPTIVE_GRID).data[0]
    assert list(heat.x) == ["2", "4", "batch_table ≤4", "goodput ≤4"]
    assert [round(v, 2) for v in heat.z[1]] == [0.75, 0.6, 0.98, 0.95]  # batch 16
    table = sweep.grid_table(ADAPTIVE_GRID)
    assert [(r["policy"], r["depth"], r["mean k"]) for r in table[4:]] == [
        ("fixed", 2, 2.0),
        ("fixed", 4, 4.0),
        ("batch_table", 4, 0.0),
        ("goodput", 4, 0.25),
    ]


def test_envelope_sets_adaptive_policies_against_the_best_static_choice():
    env = sweep.envelope(ADAPTIVE_GRID)
    one, sixteen = env
    assert (one["batch"], one["best_fixed_depth"], one["best_fixed"], one["envelope"], one["envelope_is"]) == (1, 4, 36.0, 36.0, "k = 4")
    assert (sixteen["best_fixed_depth"], sixteen["envelope"], sixteen["envelope_is"]) == (2, 200.0, "AR")
    assert one["adaptive"]["goodput"]["vs_envelope"] == pytest.approx(1.05)
    assert sixteen["adaptive"]["batch_table"]["vs_envelope"] == pytest.approx(0.98)
    fig = sweep.envelope_figure(env)
    assert [t.name for t in fig.data] == ["max(AR, best fixed k)", "AR (plain decoding)", "best fixed k", "batch_table", "goodput"]
    assert list(fig.data[0].y) == [36.0, 200.0] and list(fig.data[2].text) == ["k=4", "k=2"]
    assert list(fig.data[4].y) == [37.8, 190.0]
    table = sweep.envelope_table(env)
    assert table[1] == {
        "batch": 16,
        "AR tok/s": 200.0,
        "best fixed k": 2,
        "best fixed tok/s": 150.0,
        "envelope tok/s": 200.0,
        "batch_table tok/s": 196.0,
        "batch_table mean k": 0.0,
        "batch_table × envelope": 0.98,
        "goodput tok/s": 190.0,
        "goodput mean k": 0.25,
        "goodput × envelope": 0.95,
    }
    lines = sweep.envelope_summary(env)
    assert lines[1] == (
        "goodput ran at 1.05× at batch 1 (mean k 3.5; envelope: k = 4), 0.95× at batch 16 (mean k "
        "0.2; envelope: AR) of max(AR, best fixed k)."
    )
    assert sweep.envelope([]) == [] and sweep.envelope_summary([]) == []


# --- Lesson 6: tokens/s against batch size per policy (app/lessons/kit/numbers.py) ------------------------
LOAD_ROWS = [
    {
        "batch": b,
        "contender": name,
        "tokens_per_s": tps,
        "decode_tokens_per_s": tps,
        "mean_depth": k,
        "alpha": None if name == "plain" else 0.6,
    }
    for b, name, tps, k in [
        (1, "plain", 20.0, 0.0),
        (1, "fixed k = 4", 30.0, 4.0),
        (1, "goodput", 31.5, 3.6),
        (16, "plain", 100.0, 0.0),
        (16, "fixed k = 4", 70.0, 4.0),
        (16, "goodput", 98.0, 0.3),
    ]
]


def test_load_views_compute_winners_and_the_prediction():
    assert [(w["batch"], w["winner"], w["runner_up"]) for w in winners(LOAD_ROWS)] == [
        (1, "goodput", "fixed k = 4"),
        (16, "plain", "goodput"),
    ]
    assert winners(LOAD_ROWS)[0]["runner_up_tokens_per_s"] == pytest.approx(30.0)
    assert not any(w["clear"] for w in winners(LOAD_ROWS))  # one run each: no interval, no winner
    table = load_table(LOAD_ROWS, "plain")
    assert table[4] == {
        "batch": 16,
        "policy": "fixed k = 4",
        "decoding tokens/s": 70.0,
        "runs (decoding tokens/s)": "one run",
        "× plain": 0.7,
        "TPOT ms": None,
        "mean k": "4.00",
        "α": "0.60",
        "against the next (the rule's ratio, 95% range)": "",  # one run each: no rounds to judge by
    }


# --- issue 19: the regime is read from the numbers; Leviathan with the k drafted and the measured verify cost ----
def _pass_row(n, ms, flops, nbytes):
    return {
        "batch": 1,
        "new_tokens": n,
        "tokens_per_pass": n,
        "ms": ms,
        "ms_per_token": ms / n,
        "flops": flops,
        "bytes": nbytes,
        "achieved_flops": flops / (ms / 1000),
        "achieved_bandwidth": nbytes / (ms / 1000),
    }


def test_regime_is_decided_by_the_shares_of_the_peaks():
    from app.views import roofline

    assert roofline.regime(0.2, 0.03) == "overhead/latency-bound"  # neither unit near its peak
    assert roofline.regime(0.83, 0.04) == "memory-bound"
    assert roofline.regime(0.3, 0.7) == "compute-bound"
    assert roofline.regime(0.9, 0.6) == "memory-bound" and roofline.regime(0.6, 0.9) == "compute-bound"  # higher wins
    assert roofline.regime(0.49, 0.49) == "overhead/latency-bound" and roofline.regime(0.5, 0.0) == "memory-bound"
    assert roofline.regime(1.3, 0.05) == "memory-bound"  # above 100%: the quick probe underestimated the peak
    assert "50%" in roofline.REGIME_RULE and "overhead/latency-bound" in roofline.REGIME_RULE


def test_peak_shares_and_the_regime_summary_come_from_the_rows():
    from app.views import roofline

    # peaks 10 GB/s and 100 GFLOP/s; 1 token: 540 MB in 100 ms = 5.4 GB/s (54%); 64 tokens: 17 GFLOP in 200 ms (85%)
    rows = [_pass_row(1, 100.0, 2.7e8, 5.4e8), _pass_row(64, 200.0, 1.7e10, 5.5e8)]
    shares = roofline.peak_shares(rows, 10e9, 100e9)
    assert [s["regime"] for s in shares] == ["memory-bound", "compute-bound"]
    assert shares[0]["bandwidth_share"] == pytest.approx(0.54) and shares[0]["intensity"] == pytest.approx(0.5)
    text = roofline.regime_summary(rows, 10e9, 100e9, ridge_tokens=20.0)
    assert "1 token per pass: 54% of peak bandwidth, 3% of peak FLOP/s, **memory-bound**" in text
    assert "64 tokens per pass: 28% of peak bandwidth, 85% of peak FLOP/s, **compute-bound**" in text
    assert "64 tokens, is at or above the ridge" in text
    # the same passes on a machine with twice the bandwidth: the one-token pass reaches neither peak
    slow = roofline.regime_summary(rows[:1], 20e9, 100e9, ridge_tokens=20.0)
    assert "**overhead/latency-bound**" in slow and "1 token, is below the ridge" in slow
    fig = roofline.peak_share_figure(rows, 10e9, 100e9, ridge_tokens=20.0)
    assert [round(y) for y in fig.data[0].y] == [54, 28] and [round(y) for y in fig.data[1].y] == [3, 85]
    assert "counted bytes / measured time" in fig.data[0].name and "counted FLOPs" in fig.data[1].name
    assert roofline.regime_summary([], 10e9, 100e9, None) == ""


def test_leviathan_uses_the_k_drafted_and_the_measured_verify_cost(ar_trace, spec_trace):
    from engine.costs import expected_speedup, expected_tokens_per_step, operations_factor

    m = metrics.compare(ar_trace, spec_trace)
    alpha = 5 / 6  # 5 accepted, 1 rejection
    assert m["alpha"] == pytest.approx(alpha) and m["drafted_depth"] == pytest.approx(2.0)
    assert m["predicted_speedup"] == pytest.approx(expected_speedup(alpha, 2, 0.2))
    # T_verify / T_AR at the same rows in flight: the batch-2 verify (42 ms) over the AR's batch-2 steps (10 ms); the
    # batch-1 verify (36 ms, one row had finished) has no plain step at batch 1 to set it against
    assert m["median_verify_ratio"] == pytest.approx(4.2)
    assert m["predicted_measured_verify"] == pytest.approx(expected_tokens_per_step(alpha, 2) / (2 * 0.2 + 4.2))
    # ĉ: 4e8 draft FLOPs over 6 drafted tokens / (3e9 AR FLOPs over 6 tokens); the ops factor is Theorem 3.11's
    assert m["c_hat"] == pytest.approx((4e8 / 6) / (3e9 / 6))
    assert m["operations_factor"] == pytest.approx(operations_factor(alpha, 2, m["c_hat"])) and m["operations_factor"] > 1
    # the corrected model on plain numbers: a free verify (ratio 1) gives Leviathan's formula back
    assert metrics.leviathan_measured_verify(0.7, 4, 0.1, 1.0) == pytest.approx(expected_speedup(0.7, 4, 0.1))
    assert metrics.leviathan_measured_verify(0.7, 4, 0.1, 2.0) == pytest.approx(expected_tokens_per_step(0.7, 4) / (0.4 + 2.0))


def test_leviathan_uses_the_depth_drafted_not_the_configured_one(ar_trace):
    trace = _load_trace({"policy": "goodput"})  # configured depth 4; rows drafted 4, 4, 2, 1 per step
    m = metrics.compare(ar_trace, trace)
    assert m["depth"] == 4 and m["drafted_depth"] == pytest.approx((4 + 4 + 2 + 1) / 4)
    from engine.costs import expected_speedup

    assert m["predicted_speedup"] == pytest.approx(expected_speedup(m["alpha"], 2.75, m["c"]))
    assert m["predicted_speedup"] != pytest.approx(expected_speedup(m["alpha"], 4, m["c"]))


def test_arithmetic_line_says_at_least_as_much_and_decides_from_the_numbers(ar_trace, spec_trace):
    m = metrics.compare(ar_trace, spec_trace)
    line = metrics.arithmetic_line(m)
    assert "at least as much arithmetic" in line and "equal only when every draft is accepted and the drafter is free" in line
    assert "always does more" not in line
    # FLOPs set against Leviathan's factor on the same footing: the decode steps, per decoded token
    per = [
        sum(s.flops for s in t.steps if s.kind == "decode") / sum(len(q.emitted) for s in t.steps if s.kind == "decode" for q in s.seqs)
        for t in (ar_trace, spec_trace)
    ]
    assert m["decode_flops_ratio"] == pytest.approx(per[1] / per[0])
    assert f"its decode steps did {per[1] / per[0]:.2f}× plain decoding's FLOPs per decoded token" in line
    assert f"with the prompt's pass (prefill) included, {m['flops_ratio']:.2f}×" in line
    assert m["ar_decode_steps"] == 3 and m["spec_decode_steps"] == 2
    won = dict(m, speedup=1.4, step_cost_ratio=1.5, ar_decode_steps=30, spec_decode_steps=12, kept_per_step=2.5)
    assert (
        "it took 12 decode steps against 30 (2.50× fewer), and a speculative step cost 1.50 plain steps, which is "
        "why speculation paid" in metrics.arithmetic_line(won)
    )
    lost = dict(m, speedup=0.7, step_cost_ratio=3.0, ar_decode_steps=30, spec_decode_steps=15, kept_per_step=2.0)
    assert "which is why speculation slowed decoding down" in metrics.arithmetic_line(lost)
    # a batch: rows kept 2.4 tokens per step, but the slowest row set the count
    tail = dict(m, speedup=0.87, step_cost_ratio=1.95, ar_decode_steps=24, spec_decode_steps=14, kept_per_step=2.4)
    assert "a batch runs until its slowest sequence is done), which is why speculation slowed" in metrics.arithmetic_line(tail)
    mixed = dict(m, speedup=0.98, step_cost_ratio=1.5, ar_decode_steps=16, spec_decode_steps=10, kept_per_step=1.6)
    assert (
        "; the timed steps and the decode clock disagree within noise, and over the decode speculation slowed"
        in metrics.arithmetic_line(mixed)
    )


def test_greedy_tooltips_say_the_argmax_decided(spec_trace):
    recs = tokens.token_records(spec_trace.steps, 2, greedy=True)
    rejected = [r for r in recs[1] if r.kind == "rejected"][0].tooltip()
    accepted = [r for r in recs[0] if r.kind == "accepted"][0].tooltip()
    assert "min(1, p/q)" not in rejected + accepted
    assert "argmax here is another token" in rejected and "it is the target's argmax here" in accepted
    assert "min(1, p/q)" not in tokens.lane_html(recs)


def test_chart_legends_sit_under_the_plot_and_utilisation_is_labelled(ar_trace, spec_trace):
    lat = charts.latency_figure(ar_trace, spec_trace)
    assert lat.layout.legend.y < 0 and lat.layout.legend.yanchor == "top"  # not over the title
    util = charts.utilization_figure(ar_trace, spec_trace, 34e9, 4e11, "psutil CPU % (system-wide)")
    names = [t.name for t in util.data if t.showlegend is not False]
    assert names == [charts.BANDWIDTH_LABEL, charts.FLOPS_LABEL, "psutil CPU % (system-wide) (coarse gauge)"]
    assert "modelled bytes ÷ measured pass time" in names[0] and "modelled FLOPs ÷ measured pass time" in names[1]
