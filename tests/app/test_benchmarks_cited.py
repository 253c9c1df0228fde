"""The Benchmarks page's GPU view: Spec-Bench's own leaderboard (cited, assets/spec_bench/leaderboard.json) beside
the shipped CPU recording at batch 1: the file read with strict checks (hostile files get one line), each cited method
paired with the SpecLab drafter the recording ran, the chart drawing both sides' numbers, the sentences stating only
numbers the table shows, and the page folding it all under one expander and serving on when the file is bad."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from app.benchmarks import cited
from app.views import benchmarks_cited as C
from engine.bench import task_records
from engine.bench.prompt_files import task_name
from engine.bench.tasks import CONTENDERS

RECORDING = Path(__file__).resolve().parents[2] / "assets" / "spec_bench" / "recording.json"


@pytest.fixture(scope="module")
def board() -> dict:
    return cited.load()


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return task_records.load(RECORDING)["rows"]


def test_the_shipped_leaderboard_names_its_source_and_pairs_every_method_with_a_recorded_drafter(board, rows):
    assert board["source"]["commit"] in board["source"]["url"] and board["source"]["license"] == "Apache-2.0"
    assert {m["drafter"] for m in board["methods"]} <= set(CONTENDERS)
    matched = C.pairs(board, rows)
    assert [p["method"] for p in matched] == [m["method"] for m in board["methods"]]
    for p in matched:
        assert p["tasks"] == ["mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag"]
        assert all(p["here"][t]["batch"] == 1 and p["here"][t]["contender"] == p["contender"] for t in p["tasks"])


def test_the_chart_draws_both_sides_numbers_and_says_where_each_comes_from(board, rows):
    matched = C.pairs(board, rows)
    fig = C.figure(matched, "GPU, cited", "CPU, recorded", cited.label(board))
    bars = [t for t in fig.data if t.type == "bar"]
    assert len(bars) == 2 * len(matched)
    for i, p in enumerate(matched):
        gpu, cpu = bars[2 * i], bars[2 * i + 1]
        assert list(gpu.y) == [p["cited"][t] for t in p["tasks"]] and gpu.marker.pattern.shape == "/"  # not by colour alone
        assert list(cpu.y) == [p["here"][t]["speedup"] for t in p["tasks"]] and cpu.error_y.array is not None
        assert list(cpu.x) == [task_name(t) for t in p["tasks"]]
    assert "cited, not measured here" in fig.layout.title.text and board["source"]["commit"][:7] in fig.layout.title.text


def _numbers(text: str) -> list[str]:
    return re.findall(r"\d+\.\d\d", text)


def test_every_number_a_sentence_states_is_in_the_table_under_the_chart(board, rows):
    matched = C.pairs(board, rows)
    cells = " ".join(str(v) for row in C.table(matched) for v in row.values())
    lines = C.findings(matched)
    assert len(lines) == len(matched)
    for line in lines:
        assert _numbers(line) and all(n in cells for n in _numbers(line)), line


def test_the_same_tau_sentence_is_said_only_where_the_two_tau_are_close_both_ways(board, rows):
    lookup = [m for m in board["methods"] if m["drafter"] == "ngram"]
    near = copy.deepcopy(board) | {"methods": copy.deepcopy(lookup)}
    recorded = C.pairs(near, rows)[0]["tau_here"]
    near["methods"][0]["tau"] = recorded  # the same τ on both machines
    far = copy.deepcopy(near)
    far["methods"][0]["tau"] = recorded * (1 + 2 * C.SAME_TAU)
    assert "about as many tokens a pass" in C.findings(C.pairs(near, rows))[0]
    assert "about as many tokens a pass" not in C.findings(C.pairs(far, rows))[0]
    median = sorted(r["speedup"] for r in C.pairs(near, rows)[0]["here"].values())
    slow, fast = copy.deepcopy(near), copy.deepcopy(near)
    slow["methods"][0]["overall"], fast["methods"][0]["overall"] = min(median) / 2, max(median) * 2
    assert "what drafting and a verify pass" in C.findings(C.pairs(fast, rows))[0]  # the GPU made more of the same τ
    assert "what drafting and a verify pass" not in C.findings(C.pairs(slow, rows))[0]  # no reason given for a gap not there


def test_a_method_without_a_recorded_counterpart_is_left_out(board, rows):
    other = copy.deepcopy(board)
    other["methods"][0]["drafter"] = "no_such_drafter"
    assert [p["method"] for p in C.pairs(other, rows)] == [m["method"] for m in board["methods"][1:]]
    assert C.pairs(board, [r for r in rows if r["batch"] != 1]) == []


def _hostile(board: dict) -> list[tuple[str, bytes]]:
    def edited(fn) -> bytes:
        d = copy.deepcopy(board)
        fn(d)
        return json.dumps(d).encode()

    return [
        ("not JSON", b"{not json"),
        ("not an object", b"[1, 2]"),
        ("another format", edited(lambda d: d.update(format="speclab-cited-leaderboard/0"))),
        ("missing a field", edited(lambda d: d.pop("device"))),
        ("an unknown field", edited(lambda d: d.update(extra=1))),
        ("no methods", edited(lambda d: d.update(methods=[]))),
        ("a speedup out of range", edited(lambda d: d["methods"][0]["speedup"].update(qa=1e6))),
        ("a speedup as text", edited(lambda d: d["methods"][0]["speedup"].update(qa="2x"))),
        ("no tasks", edited(lambda d: d["methods"][0].update(speedup={}))),
        ("τ below one", edited(lambda d: d["methods"][0].update(tau=0.5))),
        ("NaN", json.dumps(board).replace("3.61", "NaN").encode()),
        ("too large", b" " * (cited.MAX_BYTES + 1)),
        ("not UTF-8", b"\xff\xfe"),
    ]


def test_hostile_files_get_one_line_each(board, tmp_path):
    for name, raw in _hostile(board):
        path = tmp_path / "leaderboard.json"
        path.write_bytes(raw)
        with pytest.raises(cited.CitedError) as err:
            cited.load(path)
        assert "\n" not in str(err.value) and str(err.value), name
    with pytest.raises(cited.CitedError, match="cannot read"):
        cited.load(tmp_path / "missing.json")


def test_the_page_folds_the_gpu_view_and_serves_on_with_a_bad_file(board, rows, tmp_path, monkeypatch):
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    main = str(Path(__file__).resolve().parents[2] / "app" / "main.py")

    def page() -> AppTest:
        at = AppTest.from_file(main, default_timeout=600)
        at.switch_page("benchmarks/benchmarks.py")
        return at.run()

    at = page()
    assert not at.exception and not at.error
    folded = [e for e in at.expander if e.label.startswith("On a GPU")]
    assert len(folded) == 1 and board["model"] in folded[0].label and "cited, not measured here" in folded[0].label
    figures = [str(e.proto.spec) for e in folded[0].get("plotly_chart")]
    assert len(figures) == 1 and "cited, not measured here" in figures[0]
    markdown = "\n".join(str(m.value) for m in folded[0].markdown)
    assert all(line in markdown for line in C.findings(C.pairs(board, rows)))
    bad = tmp_path / "leaderboard.json"
    bad.write_text("{")
    monkeypatch.setattr(cited, "LEADERBOARD", bad)
    at = page()
    assert not at.exception and not [e for e in at.expander if e.label.startswith("On a GPU")]
    assert any("cited GPU leaderboard cannot be shown" in w.value for w in at.warning)
