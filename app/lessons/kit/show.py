"""How every lesson's result is drawn, in one order (`draw`): the drafter and the settings the run chose from the
room, the lesson's charts, the table under them with its caption, the warm-up shown apart, then what the run shows
in a few sentences (`findings`: this machine's room and the lesson's notes, each generated from numbers in the
table). The verdicts themselves are the claims table under it (app/lessons/kit/page.py).
"""

from __future__ import annotations

import streamlit as st

from app.common.drafters import label as drafter_label
from app.lessons.kit import numbers
from app.lessons.kit.experiment import SETTING_NAMES, findings
from app.lessons.kit.numbers import step_costs
from app.views import bars


def show_chart(fig, key: str) -> None:
    st.plotly_chart(fig, width="stretch", key=key)


def show_table(rows: list[dict]) -> None:
    """The lesson's table; its first column (what each row is) pinned, so a wide table scrolls under the row's name."""
    first = {next(iter(rows[0])): st.column_config.Column(pinned=True)} if rows else None
    st.dataframe(rows, hide_index=True, height=bars.table_height(rows), column_config=first)


def settings_note(m: dict, s: dict) -> None:
    """The settings the run resolved to (a setting left at 0 is chosen from this machine's pass curve), named."""
    c = m.get("chosen")
    if c:
        chosen = [f"{SETTING_NAMES.get(k, k)} {v}" for k, v in c.items() if k != "room"]
        from_curve = [SETTING_NAMES.get(k, k) for k, v in s.items() if v == 0 and k in c]
        room = c["room"]
        st.caption(
            f"Settings of this run: {', '.join(chosen)}; this machine's room: {room} token{'s' if room != 1 else ''} per pass"
            + (
                f" ({', '.join(from_curve)}: chosen from this machine's pass curve, because the setting was left at 0)."
                if from_curve
                else "."
            )
            + (no_room(room) if s.get("depth") == 0 and c.get("depth") == 1 else "")
        )


def no_room(room: int) -> str:
    """Where the room holds no draft (one token a pass) and the run chose k = 1 from it: why, else nothing."""
    if room >= 2:
        return ""
    return (
        " No room here: even a 2-token pass costs more than 1.25× a one-token pass (a busy or slow machine), so no draft"
        " fits and the run drafts the least it can, one token (k = 1)."
    )


def consistent(run: dict) -> dict:
    """A run's compare numbers with its step cost taken from the lanes' means (step_costs), so the speedup's
    reason and the verify figure use one statistic, and its speedup the median over rounds (numbers.speedup)."""
    verify, step = step_costs(run)
    sp = numbers.speedup(run) if "ar" in run else None
    return run["m"] | {"median_verify_ratio": verify, "step_cost_ratio": step} | ({"speedup": sp["value"]} if sp else {})


WARM_NAMES = {  # the runs' short keys for their lanes, in the page's words
    "ar": "plain",
    "spec": "speculative",
    "ngram ar": "plain, copy-this-text prompts",
    "ngram spec": "n-gram lookup, copy-this-text prompts",
}


def warm_name(contender: str) -> str:
    """A warm-up's contender in the page's words ("16 ar" -> "plain, batch 16"): the runs key their lanes by short names."""
    batch, _, rest = contender.partition(" ")
    if batch.isdigit() and rest in WARM_NAMES:
        return f"{WARM_NAMES[rest]}, batch {batch}"
    head, sep, tail = contender.partition(",")
    return WARM_NAMES.get(contender, WARM_NAMES.get(head, head) + sep + tail)


def warmup_note(m: dict) -> None:
    warm = m.get("warmup")
    if warm:
        st.caption(
            "Warm-up (shown apart, never in the timed rounds): one contender of each pass shape decoded a few tokens "
            "first, so no timed round carries a cold start: "
            + "; ".join(f"{warm_name(w['contender'])}: {w['s']:.2f} s" for w in warm)
            + "."
        )


def drafter_of(m: dict) -> str | None:
    return m.get("drafter") or (m.get("on") or {}).get("drafter")


def draw(e, m: dict, s: dict, label: str = "") -> None:
    """A lesson's result on the page, the same order for every lesson (its record `e` says what goes in)."""
    drafter = drafter_of(m)
    if drafter:
        st.markdown(f"Drafter: {drafter_label(drafter)}.")
    settings_note(m, s)
    for i, fig in enumerate(e.figures(m, s, label)):
        if fig is not None:
            show_chart(fig, f"{e.name}_fig{i}")
    show_table(e.table(m, s))
    if e.caption:
        st.caption(e.caption)
    warmup_note(m)
    lines = findings(e, m, s)
    if lines:
        st.success("\n\n".join(lines))
    if e.extra is not None:
        e.extra(m, s, label)
