"""Each lesson's verdict on a measurement, as lines of text, behind one signature: (measurement, settings) -> lines.

The Lessons page draws each verdict under its lesson's chart; the teacher's plan (app/lessons/teacher_plan.py)
quotes the verdict on the shipped recording. No streamlit.
"""

from __future__ import annotations

from app.lessons import conclusions as _load
from app.lessons import load as _by_load
from app.lessons import pass_conclusions as _pass

VERDICTS: dict = {
    "memory_bound": lambda m, s: _pass.memory_bound_conclusion(m),
    "more_flops": lambda m, s: [_pass.more_flops_conclusion(m)],
    "past_the_ridge": lambda m, s: _pass.past_the_ridge_conclusion(m, int(s.get("depth") or 0)),
    # lessons 4-7: the room and the settings it chose come first, then the verdicts beyond the spread
    "turn_it_off": lambda m, s: _load.turn_it_off_conclusion(m, s)[:-1],  # less the latency note
    "adaptive": lambda m, s: [_load.adaptive_conclusion(m, int(s.get("depth") or 0))],
    "by_load": lambda m, s: [x for x in (_by_load.room_line(m),) if x] + _by_load.depth_lines(m) + _by_load.conclusion(m["rows"]),
    "width": lambda m, s: _load.width_conclusion(m),
}
