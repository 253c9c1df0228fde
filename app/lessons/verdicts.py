"""Each lesson's verdict on a measurement, as lines of text, behind one signature: (measurement, settings) -> lines.

The Lessons page draws each verdict under its lesson's chart; the teacher's plan (app/lessons/teacher_plan.py)
quotes the verdict on the shipped recording. No streamlit.
"""

from __future__ import annotations

VERDICTS: dict = {}
