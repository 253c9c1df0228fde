"""The teacher's plan (lessons/teacher.md) with its expectations computed from the shipped recordings.

The plan never states a measured number of its own: where it says what a lesson shows, it writes a placeholder,
`{expect:<experiment>}` (a lesson's recording under assets/lessons/) or `{expect:h200}` (the recorded H200 pass
curves), and the page fills it from the recording, through the lesson's own prediction (what the students guess,
read from the measurement as the lesson reads it) and the lesson's own verdict. A re-recording that changes a
number changes the plan with it; a recording that cannot be read is named, never replaced by an old number.
Pure: no streamlit. tests/app/test_teacher_plan.py renders the shipped plan.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from app.common import measurement as ms
from app.lessons.experiment_kit import Experiment, claim_rows

PLACEHOLDER = re.compile(r"\{expect:([a-z0-9_]+)\}")
H200 = "h200"


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "nothing (the run drafted nothing)"
    return f"{value:.2f}{unit}"


FROM_CURVE = re.compile(r" ?\(0: from the curve\)")  # a knob's "0 = chosen from the pass curve", said in a question


def _question(experiment: Experiment, settings: dict, chosen: dict | None = None) -> str:
    """The students' question with the values the run used: a setting left at 0 ("from the curve") reads the value
    the recording chose (its measurement's `chosen`), so the plan never asks about "batch 0"."""
    used = {**settings, **{k: v for k, v in (chosen or {}).items() if settings.get(k, 0) == 0}}
    try:
        text = experiment.predict.question.format(**used)
    except (KeyError, IndexError, ValueError):
        return experiment.predict.question
    return FROM_CURVE.sub("", text) if chosen else text


def recording_expectation(name: str, record: dict, experiment: Experiment) -> str:
    """What a lesson's shipped recording shows: the students' question and its measured answer, the models beside
    it, and the lesson's own verdict on that recording (its first lines), labelled with the machine and date."""
    m, s = record["measurement"], record["settings"]
    pred = experiment.predict
    value = pred.measured(m, s)
    label = f"({record['machine']}, {record['dtype']}, {record['date']})"
    said = f"The recording {label} answers “{_question(experiment, s, m.get('chosen'))}” with {_number(value, pred.unit)}"
    models = [f"{label} {_number(v, pred.unit)}" for label, v in pred.models(m, s) if v is not None]
    if models:
        said += " (" + "; ".join(models) + ")"
    said += "."
    if ms.disturbed(record):
        said += " It was recorded beside other work, so its timings are noisy: re-record it on a quiet machine."
    lines = [line for line in experiment.verdict(m, s) if line][:2]
    if lines:
        said += " Its verdict: " + " ".join(lines)
    shown = [r for r, c in zip(claim_rows(experiment.claims, m), experiment.claims) if c.lead]
    if shown:
        said += " Its claims by the rule: " + "; ".join(f"{r['claim']} ({r['measured (95% range)']}): {r['shown?']}" for r in shown) + "."
    return said


def expectation(name: str, recordings: Path, experiments: dict, h200: Callable[[], str]) -> str:
    """The sentence that replaces `{expect:name}`; a missing or malformed recording is named, in one line."""
    if name == H200:
        return h200()
    if name not in experiments:
        return f"(the plan names an experiment SpecLab does not have: {name})"
    try:
        record = ms.load_record(recordings / f"{name}.json")
    except ms.MeasurementError as exc:
        return f"(no readable recording for this lesson: {str(exc).splitlines()[0]})"
    return recording_expectation(name, record, experiments[name])


def render(text: str, recordings: Path, experiments: dict, h200: Callable[[], str]) -> str:
    """The plan with every placeholder replaced by what the shipped recordings show."""
    return PLACEHOLDER.sub(lambda found: expectation(found[1], recordings, experiments, h200), text)


def _h200() -> str:
    from app.lessons import gpu  # plotly, loaded only where the plan is drawn

    curves, problems = gpu.recorded_curves()
    return gpu.knee_sentence(curves) if curves else "(no readable H200 recording: " + "; ".join(problems)[:200] + ")"


def plan_text(text: str, recordings: Path) -> str:
    """The shipped plan as the Lessons page shows it: every lesson's expectation from its recording and its verdict."""
    from app.lessons.experiments import EXPERIMENTS

    return render(text, recordings, EXPERIMENTS, _h200)
