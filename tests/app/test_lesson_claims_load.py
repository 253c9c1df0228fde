"""Lessons 4-7: each lead claim is shown by the shipped recording, by the one verdict rule over its rounds, and the notes
under its chart state what the table does; a doctored copy of the same recording changes the notes, so they are
computed, never written in advance.
A re-recording that stops showing a claim fails here, so it cannot ship silently.

- 4: always-on speculation is slower than plain decoding while the batch is full (past the knee); the switch does
  plain decoding's work there and comes back on as rows finish, once the live batch is N or fewer.
- 5: stopping drafts where the drafter is unsure decodes faster than drafting all k, at batch 1 and past the knee.
- 6: fixed k loses to plain past the knee; a load-aware policy speculates at batch 1, drafts less past the knee and
  stays level with (or above) plain there; the derived batch table chooses a graded depth.
- 7: where the room fits a tree wider than the chain, the tree beats the chain at batch 1; past the knee it loses.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from app.common import measurement
from app.lessons import l4_turn_it_off, l5_adaptive, l6_by_load, l7_width, registry
from app.lessons.kit import numbers
from app.lessons.kit.numbers import cell, rate_rounds
from app.lessons.kit.numbers import sign as clear_winner
from app.lessons.l4_turn_it_off import choose
from app.lessons.l7_width import has_room

ROOT = Path(__file__).resolve().parents[2]


def _rec(name: str) -> dict:
    return registry.load_record(ROOT / "assets" / "lessons" / f"{name}.json")


def _swap(a: dict, b: dict, key: str) -> None:
    a[key], b[key] = b[key], a[key]


# --- the settings come from the recorded curve ------------------------------------------------------------
@pytest.mark.parametrize("name", ["turn_it_off", "adaptive", "by_load", "width"])
def test_each_recording_chose_its_settings_from_its_own_curve(name):
    rec = _rec(name)
    m = rec["measurement"]
    c, curve = m["chosen"], m["curve"]
    assert c["room"] == numbers.room_tokens(curve["tokens"], curve["ms"])
    assert all(rec["settings"][k] == 0 for k in rec["settings"] if k in ("batch", "n", "depth", "k", "nodes"))  # the knobs' 0
    if name == "turn_it_off":
        assert c == choose(c["room"], rec["settings"])
    assert measurement.DISTURBED not in rec["note"], "re-record on a quiet machine"


def test_every_lesson_speaks_of_one_room():
    """Lessons 1 to 7 were recorded in one process and chose their settings from one room (pass_lessons.machine_curve,
    lesson 1's rows once it has run): a student never reads of a 4-token room in lesson 3 and a 9-token one in lesson 6."""
    names = ["memory_bound", "more_flops", "past_the_ridge", "turn_it_off", "adaptive", "by_load", "width"]
    rooms = {name: _rec(name)["measurement"]["chosen"]["room"] for name in names}
    assert len(set(rooms.values())) == 1, rooms


# --- lesson 4 ------------------------------------------------------------------------------------------------
def test_lesson4_always_on_loses_past_the_knee_and_the_switch_comes_back_on():
    m, s = _rec("turn_it_off")["measurement"], _rec("turn_it_off")["settings"]
    c, ph = m["chosen"], m["phases"]
    assert c["batch"] * (c["depth"] + 1) >= numbers.PAST * c["room"]  # the full batch's verify pass is past the knee
    assert clear_winner(ph["on"]["full"], ph["ar"]["full"]) == -1  # always-on slower than plain while the batch is full
    assert clear_winner(ph["off"]["full"], ph["ar"]["full"]) == 0  # the switch, off there, level with plain
    assert clear_winner(ph["off"]["shrunk"], ph["ar"]["shrunk"]) == 1  # back on once N or fewer remain: it pays
    live = [b for b, _, _ in m["steps"]["off"]]
    assert live[0] == c["batch"] and live[-1] <= c["n"] < live[0]  # the batch shrank during the run
    on_at = {b for b, d, _ in m["steps"]["off"] if d > 0}
    assert on_at and max(on_at) <= c["n"] and m["off"]["speculated_steps"] > 0
    text = "\n".join(l4_turn_it_off.notes(m, s))
    assert f"The switch speculated on {m['off']['speculated_steps']} of {m['off']['decode_steps']} decode steps" in text
    assert "it came back on as rows finished" in text


def test_lesson4_words_flip_with_a_doctored_recording():
    m, s = copy.deepcopy(_rec("turn_it_off")["measurement"]), _rec("turn_it_off")["settings"]
    ar_full = m["phases"]["ar"]["full"]["values"]
    m["phases"]["on"]["full"] = measurement.spread([v * 1.5 for v in ar_full])  # always-on now faster while the batch is full
    for row in m["steps"]["off"]:
        row[1] = 0  # and the switch never speculated
    m["off"]["speculated_steps"] = 0
    text = "\n".join(l4_turn_it_off.notes(m, s))
    assert "speculated on 0 of" in text and "more than" in text and "came back on" not in text


# --- lesson 5 ------------------------------------------------------------------------------------------------
def test_lesson5_the_gate_drafts_less_and_its_notes_say_how_much():
    """The gate always drafts fewer tokens; whether that decodes faster depends on how deep k is: the claims table
    gives the rule's verdict at each batch (tests/app/test_lesson_claims.py), the notes how much less it drafted."""
    m = _rec("adaptive")["measurement"]
    assert [b["batch"] for b in m["batches"]] == [1, m["chosen"]["batch"]]
    lines = l5_adaptive.notes(m, {})
    for run, line in zip(m["batches"], lines):
        assert run["gated"]["summary"]["drafted_tokens"] < run["fixed"]["summary"]["drafted_tokens"]
        assert line.startswith(f"Batch {run['batch']}: the gate drafted") and "fewer" in line


def test_lesson5_notes_change_with_a_doctored_recording():
    m = copy.deepcopy(_rec("adaptive")["measurement"])
    run = m["batches"][0]
    run["m_gated"]["drafted_depth"] = run["m_fixed"]["drafted_depth"] * 1.2  # the gate now drafting more
    assert "(20% more)" in l5_adaptive.notes(m, {})[0]


# --- lesson 6 ------------------------------------------------------------------------------------------------
def usual_depth(r: dict) -> int | None:
    """The depth a row chose most often over its decode steps (the smaller one on a tie)."""
    depths = [d for _, d in r.get("steps") or []]
    return min(set(depths), key=lambda d: (-depths.count(d), d)) if depths else None


def _lesson6():
    m = _rec("by_load")["measurement"]
    rows, c = m["rows"], m["chosen"]
    fixed = f"fixed k = {c['k']}"
    policies = [n for n in l6_by_load.policies(rows) if n != fixed]
    return m, rows, c, fixed, policies


def test_lesson6_fixed_k_loses_past_the_knee_and_a_load_aware_policy_follows_the_envelope():
    m, rows, c, fixed, policies = _lesson6()
    past, plain = c["past"], "plain decoding"
    assert past * (c["k"] + 1) >= numbers.PAST * c["room"]
    assert clear_winner(rate_rounds(cell(rows, past, fixed)), rate_rounds(cell(rows, past, plain))) == -1
    followers = []
    for name in policies:
        one, big = cell(rows, 1, name), cell(rows, past, name)
        spoke = one["mean_depth"] > 0 and big["mean_depth"] < one["mean_depth"]
        level = clear_winner(rate_rounds(big), rate_rounds(cell(rows, past, plain))) >= 0
        if spoke and level:
            followers.append(name)
    assert followers, "no load-aware policy speculated at batch 1, drafted less past the knee and kept up with plain there"
    table = next(n for n in policies if n.startswith("batch table"))
    assert any(0 < usual_depth(r) < c["most"] for r in rows if r["contender"] == table)  # a graded depth, not only off or all
    assert l6_by_load.notes(m, {})[0].startswith(f"Against plain decoding at batch 1, {c['mid']}, {past} (the × plain column)")


def test_lesson6_notes_change_with_a_doctored_recording():
    m, rows, c, fixed, _ = _lesson6()
    m = copy.deepcopy(m)
    before = l6_by_load.notes(m, {})[0]
    f, p = cell(m["rows"], c["past"], fixed), cell(m["rows"], c["past"], "plain decoding")
    for key in ("decode_tokens_per_s", "decode_tokens_per_s_runs"):
        _swap(f, p, key)
    after = l6_by_load.notes(m, {})[0]
    assert after != before and clear_winner(rate_rounds(f), rate_rounds(p)) == 1  # fixed k now the faster, and said in numbers


# --- lesson 7 ------------------------------------------------------------------------------------------------
def test_lesson7_width_pays_per_pass_inside_the_room_and_costs_past_the_knee():
    """Inside the room the tree's extra tokens per pass outweigh its longer verify pass and it is never slower than the
    chain (on the 2-core EPYC its gain at batch 1 is small: 1.06x, ahead in 4 of 5 rounds, 2026-12-03); past the knee
    the longer pass outweighs them and the tree is slower beyond the spread."""
    m = _rec("width")["measurement"]
    c, rows = m["chosen"], m["rows"]
    big = c["batch"]
    assert big * (c["nodes"] + 1) >= numbers.PAST * c["room"]
    cells = {(r["batch"], r["contender"]): r for r in rows}
    tree, chain = cells[(big, "tree")], cells[(big, "chain")]
    assert clear_winner(rate_rounds(tree), rate_rounds(chain)) == -1  # past the knee width costs
    assert tree["verify_ms"] / chain["verify_ms"] > tree["tokens_per_step"] / chain["tokens_per_step"]
    assert f"Batch {big}: a tree pass emitted {tree['tokens_per_step']:.2f} tokens per row" in "\n".join(l7_width.notes(m, {}))
    if has_room(m):
        tree, chain = cells[(1, "tree")], cells[(1, "chain")]
        assert clear_winner(rate_rounds(tree), rate_rounds(chain)) >= 0  # never slower inside the room
        assert tree["tokens_per_step"] / chain["tokens_per_step"] > tree["verify_ms"] / chain["verify_ms"]  # width paid per pass


def test_lesson7_notes_change_with_a_doctored_recording():
    m = copy.deepcopy(_rec("width")["measurement"])
    big = m["chosen"]["batch"]
    before = l7_width.notes(m, {})
    cell(m["rows"], big, "tree")["verify_ms"] *= 0.5  # the tree's pass now half as dear
    after = l7_width.notes(m, {})
    assert before != after and f"{cell(m['rows'], big, 'tree')['verify_ms']:.1f} ms" in "\n".join(after)


def test_lesson_5s_worksheet_states_the_speedups_its_page_shows():
    """One number per measurement: the worksheet's key numbers once took each lane's middle run (1.39x, 1.72x, 0.38x,
    0.65x) where the page's table shows the rule's ratio over the interleaved runs (1.40x, 1.70x, 0.37x, 0.64x)."""
    rec = registry.load_record(ROOT / "assets" / "lessons" / "adaptive.json")
    m, s = rec["measurement"], rec["settings"]
    sheet = dict(registry.EXPERIMENTS["adaptive"].numbers(m, s))
    for row in l5_adaptive.adaptive_table(m, s):
        lane = "fixed" if row["drafts"].startswith("up to") else "gated"
        assert sheet[f"batch {row['batch']} {lane}: speedup"] == f"{row['speedup over plain (decoding alone)']:.2f}×"
