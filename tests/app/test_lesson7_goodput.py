"""Lesson 7's fourth contender, the goodput policy with trees allowed (app/lessons/l7_width.py): its comparison with
the fastest fixed shape (the table's rule column) follows the numbers both ways and only beyond the spread, its
notes, table row and per-step strip read the recorded shapes, the schema takes the new keys and refuses bad ones,
and an older recording without a goodput row still loads and draws as before."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from app.common import measurement
from app.lessons import registry
from app.lessons.l7_width import notes, shapes_figure, shapes_text, width_figure, width_table
from app.lessons.registry import EXPERIMENTS

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = '<img src=x onerror="alert(1)"><b>evil</b>'


def _runs(rate: float, spread: float) -> dict:
    return measurement.spread([rate * (1 - spread), rate, rate * (1 + spread)])


def _shape(kind: str, nodes: int, depth: int | None = None) -> dict:
    return {"shape": kind, "nodes": nodes, "depth": nodes if depth is None else depth}


MIXED = [_shape("tree", 12, 4), _shape("tree", 8, 3), _shape("tree", 10, 4), _shape("chain", 4), _shape("chain", 2), _shape("plain", 0)]
PLAIN_ONLY = [_shape("plain", 0)] * 6


def _measurement(plain, chain, tree, goodput, shapes=(MIXED, PLAIN_ONLY), spread=0.02, big=16, nodes=24) -> dict:
    """Two batch sizes; tokens/s per (plain, chain, tree, goodput) as given (a pair: batch 1, then `big`)."""
    rows = []
    for i, batch in enumerate((1, big)):
        for name, rate, per_row in (("plain decoding", plain[i], 0), ("chain", chain[i], 4), ("tree", tree[i], nodes)):
            rows.append(
                {"batch": batch, "contender": name, "tokens_per_s": rate, "tokens_per_step": None if per_row == 0 else 2.5}
                | {
                    "tokens_per_pass": batch * (per_row + 1),
                    "verify_ms": 30.0,
                    "flops": 1e9 * (per_row + 1),
                    "tokens_per_s_runs": _runs(rate, spread),
                    "decode_tokens_per_s": rate,
                    "decode_tokens_per_s_runs": _runs(rate, spread),
                }
            )
        if goodput is not None:
            fields = {"mean_nodes": sum(s["nodes"] for s in shapes[i]) / len(shapes[i]), "shapes": [dict(s) for s in shapes[i]]}
            rows.append(
                {"batch": batch, "contender": "goodput", "tokens_per_s": goodput[i], "tokens_per_step": 2.2, "verify_ms": 31.0}
                | {
                    "tokens_per_pass": round(batch * (fields["mean_nodes"] + 1)),
                    "flops": 2e9,
                    "tokens_per_s_runs": _runs(goodput[i], spread),
                    "decode_tokens_per_s": goodput[i],
                    "decode_tokens_per_s_runs": _runs(goodput[i], spread),
                }
                | fields
            )
    return {"drafter": "eagle", "depth": 4, "nodes": nodes, "topk": 6, "rows": rows, "ridge_tokens": 38.0}


# --- the comparison, both ways ------------------------------------------------------------------------
def _against(m: dict, batch: int) -> str:
    return next(r for r in width_table(m) if r["contender"] == "goodput" and r["batch"] == batch)["against (the rule's ratio, 95% range)"]


def test_goodput_is_set_against_the_fastest_fixed_shape_only_by_the_rule():
    # batch 1: the chain is the fastest fixed shape; batch 16: plain decoding is
    beat = _measurement((30, 480), (60, 340), (55, 200), (70, 470))
    assert _against(beat, 1).startswith("× chain: 1.17× (95% range 1.17–1.17×")
    assert _against(beat, 16).startswith("× plain decoding: 0.98×")
    short = _measurement((30, 480), (60, 340), (55, 200), (50, 470))
    assert _against(short, 1).startswith("× chain: 0.83×")
    without = copy.deepcopy(beat)
    for r in without["rows"]:
        r.pop("tokens_per_s_runs")
        r.pop("decode_tokens_per_s_runs")
    assert _against(without, 1) == ""  # no rounds: no ratio by the rule


def test_what_goodput_chose_is_read_from_its_steps():
    lines = notes(_measurement((30, 480), (60, 340), (55, 200), (61, 420)), {})
    assert (
        "Batch 1: goodput chose plain decoding at 1, a chain at 2 (k = 2 to 4) and a tree at 3 (8 to 12 nodes) of 6 decode steps." in lines
    )
    assert "Batch 16: goodput chose plain decoding at 6 of 6 decode steps." in lines
    assert shapes_text([_shape("tree", 6, 2)]) == "a tree at 1 (6 nodes) of 1 decode step"


def test_an_older_recording_draws_as_before():
    record = registry.load_record(ROOT / "assets" / "lessons" / "width.json")
    m = record["measurement"]
    if any(r["contender"] == "goodput" for r in m["rows"]):
        m = copy.deepcopy(m)
        m["rows"] = [r for r in m["rows"] if r["contender"] != "goodput"]
    assert len(notes(m, {})) == 2 and all("goodput" not in line for line in notes(m, {}))
    assert shapes_figure(m) is None  # no strip without goodput's steps
    assert [r["nodes per row (mean)"] for r in width_table(m)] == [0.0, m["depth"], m["nodes"]] * 2


# --- the table row and the strip --------------------------------------------------------------------
def test_goodput_row_in_the_table():
    m = _measurement((30, 480), (60, 340), (55, 200), (61, 420))
    table = width_table(m)
    one, sixteen = (r for r in table if r["contender"] == "goodput")
    assert one["tokens per pass"] == 7.0 and one["nodes per row (mean)"] == 6.0  # 1 × (6 + 1): the mean over its steps
    assert sixteen["tokens per pass"] == 16.0 and sixteen["nodes per row (mean)"] == 0.0
    assert one["runs (decoding tokens/s)"] == "59.8, 61.0, 62.2" and one["decoding tokens/s"] == 61.0
    chain = next(r for r in table if r["contender"] == "chain" and r["batch"] == 16)
    assert chain["tokens per pass"] == 80 and chain["nodes per row (mean)"] == 4.0  # the fixed shapes as before
    row = next(r for r in m["rows"] if r["contender"] == "goodput" and r["batch"] == 16) | {"tokens_per_step": None}
    assert width_table(m | {"rows": [row]})[0]["tokens kept per step"] == 1.0  # plain throughout: one per pass


def test_the_strip_draws_each_step_as_its_tokens_per_row():
    m = _measurement((30, 480), (60, 340), (55, 200), (61, 420))
    fig = shapes_figure(m, "recorded on a machine, 2026-12-01")
    assert "2026-12-01" in fig.layout.title.text and fig.layout.barmode == "overlay"
    bars = {(tr.name, tr.yaxis): tr for tr in fig.data}
    tree, chain, plain = bars[("tree of n nodes", "y")], bars[("chain of k", "y")], bars[("plain step", "y")]
    assert list(tree.x) == [1, 2, 3] and list(tree.y) == [13, 9, 11]  # n + 1 tokens per row
    assert list(chain.x) == [4, 5] and list(chain.y) == [5, 3] and list(plain.x) == [6] and list(plain.y) == [1]
    assert [tr.name for tr in fig.data if tr.yaxis == "y2"] == ["plain step"] and list(bars[("plain step", "y2")].y) == [1] * 6
    assert sum(tr.showlegend is not False for tr in fig.data) == 3  # each shape named once in the legend
    assert all(tr.width == 0.8 for tr in fig.data)  # one step wide: a lone plain step never covers its neighbours
    width_bars = width_figure(m, {}).data  # the same colours as the fixed chain and tree in the lesson's figure
    assert chain.marker.color == width_bars[2].marker.color and tree.marker.color == width_bars[4].marker.color
    assert "batch 1 (prompts in turn): 6 steps, 6.0 draft nodes a row on average" in fig.layout.annotations[0].text
    assert {a.text for a in fig.layout.annotations} >= {"fixed chain: 5", "fixed tree: 25"}
    assert "≈7 tok/pass" in width_bars[6].hovertext and "80 tok/pass" in width_bars[2].hovertext  # the bar's label is its rate
    assert "<img" not in str(shapes_figure(m, HOSTILE).layout.title.text)
    # each strip spans its steps, 1 to n, so no x tick "0" sits in the corner beside the y axis's "0" (a recording
    # whose strips autoranged below 1 drew the two on top of each other)
    assert [tuple(fig.layout[a].range) for a in ("xaxis", "xaxis2")] == [(0.5, 6.5), (0.5, 6.5)]
    fig.to_json()


# --- the schema ---------------------------------------------------------------------------------------
def record_with_goodput() -> dict:
    record = registry.load_record(ROOT / "assets" / "lessons" / "width.json")
    m = _measurement((30, 480), (60, 340), (55, 200), (61, 420), big=max(r["batch"] for r in record["measurement"]["rows"]))
    record["measurement"]["rows"] = [r for r in record["measurement"]["rows"] if r["contender"] != "goodput"] + [
        r for r in m["rows"] if r["contender"] == "goodput"
    ]
    return record


def test_a_recording_with_goodput_rows_round_trips(tmp_path):
    record = record_with_goodput()
    registry.save_record(record, tmp_path / "width.json")
    back = registry.load_record(tmp_path / "width.json")
    good = [r for r in back["measurement"]["rows"] if r["contender"] == "goodput"]
    assert [len(r["shapes"]) for r in good] == [6, 6] and good[0]["shapes"][0] == {"shape": "tree", "nodes": 12, "depth": 4}
    assert sum(line.startswith("Batch ") and "goodput chose" in line for line in notes(back["measurement"], {})) == 2


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r["shapes"][0].update(shape="wide"), r"rows\[6\]\.shapes\[0\]\.shape must be one of plain, chain, tree"),
        (lambda r: r["shapes"][1].update(nodes=-1), r"rows\[6\]\.shapes\[1\]\.nodes"),
        (lambda r: r["shapes"][2].pop("depth"), r"rows\[6\]\.shapes\[2\] is missing depth"),
        (lambda r: r.update(shapes=[_shape("plain", 0)] * 513), r"rows\[6\]\.shapes"),
        (lambda r: r.update(mean_nodes=None), r"rows\[6\]\.mean_nodes must be a finite number"),
    ],
)
def test_malformed_goodput_rows_are_refused_naming_the_field(tmp_path, mutate, message):
    record = record_with_goodput()
    mutate(record["measurement"]["rows"][6])
    (tmp_path / "width.json").write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(measurement.MeasurementError, match=message):
        registry.load_record(tmp_path / "width.json")


def test_the_worksheet_lists_goodputs_mean_pass():
    record = record_with_goodput()
    numbers = dict(EXPERIMENTS["width"].numbers(record["measurement"], record["settings"]))
    assert numbers["batch 1, goodput (≈7 tokens per pass)"] == "61.0 tokens/s decoding, 2.20 emitted per pass"
    big, depth = max(r["batch"] for r in record["measurement"]["rows"]), record["measurement"]["depth"]
    assert f"batch {big}, chain ({big * (depth + 1)} tokens per pass)" in numbers  # the fixed shapes as before
