"""The views with untrusted or huge traces: linear token records, a race payload that cannot close its
script, bounded pages for the biggest uploads (issue 21). Pure functions, no streamlit, no model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import tomllib

from app.views import charts, depth_policy, race, tokens
from engine.trace import loader as trace_module
from engine.trace.records import DraftToken, SeqStep, Step

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = [
    "</script><script>window.__pwned=1</script>",
    "<!--<script>",
    "]]>",
    "&lt;&amp;",
    "\u2028\u2029",
    "![x](http://evil.example/x.png)",
    "<img src=x onerror=alert(1)>",
    "'\"`${1}",
]


def _spec_steps(n_steps: int, depth: int = 3, n_seqs: int = 1) -> list[Step]:
    """A valid speculative run: each row drafts `depth` tokens and accepts the first one."""
    steps = []
    for i in range(n_steps):
        rows = []
        for seq in range(n_seqs):
            drafted = [DraftToken(100 + j, f"d{j}", 0.5, 0.4, j == 0) for j in range(depth)] if i else []
            accepted = 1 if i else 0
            kind = "correction" if i else "plain"
            rows.append(SeqStep(seq, drafted, accepted, 7, "x", 0.9, kind, [100] * accepted + [7], False))
        steps.append(
            Step(
                index=i,
                kind="decode" if i else "prefill",
                depth=depth if i else 0,
                batch=n_seqs,
                tokens_per_pass=n_seqs * (depth + 1),
                t_start_s=i * 0.01,
                t_end_s=(i + 1) * 0.01,
                draft_ms=1.0,
                verify_ms=5.0,
                overhead_ms=0.1,
                target_flops=1e9,
                draft_flops=1e8,
                target_bytes=1e8,
                draft_bytes=1e7,
                flops_wasted=0.0,
                seqs=rows,
            )
        )
    return steps


def _reference_records(steps, n_seqs):
    """The former implementation (recounts a sequence's records at every step): the answer to match."""
    out = [[] for _ in range(n_seqs)]
    for step in steps:
        for s in step.seqs:
            n_out = sum(1 for r in out[s.seq] if r[2] is not None)
            for j, d in enumerate(s.drafted):
                if d.accepted and j >= len(s.emitted):
                    continue
                out[s.seq].append((d.text, "accepted" if d.accepted else "rejected", n_out + j if d.accepted else None))
            if len(s.emitted) > s.num_accepted:
                out[s.seq].append((s.next_text, s.next_kind if s.drafted else "plain", n_out + s.num_accepted))
    return out


def test_token_records_match_the_former_recount():
    steps = _spec_steps(40, depth=3, n_seqs=2)
    steps[5].seqs[0].emitted = []  # a row cut by max_new_tokens before its accepted draft
    got = tokens.token_records(steps, 2)
    assert [[(r.text, r.kind, r.out_index) for r in recs] for recs in got] == _reference_records(steps, 2)


def test_token_records_do_work_linear_in_the_steps(monkeypatch):
    """Count every attribute read of a token record: the former recount read each sequence's records at every
    step (quadratic: 4x the steps, 16x the reads); a running count reads none of them."""
    reads = [0]

    class Counted(tokens.TokenRecord):
        def __getattribute__(self, name):
            reads[0] += 1
            return object.__getattribute__(self, name)

    monkeypatch.setattr(tokens, "TokenRecord", Counted)
    per_size = {}
    for n in (200, 800):
        reads[0] = 0
        recs = tokens.token_records(_spec_steps(n), 1)
        per_size[n] = (reads[0], sum(map(len, recs)))
    assert per_size[800][1] > 3.9 * per_size[200][1]  # 4x the records ...
    assert per_size[800][0] <= 4 * per_size[200][0] + 10  # ... and at most 4x the reads (here: none at all)


@pytest.mark.parametrize("text", HOSTILE)
def test_race_payload_cannot_close_its_script(text):
    steps = _spec_steps(5)
    recs = tokens.token_records(steps, 1)
    recs[0][1].text = text
    out = race.race_html(recs, recs, 0.05, 0.05, spec_label=text)
    script = out[out.index("<script>") + len("<script>") : out.rindex("</script>")]
    assert "<" not in script.split("const DATA = ", 1)[1].split(";\n", 1)[0]  # no < > & inside the data at all
    for bad in ("</script", "<!--", "\u2028", "\u2029", "<img"):
        assert bad not in script.split(";\n", 1)[0], bad
    assert out.count("</script>") == 1 and out.count("<script>") == 1
    data = json.loads(re.search(r"const DATA = (.*);\n", out).group(1))
    assert data["lanes"][1]["name"] == text and text in [t[2] for t in data["lanes"][0]["tokens"]]  # same value


def test_script_json_is_the_same_json_value():
    value = {"a": "<>&\u2028\u2029\ud800", "b": [1.5, None, True]}
    text = race.script_json(value)
    assert not re.search(r"[<>&\u2028\u2029]", text) and text.isascii()
    assert json.loads(text) == value


def test_race_numbers_are_finite_and_the_clock_reaches_every_token():
    recs = tokens.token_records(_spec_steps(6), 1)
    recs[0][0].t_s = float("nan")
    recs[0][1].t_s = -3.0
    recs[0][2].t_s = float("inf")
    data = json.loads(re.search(r"const DATA = (.*);\n", race.race_html(recs, recs, float("nan"), 0.001)).group(1))
    for lane in data["lanes"]:
        times = [t[1] for t in lane["tokens"]]
        assert all(0 <= t < 1e9 for t in times) and times == sorted(times)
        assert lane["total_s"] >= max(times)  # a lane's end is never before its last token: the replay finishes
        assert {t[0] for t in lane["tokens"]} <= set(range(lane["n_seqs"]))  # every token has a box


def test_race_draws_each_sequences_tokens_in_its_own_box():
    """Two sequences in a batch: every token goes to the box of the sequence that wrote it, in its order (the shipped
    two-sequence sample once drew both sequences interleaved in the last box and left the first empty)."""
    recs = tokens.token_records(_spec_steps(5, n_seqs=2), 2)
    data = json.loads(re.search(r"const DATA = (.*);\n", race.race_html(recs, recs, 1.0, 1.0)).group(1))
    for lane in data["lanes"]:
        for seq in (0, 1):
            assert [t[2] for t in lane["tokens"] if t[0] == seq] == [r.text for r in recs[seq]]


def test_race_replays_a_bounded_number_of_tokens():
    recs = tokens.token_records(_spec_steps(3000), 1)
    assert sum(map(len, recs)) > race.MAX_TOKENS
    data = json.loads(re.search(r"const DATA = (.*);\n", race.race_html(recs, recs, 30.0, 30.0)).group(1))
    lane = data["lanes"][0]
    assert len(lane["tokens"]) == race.MAX_TOKENS and lane["cut_tokens"] == sum(map(len, recs)) - race.MAX_TOKENS
    assert lane["total_s"] == lane["tokens"][-1][1]  # the clock stops with the last token replayed


def test_lane_html_draws_a_bounded_number_of_tokens():
    recs = tokens.token_records(_spec_steps(400, n_seqs=3), 3)
    html = tokens.lane_html(recs, max_tokens=500)
    assert html.count('data-kind="') == 500
    assert f"{sum(map(len, recs)) - 500:,} more tokens not drawn" in html


def test_per_step_charts_thin_long_runs_to_measured_steps():
    steps = _spec_steps(5000)
    picked = charts.thin(steps)
    assert len(picked) <= charts.MAX_CHART_STEPS + 1 and picked[0] is steps[0] and picked[-1] is steps[-1]
    assert all(p in steps for p in picked[:5])  # real steps, not averages
    assert charts.thin(steps[:10]) == steps[:10] and charts.thinned_note(10) == ""
    assert "1 step in 4 drawn, of 5,000" == charts.thinned_note(5000).strip(" ()")


def test_the_upload_limit_is_the_loaders_cap():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["server"]["maxUploadSize"] * 2**20 == trace_module.MAX_FILE_BYTES


def test_uploads_work_in_a_cross_site_frame_and_cors_stays_on():
    """Issue 30: the XSRF check is off so uploads work in the Hub's iframe (the browser test proves it); CORS
    protection is not turned off with it."""
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["server"]["enableXsrfProtection"] is False
    assert config["server"].get("enableCORS", True) is True


def test_depth_figure_of_a_long_run_is_thinned():
    from tests.app.test_views import _trace

    steps = _spec_steps(4000)
    outputs = [[t for st in steps for row in st.seqs for t in row.emitted]]
    fig = depth_policy.depth_figure(_trace(steps, outputs, speculative=True, depth=3))
    assert len(fig.data[0].x) <= charts.MAX_CHART_STEPS + 1 and "drawn, of 3,999" in fig.layout.title.text
