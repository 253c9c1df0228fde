"""A live result beside its lesson's shipped recording: the key numbers side by side (the prediction's answer, the
room, the one-token pass or plain step, the probe's peaks, the other load, the verdict), and the differences named
and explained from what was measured during each run. What a lesson compares comes from its record (`contest`,
`plain`, `one_pass`, `read`). No streamlit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from app.common import measurement
from app.lessons.kit import numbers
from app.lessons.kit.experiment import SETTING_NAMES, room_of
from engine import verdict

MOVED = 1.15  # a number that changed by more than this factor, either way, "moved" (an answer, a pass, a probe's peak)


@dataclass(frozen=True)
class Side:
    """One run as the comparison reads it: where and when it ran, the prediction's measured answer, and what was
    measured about the machine during it (`conditions`)."""

    machine: str
    date: str
    answer: float | None
    facts: dict
    settings: dict = field(default_factory=dict)  # the knobs the run was asked for (0: chosen from the room)


def _judged(record, m: dict, s: dict) -> tuple[str, str, verdict.Verdict] | None:
    """(contender, baseline, the rule's verdict) of the pair the lesson's prediction is about (its record's
    `contest`), None for a lesson of passes (lesson 1) or a run without rounds."""
    pair = record.contest(m, s)
    if pair is None or not pair[2] or not pair[3]:
        return None
    try:
        return pair[0], pair[1], verdict.judge(pair[2], pair[3])
    except ValueError:  # a rate that is not a positive number: no verdict
        return None


def one_pass(record, m: dict) -> tuple[str, float] | None:
    """(what, ms): the lesson's own one-token pass where it times passes (its record's `one_pass`, lesson 1), else
    plain decoding's mean decode step at the smallest batch it ran (its record's `plain`; from its decoding-alone rate
    where the lane kept no step time)."""
    if record.one_pass is not None:
        return record.one_pass(m)
    found = record.plain(m)
    if found is None:
        return None
    batch, lane = found
    rate = measurement.decode_rate(lane | lane.get("summary", {}))
    ms = lane.get("step_ms") or (1000 * batch / rate if rate else None)
    return (f"plain decoding's step at batch {batch}", ms) if ms else None


def conditions(record, m: dict, s: dict) -> dict:
    """What was measured about the machine during one run of a lesson (its record), for the comparison."""
    chosen = {k: v for k, v in (m.get("chosen") or {}).items() if k != "room"}
    return {
        "room": room_of(m),
        "chosen": chosen,
        "pass": one_pass(record, m),
        "bandwidth": m.get("peak_bandwidth"),
        "flops": m.get("peak_flops"),
        "other_cores": measurement.other_cores(m),
        "verdict": _judged(record, m, s),
        "read": record.read(m),  # the pass a lesson of passes reads its answer from (lesson 1)
        "curve_busy": measurement.curve_busy(m.get("curve")),
    }


def side(record, m: dict, s: dict, machine: str, date: str, answer: float | None) -> Side:
    """One run of a lesson (its record) as the comparison reads it: where and when, the prediction's answer, what
    was measured about the machine, and its settings."""
    return Side(str(machine), str(date), answer, conditions(record, m, s), dict(s))


def _knob(value) -> str:
    return "0 (from the room)" if value == 0 else f"{value:g}"


# --- the table -----------------------------------------------------------------------------------
def _fmt(value, spec: str = ".2f", unit: str = "") -> str:
    return "not recorded" if value is None else f"{value:{spec}}{unit}"


def _verdict_cell(v) -> str:
    return "—" if v is None else v[2].words(v[0], v[1])


def table(rec: Side, live: Side, unit: str = "×") -> list[dict]:
    """The key numbers side by side: one row per number, the recording's and the live run's."""
    r, lv = rec.facts, live.facts

    def row(what: str, a: str, b: str) -> dict:
        return {"number": what, "recorded": a, "live": b}

    rows = [row("machine", rec.machine, live.machine), row("date", rec.date, live.date)]
    for key in sorted(set(rec.settings) | set(live.settings)):
        if rec.settings.get(key) != live.settings.get(key):
            rows.append(row(f"setting: {SETTING_NAMES.get(key, key)}", *(_knob(x.settings.get(key)) for x in (rec, live))))
    rows.append(row("the prediction's measured answer", _fmt(rec.answer, ".2f", unit), _fmt(live.answer, ".2f", unit)))
    if r["verdict"] or lv["verdict"]:
        rows.append(row("verdict", _verdict_cell(r["verdict"]), _verdict_cell(lv["verdict"])))
    rows.append(row("room (tokens per pass)", _fmt(r["room"], "d"), _fmt(lv["room"], "d")))
    for key in sorted(set(r["chosen"]) | set(lv["chosen"])):
        rows.append(row(f"chosen: {SETTING_NAMES.get(key, key)}", _fmt(r["chosen"].get(key), "d"), _fmt(lv["chosen"].get(key), "d")))
    if r["read"] or lv["read"]:
        rows.append(row("pass read as past the room (tokens)", _fmt(r["read"], "d"), _fmt(lv["read"], "d")))
    if r["pass"] or lv["pass"]:  # one row where both name the same pass; else each its own, the other side blank
        names = [x["pass"][0] for x in (r, lv) if x["pass"]]
        for what in dict.fromkeys(names):
            got = [_fmt(x["pass"][1]) if x["pass"] and x["pass"][0] == what else "—" for x in (r, lv)]
            rows.append(row(f"{what} (ms)", *got))
    if r["bandwidth"] or lv["bandwidth"]:
        rows.append(row("probe: bandwidth (GB/s)", _fmt(_giga(r["bandwidth"]), ".1f"), _fmt(_giga(lv["bandwidth"]), ".1f")))
        rows.append(row("probe: arithmetic (GFLOP/s)", _fmt(_giga(r["flops"]), ".0f"), _fmt(_giga(lv["flops"]), ".0f")))
    rows.append(row("other processes' load (cores busy)", _fmt(r["other_cores"], ".2f"), _fmt(lv["other_cores"], ".2f")))
    return rows


def step_beside(rec: dict, live: dict) -> tuple[list[dict], str]:
    """Lesson 0 (one step, timed once): the live step beside the recorded one, the table's rows and why they differ.
    rec, live: {"machine", "date", "measurement"} (the lesson's record and result)."""
    r, lv = rec["measurement"], live["measurement"]

    def row(what: str, key, spec: str = "d") -> dict:
        return {"number": what, "recorded": key(r, spec), "live": key(lv, spec)}

    def num(name):
        return lambda m, spec: _fmt(m.get(name), spec)

    rows = [
        {"number": "machine", "recorded": rec.get("machine", ""), "live": live.get("machine", "this machine")},
        {"number": "date", "recorded": rec.get("date", ""), "live": live.get("date", "")},
        row("drafts the target kept", lambda m, _: f"{m['accepted']} of {m['k']}"),
        row("tokens the step added", num("gained")),
        row("the step: drafting and verifying (ms)", num("step_ms"), ".1f"),
        row("a plain step, for comparison (ms)", num("plain_step_ms"), ".2f"),
    ]
    why = (
        "One step is one draw, timed once: which drafts the target keeps depends on the text at that point of the "
        "answer, and the step's time on the machine and its load at that moment. Lessons 1 to 3 repeat and interleave "
        "their runs to measure what a single step can only show."
    )
    return rows, why


def _giga(x: float | None) -> float | None:
    return None if x is None else x / 1e9


# --- the sentences -------------------------------------------------------------------------------
def moved(a: float | None, b: float | None) -> bool:
    """Did a positive number change by more than MOVED× either way?"""
    return bool(a and b and a > 0 and b > 0 and abs(math.log(b / a)) > math.log(MOVED))


def headline(rec: Side, live: Side, unit: str = "×") -> tuple[str, bool]:
    """(the sentence on the prediction's answer and the verdict, whether the live result differs from the recording)."""
    rv, lv = rec.facts["verdict"], live.facts["verdict"]
    flipped = bool(rv and lv and rv[2].kind != lv[2].kind)
    shifted = bool(rv and lv and not flipped and moved(rv[2].ratio, lv[2].ratio))  # the same word, another ratio
    parts = []
    if rec.answer is not None and live.answer is not None:
        if moved(rec.answer, live.answer):
            parts.append(
                f"The prediction's answer moved from {rec.answer:.2f}{unit} recorded to {live.answer:.2f}{unit} live "
                f"({live.answer / rec.answer:.2f}× the recording's)."
            )
        else:
            parts.append(
                f"The prediction's answer, {live.answer:.2f}{unit} live, is within {MOVED - 1:.0%} of the recording's "
                f"{rec.answer:.2f}{unit}."
            )
    if flipped:
        parts.append(f"The verdict changed: recorded, {rv[0]} was {rv[2].words(b=rv[1])}; live, {lv[2].words(b=lv[1])}.")
    elif rv and lv:
        who = lv[0] if lv[0] == rv[0] else f"{lv[0]} ({rv[0]} in the recording)"
        by = f", at {lv[2].ratio:.2f}× live against {rv[2].ratio:.2f}× recorded" if shifted else ""
        parts.append(f"The verdict is the same both times: {who} was {lv[2].word} {lv[1]}{by}.")
    return " ".join(parts), flipped or shifted or moved(rec.answer, live.answer)


def reasons(rec: Side, live: Side) -> list[str]:
    """Each measured condition that differs between the two runs, in words from its numbers."""
    r, lv = rec.facts, live.facts
    out = []
    asked = [k for k in sorted(set(rec.settings) | set(live.settings)) if rec.settings.get(k) != live.settings.get(k)]
    if asked:
        out.append(
            "This run was asked for other settings than the recording: "
            + "; ".join(
                f"{SETTING_NAMES.get(k, k)} {_knob(live.settings.get(k))} live against {_knob(rec.settings.get(k))} recorded" for k in asked
            )
            + "."
        )
    if rec.machine != live.machine:
        out.append(f"The recording was made on {rec.machine}, this run on {live.machine}: another machine, other timings.")
    out += _load_reasons(r["other_cores"], lv["other_cores"])
    if moved(r["bandwidth"], lv["bandwidth"]):
        out.append(
            f"The probe measured {lv['bandwidth'] / 1e9:.1f} GB/s now against {r['bandwidth'] / 1e9:.1f} GB/s for the "
            "recording: the memory streamed at another speed."
        )
    if moved(r["flops"], lv["flops"]):  # e.g. a recording made with AMX's matrix tiles, a live CPU without them
        more = lv["flops"] > r["flops"]
        out.append(
            f"The probe measured {lv['flops'] / 1e9:.0f} GFLOP/s of arithmetic now against {r['flops'] / 1e9:.0f} for the "
            f"recording: {'more' if more else 'less'} arithmetic per byte read, so a pass stays nearly flat for "
            f"{'more' if more else 'fewer'} tokens (a {'larger' if more else 'smaller'} room)."
        )
    if r["pass"] and lv["pass"] and r["pass"][0] != lv["pass"][0]:
        out.append(
            f"The baseline is not the same pass: {lv['pass'][0]} live, {r['pass'][0]} recorded, so their times are not "
            "compared; every ratio on the page is taken over its own run's."
        )
    elif r["pass"] and lv["pass"] and moved(r["pass"][1], lv["pass"][1]):
        what, now, then = lv["pass"][0], lv["pass"][1], r["pass"][1]
        out.append(
            f"{what[0].upper() + what[1:]} took {now:.1f} ms live against {then:.1f} ms recorded ({now / then:.2f}×): "
            + (
                "the lesson's ratios are taken over this pass, so its time moves them too."
                if "-token pass" in what
                else "plain decoding, the baseline every ratio here is taken against, ran at another speed."
            )
        )
    out += _scatter_reasons(r["verdict"], lv["verdict"])
    if r["room"] and lv["room"] and r["room"] != lv["room"]:
        text = f"This run's pass curve gave a room of {numbers.tokens(lv['room'])} per pass, the recording's {r['room']}"
        if r["read"] and lv["read"] and r["read"] != lv["read"]:
            text += f", so the pass read as past the room carries {lv['read']} tokens live against {r['read']} recorded"
        if lv.get("curve_busy"):
            text += "; this run's curve was measured beside other work, which makes a pass's time rise sooner"
        out.append(text + ".")
    changed = [k for k in sorted(set(r["chosen"]) & set(lv["chosen"])) if r["chosen"][k] != lv["chosen"][k]]
    if changed:
        out.append(
            "The settings chosen from the room differ: "
            + "; ".join(f"{SETTING_NAMES.get(k, k)} {lv['chosen'][k]} live against {r['chosen'][k]} recorded" for k in changed)
            + "."
        )
    return out


SCATTER = 2.0  # a live 95% range this many times as wide as the recording's (in log terms) "scattered more"


def _scatter_reasons(then, now) -> list[str]:
    """Where the live rounds scattered far more than the recording's: the rule could tell less from them."""
    a, b = (v[2] if v else None for v in (then, now))
    if not (a and b and a.lo and a.hi and b.lo and b.hi) or a.hi <= a.lo:
        return []
    wider = math.log(b.hi / b.lo) / math.log(a.hi / a.lo)
    if wider < SCATTER:
        return []
    return [
        f"This run's rounds scattered more: its 95% range is {verdict.span(b.lo, b.hi)} against the recording's "
        f"{verdict.span(a.lo, a.hi)}, {wider:.1f}× as wide, so the rule can tell less from it; more rounds or a quieter "
        "machine would narrow it."
    ]


def _load_reasons(then: float | None, now: float | None) -> list[str]:
    busy = measurement.BUSY_CORES
    was = "not recorded" if then is None else f"{then:.2f}"
    if now is not None and now > busy:
        return [
            f"Other processes kept {now:.2f} cores busy during this run's timing (more than {busy}; the recording: {was}): "
            "DISTURBED, its times are slowed by the machine's other work."
        ]
    if then is not None and then > busy:
        return [f"The recording was made while other processes kept {then:.2f} cores busy (this run: {_fmt(now)}): its times were slowed."]
    return []


def compare(rec: Side, live: Side, unit: str = "×") -> tuple[list[dict], list[str], bool]:
    """(the side-by-side table, the sentences: the headline then what differed, whether the live result differs)."""
    head, differs = headline(rec, live, unit)
    why = reasons(rec, live)
    lines = [head] if head else []
    if differs and why:
        lines.append("What differed between the two runs, as measured:")
    elif why:
        lines.append(f"What differed, though the answer stayed within {MOVED - 1:.0%}:")
    lines += [f"- {w}" for w in why]
    if differs and not why:
        lines.append(
            f"None of the conditions measured with both runs (the probe, the other processes' load, the one-token pass "
            f"or plain step, the room and the settings chosen from it) differs by more than {MOVED - 1:.0%}: read the change "
            "as this machine's run-to-run variation, and re-measure to see its spread."
        )
    return table(rec, live, unit), lines, differs
