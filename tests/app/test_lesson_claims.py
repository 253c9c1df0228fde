"""Every lesson's claims, as data in its record (app/lessons/l<N>_*.py, Experiment.claims), applied by the one rule
(engine/verdict.py) to the lesson's shipped recording: each lead claim is shown, and a doctored copy that moves
the contenders apart the other way stops showing it, so a claim is a computation, never a fixed string. A
re-recording that stops showing a lead claim fails here."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from app.common import measurement
from app.lessons import registry
from app.lessons.kit.experiment import Claim, check_claim, claim_rows, findings
from app.lessons.registry import EXPERIMENTS

ROOT = Path(__file__).resolve().parents[2]
CLAIMED = [name for name, e in EXPERIMENTS.items() if e.claims]


def _rec(name: str) -> dict:
    return registry.load_record(ROOT / "assets" / "lessons" / f"{name}.json")


def test_every_lesson_with_an_experiment_declares_a_lead_claim():
    assert set(CLAIMED) == set(EXPERIMENTS) - {"one_step"}  # lesson 0 shows one step, it claims no speed
    for name in CLAIMED:
        assert any(c.lead for c in EXPERIMENTS[name].claims), name
        assert all(c.expect in (-1, 0, 1) and c.text and c.a and c.b for c in EXPERIMENTS[name].claims), name


@pytest.mark.parametrize("name", CLAIMED)
def test_each_shipped_recording_shows_its_lead_claims_by_the_rule(name):
    m = _rec(name)["measurement"]
    for claim in EXPERIMENTS[name].claims:
        result = check_claim(claim, m)
        if claim.lead and not result["skipped"]:
            v = result["verdict"]
            assert result["holds"], f"{name}: {claim.text}: {v.interval if v else 'no rounds'}, the rule says {v.kind if v else '-'}"
    rows = claim_rows(EXPERIMENTS[name].claims, m)
    assert all(r["shown?"].startswith("yes") or r["shown?"] == "not tested here" for r, c in zip(rows, EXPERIMENTS[name].claims) if c.lead)
    assert any(r["shown?"].startswith("yes") for r, c in zip(rows, EXPERIMENTS[name].claims) if c.lead)  # at least one shown
    tested = [r for r in rows if r["shown?"] != "not tested here"]
    assert all("95% range" in r["measured (95% range)"] for r in tested)  # every claim judged on repeated rounds


@pytest.mark.parametrize("name", CLAIMED)
def test_a_doctored_recording_stops_showing_each_claim(name):
    """Put contender a's rounds at 0.6× or 1.6× b's, the other way from the claim (slower for a 'faster' or 'not
    slower' claim, faster for a 'slower' one; for a claim about costs, cheaper for 'costs more'), in a copy of the
    recording: the same claim, read by the same code, no longer holds."""
    for claim in EXPERIMENTS[name].claims:
        m = copy.deepcopy(_rec(name)["measurement"])
        if check_claim(claim, m)["skipped"]:
            continue
        a, b = claim.rounds(m)
        factor = 1.6 if claim.expect < 0 else 0.6
        a["values"] = [v * factor for v in b["values"]]
        assert not check_claim(claim, m)["holds"], f"{name}: {claim.text}"


def test_a_claim_without_rounds_is_not_shown():
    claim = EXPERIMENTS["more_flops"].claims[0]
    m = copy.deepcopy(_rec("more_flops")["measurement"])
    m["spec"]["decode_tokens_per_s_runs"] = measurement.spread([300.0])
    m["ar"]["decode_tokens_per_s_runs"] = measurement.spread([100.0])
    result = check_claim(claim, m)
    assert not result["holds"] and result["verdict"].kind == "can't tell"  # one round: no interval, no claim
    assert check_claim(claim, {})["verdict"] is None  # an older measurement without these lanes


def test_a_claim_this_machine_has_no_room_for_says_so():
    """Lesson 7's batch-1 claim needs a room that fits a tree wider than the chain: where the run's room does not, the
    claim is named as not tested here, with the reason, never counted as shown or as failed."""
    claim = EXPERIMENTS["width"].claims[0]
    m = copy.deepcopy(_rec("width")["measurement"])
    m["chosen"] = m["chosen"] | {"room": 1}
    result = check_claim(claim, m)
    assert result["skipped"] and not result["holds"]
    row = claim_rows((claim,), m)[0]
    assert row["shown?"] == "not tested here" and "room" in row["measured (95% range)"]


NUMBER = re.compile(r"(?<![\w.])(\d+\.\d+)(?![\d])")


def _numbers(text: str) -> list[float]:
    return [float(x) for x in NUMBER.findall(text)]


@pytest.mark.parametrize("name", CLAIMED)
def test_every_number_the_findings_state_is_in_the_tables_beside_them(name):
    """One number per measurement: every decimal the findings under a chart state (this machine's room aside, which
    is the curve's) appears, at the digits written, in the table under the chart or in the claims table, on the
    shipped recording; and the findings stay short (prose short: the verdicts are the claims table's)."""
    rec = _rec(name)
    m, s = rec["measurement"], rec["settings"]
    e = EXPERIMENTS[name]
    notes = e.notes(m, s)
    cells = _numbers(" ".join(str(v) for row in e.table(m, s) + claim_rows(e.claims, m) for v in row.values()))
    stated = _numbers(" ".join(notes))
    missing = [x for x in stated if not any(abs(x - c) < 0.006 for c in cells)]
    assert missing == [], f"{name}: stated in words but in no table"
    assert sum(len(line.split()) for line in findings(e, m, s)) <= 150, f"{name}: findings longer than a short paragraph"


def test_a_number_missing_from_the_table_is_caught():
    """The check above both ways: a note that states a number no table has fails it."""
    cells = _numbers("2.61 0.55 1.39")
    assert [x for x in _numbers("2.61× and 0.57×") if not any(abs(x - c) < 0.006 for c in cells)] == [0.57]


def test_a_claim_about_costs_reads_its_direction_the_right_way():
    """On times, 'costs no more' holds where a is cheaper or level, and fails where a is dearer."""

    def claim(a, b):
        return Claim("x", "a", "b", "here", lambda m: (measurement.spread(a), measurement.spread(b)), 0, costs=True)

    assert check_claim(claim([10.0, 10.1, 9.9], [20.0, 20.2, 19.8]), {})["holds"]  # cheaper
    assert check_claim(claim([10.0, 10.1, 9.9], [10.0, 10.1, 9.9]), {})["holds"]  # level
    assert not check_claim(claim([20.0, 20.2, 19.8], [10.0, 10.1, 9.9]), {})["holds"]  # dearer


@pytest.mark.parametrize("name", CLAIMED)
def test_no_two_claims_of_a_lesson_read_one_measurement(name):
    """One number per measurement: each claim reads its own contenders at its own setting, so the claims table never
    shows one measured ratio twice under two claims (lesson 5 once said 'costs nothing' and 'pays' of one ratio)."""
    claims = EXPERIMENTS[name].claims
    keys = [(c.a, c.b, c.where, c.metric) for c in claims]
    assert len(set(keys)) == len(keys), f"{name}: two claims read the same contenders at the same setting"
    m = _rec(name)["measurement"]
    shown = [r["measured (95% range)"] for r in claim_rows(claims, m)]
    assert len(set(shown)) == len(shown), f"{name}: one measured ratio under two claims"


def test_the_claims_table_puts_its_result_beside_the_claim():
    """The result columns come right after the claim, so a student at 1400 px sees whether a claim held without
    scrolling the table sideways (a real browser once hid "shown?" past the right edge in four lessons)."""
    m = _rec("past_the_ridge")["measurement"]
    row = claim_rows(EXPERIMENTS["past_the_ridge"].claims, m)[0]
    assert list(row)[:4] == ["claim", "shown?", "measured (95% range)", "the rule says"]


def test_a_not_slower_claim_holds_only_within_the_margin_and_says_how_weakly():
    """Lesson 6's "keeps up with plain" read "yes" beside "the rule says: can't tell", and a busy live run read "yes"
    on a range of 0.30-3.75x. A "not slower" claim now holds only where the range rules out more than
    verdict.NOT_WORSE slower (the recording's 0.94-1.07x), says so, and a wider range is "not shown"; level or
    faster is a plain yes; a claim the rule cannot decide is never a "no"."""

    def claim(a, b, expect=0, costs=False):
        return Claim("x", "a", "b", "here", lambda m: (measurement.spread(a), measurement.spread(b)), expect, costs=costs)

    near = claim_rows((claim([100.0, 98.0, 102.0], [100.0, 100.0, 100.0]),), {})[0]
    assert near["the rule says"] == "can't tell" and near["shown?"] == "yes, weakly: at most 10% slower"
    wide = claim_rows((claim([100.0, 60.0, 150.0], [100.0, 100.0, 100.0]),), {})[0]
    assert wide["the rule says"] == "can't tell" and wide["shown?"] == "not shown: can't tell with 3 rounds"
    level = claim_rows((claim([100.0, 100.5, 99.8, 100.2], [100.0, 100.2, 99.9, 100.1]),), {})[0]
    assert level["the rule says"] == "level" and level["shown?"] == "yes"
    dearer = claim_rows((claim([10.0, 10.2, 9.8], [10.0, 10.0, 10.0], costs=True),), {})[0]  # times: the mirror image
    assert dearer["shown?"] == "yes, weakly: at most 10% dearer"
    assert claim_rows((claim([10.0, 16.0, 7.0], [10.0, 10.0, 10.0], costs=True),), {})[0]["shown?"].startswith("not shown")
    untold = claim_rows((claim([100.0, 60.0, 150.0], [100.0, 100.0, 100.0], expect=1),), {})[0]
    assert untold["shown?"] == "not shown: can't tell with 3 rounds"
    slower = claim_rows((claim([80.0, 81.0, 79.0], [100.0, 100.0, 100.0]),), {})[0]
    assert slower["the rule says"] == "slower" and slower["shown?"] == "no"
