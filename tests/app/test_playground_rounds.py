"""The Playground's interleaved rounds (issue 53, items 2 and 5): every round's rates are kept, a winner comes only
from the one rule (engine/verdict.py) over them, and a whole-run speedup above the decode-only one beyond the
noise is named. Pure views on hand-made rounds, then the page itself with the real embedded pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.common.lane_stats import lane
from app.views import h200, metrics
from app.views.h200 import DRAFTING, MEASURED, MODEL, PLAIN
from engine.verdict import RULE


def _round(ar_decode, spec_decode, ar_whole=None, spec_whole=None) -> dict:
    """One round's rates; by default the whole run is the decode-only one diluted by an equal prefill (10% of AR's time)."""
    if ar_whole is None:
        prefill_s, tokens = 0.1 * 64 / ar_decode, 64
        ar_whole = tokens / (prefill_s + tokens / ar_decode)
        spec_whole = tokens / (prefill_s + tokens / spec_decode)
    return {"ar_decode": ar_decode, "spec_decode": spec_decode, "ar_whole": ar_whole, "spec_whole": spec_whole}


FASTER = [_round(50.0, 60.0), _round(48.0, 58.5), _round(51.0, 60.5), _round(49.5, 59.0)]  # ~1.2x every round


def test_one_round_names_no_winner_and_asks_for_rounds():
    v = metrics.speed_verdict([_round(50.0, 60.5)])
    assert v.kind == "can't tell" and v.lo is None
    sentence = metrics.verdict_sentence(v)
    assert sentence.startswith("One run each: can't tell; add rounds.") and "1.21× (one round: no range)" in sentence
    assert "faster" not in sentence and "slower" not in sentence


def test_clear_rounds_name_the_winner_with_the_interval_both_ways():
    v = metrics.speed_verdict(FASTER)
    assert v.kind == "faster" and v.lo > 1.15 and v.hi < 1.25 and v.rounds == 4
    assert metrics.verdict_sentence(v) == f"Decoding alone, speculation was faster than plain decoding: {v.interval}."
    flipped = [_round(r["spec_decode"], r["ar_decode"]) for r in FASTER]  # the same rounds, lanes swapped
    w = metrics.verdict_sentence(metrics.speed_verdict(flipped))
    assert w.startswith("Decoding alone, speculation was slower than plain decoding: 0.8")


def test_level_and_noisy_rounds_name_no_winner():
    level = [_round(50.0, 50.5), _round(49.0, 49.2), _round(51.0, 51.4)]
    assert metrics.verdict_sentence(metrics.speed_verdict(level)).startswith("Decoding alone, speculation was level with plain")
    noisy = [_round(50.0, 80.0), _round(50.0, 40.0), _round(50.0, 70.0)]  # medians say faster; the rounds disagree
    sentence = metrics.verdict_sentence(metrics.speed_verdict(noisy))
    assert "can't tell" in sentence and "add rounds" in sentence and "faster" not in sentence


def test_the_verdict_and_not_the_drawn_round_decides_the_reason_clause():
    m = {"speedup": 1.3, "step_cost_ratio": 0.9, "ar_decode_steps": 20, "spec_decode_steps": 15, "kept_per_step": 1.4}
    m |= {"ar_decode_tokens_per_s": 50.0, "spec_decode_tokens_per_s": 65.0}
    assert metrics.speedup_reason(m, "here").endswith("which is why speculation paid.")  # the lessons' call: unchanged
    noisy = metrics.speed_verdict([_round(50.0, 80.0), _round(50.0, 40.0), _round(50.0, 70.0)])
    said = metrics.speedup_reason(m, "here", rule=noisy)
    assert said.endswith("by the rule over 3 rounds, no winner can be named from these rounds.") and "paid" not in said
    line = metrics.arithmetic_line(m | {"flops_ratio": 1.1, "median_verify_ratio": 1.0}, noisy)
    assert "In the round drawn here speculation ran 1.30×" in line and "paid" not in line
    assert metrics.speedup_reason(m, "here", rule=metrics.speed_verdict(FASTER)).endswith("which is why speculation paid.")


def test_the_whole_run_never_beats_decoding_alone_beyond_the_noise():
    # a diluted whole run (equal prefill) passes, faster or slower
    assert metrics.whole_run_excess(FASTER) is None
    assert metrics.whole_run_excess([_round(60.0, 48.0), _round(61.0, 49.0), _round(59.0, 47.5)]) is None
    assert metrics.whole_run_excess([_round(50.0, 60.5)]) is None
    # issue 53: plain ran first, cold; decoding alone read 1.21x and the whole run 1.29x (one round)
    cold = _round(50.0, 60.5, ar_whole=40.0, spec_whole=40.0 * 1.29)
    said = metrics.whole_run_excess([cold])
    assert said.startswith("Check failed: over the whole run speculation ran 1.29× as fast as plain decoding, above the 1.21×")
    assert "not on one clock" in said
    # a slower speculative lane whose whole run reads faster than plain: above max(1, decode-only)
    odd = [_round(50.0, 45.0, 40.0, 44.0), _round(51.0, 46.0, 40.5, 44.5), _round(49.0, 44.0, 39.0, 43.0)]
    assert "above the 0.90×" in metrics.whole_run_excess(odd)
    # within the noise: a whole run 1% above decoding alone in rounds that scatter by more is not flagged
    close = [_round(50.0, 60.0, 50.0, 61.2), _round(50.0, 58.0, 50.0, 57.5), _round(50.0, 62.0, 50.0, 62.4)]
    assert metrics.whole_run_excess(close) is None


def test_rounds_line_lists_every_round_in_the_order_run():
    line = metrics.rounds_line([_round(50.0, 60.0), _round(40.0, 30.0)], shown=1)
    assert line == (
        "Decoding alone, in the order run: round 1: plain 50.0, speculative 60.0 tokens/s (1.20×); "
        "round 2 (drawn): plain 40.0, speculative 30.0 tokens/s (0.75×)."
    )


# --- the page, with the real embedded pair ------------------------------------------------------
pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


def _app(**params) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=300)
    for key, value in params.items():
        at.query_params[key] = str(value)
    return at.run()


def test_a_run_of_rounds_keeps_every_round_and_judges_by_the_rule():
    at = _app(tokens=8, depth=3, rounds=2)
    assert at.slider(key="rounds").value == 2 and at.slider(key="rounds").proto.query_param_key == "rounds"
    at.button(key="run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    result = at.session_state["result"]
    rounds = result["rounds"]
    assert len(rounds) == 2 and result["shown_round"] in (0, 1) and result["warm_s"] > 0
    shown = rounds[result["shown_round"]]
    assert shown == metrics.round_rates(result["ar"], result["spec"])  # the drawn lanes are one of the kept rounds
    v = metrics.speed_verdict(rounds)
    assert metrics.verdict_sentence(v) in [m.value.strip("*") for m in at.markdown]
    captions = "\n".join(c.value for c in at.caption)
    assert RULE in captions and metrics.rounds_line(rounds, result["shown_round"]) in captions
    speedup = next(m for m in at.metric if m.label == "Measured speedup")
    assert speedup.value == f"{v.ratio:.2f}×"  # the headline is the rounds' typical ratio, not one round's
    assert ("Check failed" in "\n".join(w.value for w in at.warning)) == (metrics.whole_run_excess(rounds) is not None)
    # the shown round's steps re-timed on the H200 (app/views/h200.py), as the lessons' GPU panel re-times theirs
    assert any(e.label.startswith("🖥 Your run on an H200 (re-timed from H200 recordings, not run on a GPU)") for e in at.expander)
    from app.playground.run import h200_view  # streamlit: only past the importorskip above

    fig, rows, caption = h200_view(result["ar"], result["spec"], "live")
    assert fig is not None and [r["run"] for r in rows] == ["plain", "speculative"], caption
    plain, spec = rows
    assert plain["× plain on the H200 (re-timed)"] == 1.0 and plain["drafting on the H200"] == DRAFTING[PLAIN]
    assert spec["× plain on the H200 (re-timed)"] > 0 and spec["drafting on the H200"] in (DRAFTING[MEASURED], DRAFTING[MODEL])
    for row, trace in zip(rows, (result["ar"], result["spec"])):  # this machine's bar is the lane's own decoding rate
        assert row["this machine, decode tokens/s (measured)"] == round(lane(trace)["decode_tokens_per_s"])
    assert caption.startswith(h200.LABEL) and "qwen2.5-7b" in caption.lower()
    # the bars re-time one round: the caption never calls this machine's bar the rule's ratio over the rounds
    assert h200.RULE_RATIO not in caption and h200.RULE_RATIO not in captions
    assert "so this machine's bar is that round's ratio" in captions


def test_one_round_says_it_cannot_tell_and_a_bad_rounds_link_falls_back():
    at = _app(tokens=8, depth=2, rounds=1)
    at.button(key="run").click().run()
    assert not at.exception and not at.error
    assert len(at.session_state["result"]["rounds"]) == 1
    assert any(m.value.startswith("**One run each: can't tell; add rounds.") for m in at.markdown)
    at = _app(rounds="99")
    assert not at.exception and at.slider(key="rounds").value == 3
    assert "**Rounds**" in "\n".join(w.value for w in at.warning)
