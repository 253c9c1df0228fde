"""The Lessons page's result charts and tables (app/views/bars.py): every shipped recording draws, the figures
carry the measurement's numbers and its label, hostile text is escaped, spread shows as whiskers only where the
run was repeated, and thin measurements (one row, missing optional fields) still draw."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

from app.lessons import registry
from app.lessons.kit import numbers
from app.lessons.kit.numbers import tpot_ms
from app.lessons.l2_more_flops import more_flops_figure
from app.lessons.l3_past_the_ridge import past_the_ridge_figure, ridge_points
from app.lessons.l4_turn_it_off import steps_figure, turn_it_off_figure, turn_it_off_table
from app.lessons.l5_adaptive import adaptive_figure, adaptive_table
from app.lessons.l6_by_load import by_load_figure
from app.lessons.l7_width import width_figure
from app.lessons.registry import EXPERIMENTS
from app.views.bars import HEADER_PX, MAX_LABEL, ROW_PX, esc, table_height
from engine import verdict

ROOT = Path(__file__).resolve().parents[2]
DRAWN = ("memory_bound", "more_flops", "past_the_ridge", "turn_it_off", "adaptive", "by_load", "width")
TABLED = ("more_flops", "past_the_ridge", "turn_it_off", "adaptive")
HOSTILE = '<img src=x onerror="alert(1)"><b>evil</b>'


def _rec(name: str) -> dict:
    return registry.load_record(ROOT / "assets" / "lessons" / f"{name}.json")


def _texts(fig) -> str:
    parts = [str(fig.layout.title.text)] + [str(a.text) for a in fig.layout.annotations]
    for tr in fig.data:
        parts += [str(tr.name), str(getattr(tr, "hovertemplate", "")), str(getattr(tr, "text", ""))]
    return "\n".join(parts)


@pytest.mark.parametrize("name", DRAWN)
def test_every_recording_draws_with_its_label(name):
    rec = _rec(name)
    label = f"recorded on {rec['machine']}, {rec['date']}"
    home = EXPERIMENTS[name].run.__module__  # the lesson's own module (or its folder's charts) draws it
    module = next(m for m in (sys.modules[home], sys.modules.get(home + ".charts")) if m and hasattr(m, f"{name}_figure"))
    fig = getattr(module, f"{name}_figure")(rec["measurement"], rec["settings"], label)
    assert fig.data, "a figure with no trace"
    assert rec["date"] in fig.layout.title.text and rec["machine"] in fig.layout.title.text
    fig.to_json()  # serialisable, as st.plotly_chart needs
    if name in TABLED:
        rows = EXPERIMENTS[name].table(rec["measurement"], rec["settings"])
        assert rows and table_height(rows) >= HEADER_PX + ROW_PX * len(rows)


def test_more_flops_draws_flops_bytes_and_time_per_decoded_token():
    m, s = _rec("more_flops")["measurement"], _rec("more_flops")["settings"]
    fig = more_flops_figure(m, s)
    ratios, useful, wasted = fig.data
    costs = m["decode_costs"]
    per = {k: (c["flops"] / c["tokens"], c["bytes"] / c["tokens"]) for k, c in costs.items()}
    assert list(ratios.x) == ["FLOPs done", "bytes moved", "time"]
    assert ratios.y[0] == pytest.approx(per["spec"][0] / per["ar"][0]) and ratios.y[1] == pytest.approx(per["spec"][1] / per["ar"][1])
    assert ratios.y[2] == pytest.approx(1 / numbers.speedup(m)["value"])  # time per decoded token: the speedup's inverse
    for i, key in enumerate(("ar", "spec")):
        assert (useful.y[i] + wasted.y[i]) * 1e6 == pytest.approx(per[key][0])
    # the trade the lesson argues, visible on this recording: FLOPs not fewer, bytes and time far fewer
    assert ratios.y[0] >= 1.0 and ratios.y[1] < 0.5 and ratios.y[2] < 1.0


def test_past_the_ridge_shows_speedups_per_drafter_and_tokens_against_the_room():
    rec = _rec("past_the_ridge")
    m, s = rec["measurement"], rec["settings"]
    points = ridge_points(m, s)
    big = max(r["batch"] for r in m["runs"])
    assert {(p["drafter"], p["batch"]) for p in points} == {
        ("EAGLE head", 1),
        ("EAGLE head", big),
        ("n-gram lookup, copy-this-text prompts", big),
    }
    run = next(r for r in m["runs"] if r["batch"] == big)
    eagle_big = next(p for p in points if p["drafter"] == "EAGLE head" and p["batch"] == big)
    assert eagle_big["speedup"] == numbers.speedup(run)["value"]  # the one statistic of chart, table and words
    assert eagle_big["spec_tokens"] == big * (m["chosen"]["depth"] + 1)
    fig = past_the_ridge_figure(m, s)
    assert f"room ≈ {m['chosen']['room']} tokens" in _texts(fig)
    bars = [tr for tr in fig.data if tr.type == "bar" and tr.name == "EAGLE head"][0]
    assert [round(y, 6) for y in bars.y] == [round(p["speedup"], 6) for p in points if p["drafter"] == "EAGLE head"]


def test_hostile_names_and_label_are_escaped():
    rec = _rec("by_load")
    m = copy.deepcopy(rec["measurement"])
    for r in m["rows"]:
        r["contender"] = HOSTILE + r["contender"]
    text = _texts(by_load_figure(m, rec["settings"], HOSTILE))
    assert "<img" not in text and "<b>evil" not in text and "&lt;img" in text
    w = copy.deepcopy(_rec("width"))
    for r in w["measurement"]["rows"]:
        r["contender"] = HOSTILE
    assert "<img" not in _texts(width_figure(w["measurement"], w["settings"], HOSTILE))
    assert len(esc("x" * 1000)) <= MAX_LABEL


def test_spread_draws_whiskers_only_when_repeated():
    rec = _rec("turn_it_off")
    m, s = copy.deepcopy(rec["measurement"]), rec["settings"]
    for key in ("ar", "on", "off"):  # an older recording's single runs ...
        m[key].pop("tokens_per_s_runs", None)
        m[key].pop("decode_tokens_per_s_runs", None)
    assert turn_it_off_figure(m, s).data[0].error_y.array is None  # ... draw no whisker
    for key, (lo, med, hi) in {"ar": (300, 330, 340), "on": (200, 210, 230), "off": (320, 335, 350)}.items():
        m[key]["decode_tokens_per_s_runs"] = {"values": [lo, med, hi], "median": med, "min": lo, "max": hi}
        m[key]["tokens_per_s_runs"] = m[key]["decode_tokens_per_s_runs"]
    bars = turn_it_off_figure(m, s).data[0]
    assert list(bars.y) == [330, 210, 335]
    assert list(bars.error_y.array) == [10, 20, 15] and list(bars.error_y.arrayminus) == [30, 10, 15]
    labels = turn_it_off_figure(m, s).data[1]  # each bar's label sits on its whisker's top, not on the whisker
    assert (
        labels.mode == "markers+text"
        and labels.marker.opacity == 0
        and list(labels.y) == [340, 230, 350]
        and list(labels.text) == ["330", "210", "335"]
    )
    assert labels.textposition == "top center" and labels.x == bars.x
    rows = turn_it_off_table(m, s)
    v = verdict.judge(m["off"]["decode_tokens_per_s_runs"]["values"], m["ar"]["decode_tokens_per_s_runs"]["values"])
    assert rows[0]["range (runs)"] == "300–340" and rows[2]["× plain (95% range)"] == f"{v.ratio:.2f}× ({verdict.span(v.lo, v.hi)})"


def test_time_per_output_token_is_the_engines_wall_clock_figure_only():
    """One TPOT (the engine's, wall clock): no rule of thumb stands in for it where a lane has none."""
    assert tpot_ms({"summary": {"tokens_per_s": 200.0}, "tpot_ms": 55.0}) == 55.0
    assert tpot_ms({"summary": {"tokens_per_s": 200.0}}) is None
    rec = _rec("by_load")
    tpot = by_load_figure(rec["measurement"], rec["settings"]).data[1]
    row = next(
        r
        for r in rec["measurement"]["rows"]
        if r["batch"] == int(tpot.x[-1]) and r["contender"] == rec["measurement"]["rows"][0]["contender"]
    )
    assert tpot.y[-1] == pytest.approx(row["tpot_ms"])  # the engine's, as the recording kept it


def test_thin_measurements_still_draw():
    one = {
        "drafter": "ngram",
        "rows": [
            {"batch": 1, "contender": "plain decoding", "tokens_per_s": 30.0, "decode_tokens_per_s": 30.0, "mean_depth": 0.0, "alpha": None}
        ],
    }
    assert len(by_load_figure(one, {}).data) == 2
    width = {
        "drafter": "eagle",
        "depth": 4,
        "nodes": 8,
        "topk": 4,
        "rows": [
            {
                "batch": 1,
                "contender": "tree",
                "tokens_per_s": 40.0,
                "decode_tokens_per_s": 40.0,
                "tokens_per_step": None,
                "tokens_per_pass": 9,
                "verify_ms": None,
                "flops": 1.0,
            }
        ],
    }
    fig = width_figure(width, {})
    bars, labels, emitted = fig.data  # the rate's bar, its label above it, tokens kept per step
    assert bars.hovertext == ("9 tok/pass",) and labels.text == ("40",) and emitted.y == (None,)
    rec = _rec("adaptive")
    m = copy.deepcopy(rec["measurement"])
    m["batches"] = m["batches"][:1]
    for key in ("m_fixed", "m_gated"):
        m["batches"][0][key].pop("drafted_depth")
    fig = adaptive_figure(m, rec["settings"])
    assert fig.data[0].y == (None,)
    assert adaptive_table(m, rec["settings"])[0]["drafted per step"] is None


def test_table_height_shows_batch_16_rows_without_scrolling():
    rec = _rec("by_load")
    rows = rec["measurement"]["rows"]
    assert table_height(rows) >= HEADER_PX + ROW_PX * len(rows)
    assert table_height([]) == HEADER_PX + ROW_PX


def test_lesson4_switch_line_is_named_in_the_legend_not_written_on_the_bars():
    """The switch's N was an annotation at the strip's right end, over the depth bars; it is a dotted trace named in
    the legend, spanning every step, at N."""
    rec = _rec("turn_it_off")
    m = rec["measurement"]
    fig = steps_figure(m)
    n = m["chosen"]["n"]
    lines = [tr for tr in fig.data if tr.name and tr.name.startswith(f"switch: N = {n}")]
    assert len(lines) == len(m["steps"]) - 1 and [tr.showlegend for tr in lines] == [True, False]
    assert all(list(tr.y) == [n, n] and tr.line.dash == "dot" for tr in lines)
    assert not any((a.text or "").startswith("switch: N") for a in fig.layout.annotations)  # only the subplot titles


def test_lesson_7_labels_the_tokens_each_step_kept_as_its_table_does():
    rec = _rec("width")
    fig = width_figure(rec["measurement"], rec["settings"])
    right = [t for t in fig.data if t.type == "scatter" and t.xaxis == "x2"]  # the labels over the right panel's bars
    kept = [
        r.get("tokens_per_step") or 1.0
        for r in rec["measurement"]["rows"]
        if r.get("tokens_per_step") or r["contender"] == "plain decoding"
    ]
    assert right and sorted(float(x) for t in right for x in t.text) == sorted(round(k, 2) for k in kept)
    top = max(y for t in right for y in t.y)
    assert fig.layout.yaxis2.range[1] > top  # headroom over the tallest bar, so its label is not on the frame
