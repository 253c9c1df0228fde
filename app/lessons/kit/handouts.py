"""What a lesson hands out beyond the page: the teacher's class plan with every expectation computed from the
shipped recordings (so a re-recording cannot leave it contradicting the page), and the printable worksheet
(prediction against measurement and models, Leviathan's formula by hand). No streamlit.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from pathlib import Path

from app.common import measurement as ms
from app.lessons import registry
from app.lessons.kit.experiment import Experiment, claim_rows, findings
from engine.costs import expected_tokens_per_step

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
    lines = findings(experiment, m, s)[:2]
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
        record = registry.load_record(recordings / f"{name}.json")
    except ms.MeasurementError as exc:
        return f"(no readable recording for this lesson: {str(exc).splitlines()[0]})"
    return recording_expectation(name, record, experiments[name])


def render(text: str, recordings: Path, experiments: dict, h200: Callable[[], str]) -> str:
    """The plan with every placeholder replaced by what the shipped recordings show."""
    return PLACEHOLDER.sub(lambda found: expectation(found[1], recordings, experiments, h200), text)


def _h200() -> str:
    from app.lessons.kit import gpu  # plotly, loaded only where the plan is drawn

    curves, problems = gpu.recorded_curves()
    return gpu.knee_sentence(curves) if curves else "(no readable H200 recording: " + "; ".join(problems)[:200] + ")"


SEGMENT_KEYS = ("minutes", "ask", "mistake")  # a lesson's front matter lines that make its row of the plan


def segments(lessons) -> str:
    """The plan's table rows, one per lesson, from each lesson file's front matter (a new lesson brings its own)."""
    return "\n".join(
        f"| {lesson.field('minutes') or '?'} | {lesson.title} | {lesson.field('ask')} | {lesson.field('mistake')} |" for lesson in lessons
    )


def expectations(lessons) -> str:
    """The plan's "what to expect" items: per lesson with a recording, what to look for, then its `{expect:name}`."""
    items = []
    for lesson in lessons:
        if lesson.field("look_for"):
            then = f" {lesson.field('then')}" if lesson.field("then") else ""
            items.append(f"- **Lesson {lesson.number}** ({lesson.field('look_for')}). {{expect:{lesson.experiment}}}{then}")
    return "\n".join(items)


def plan_text(text: str, recordings: Path, lessons=()) -> str:
    """The shipped plan as the Lessons page shows it: a segment per lesson (`lessons`: the lesson files, each bringing
    its row and what to look for) and every lesson's expectation from its recording and its verdict."""
    text = text.replace("{segments}", segments(lessons)).replace("{expectations}", expectations(lessons))
    return render(text, recordings, registry.EXPERIMENTS, _h200)


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "—" if x is None else f"{x:{spec}}"


def prediction_rows(guess: float | None, measured: float | None, models: list[tuple[str, float | None]], unit: str = "×") -> list[dict]:
    """Rows {"what": name, "value": text, "vs measured": text}: your guess, the measurement, then each model."""

    def versus(x):
        return f"{x / measured:.2f}× the measured" if x is not None and measured else "—"

    rows = [
        {"what": "your guess", "value": fmt(guess) + unit if guess is not None else "—", "vs measured": versus(guess)},
        {"what": "measured", "value": fmt(measured) + unit if measured is not None else "—", "vs measured": "—"},
    ]
    rows += [{"what": name, "value": fmt(x) + unit if x is not None else "—", "vs measured": versus(x)} for name, x in models]
    return rows


def guess_line(guess: float | None, measured: float | None, unit: str = "×") -> str | None:
    """One sentence: how far the guess was from the measurement (None without both)."""
    if guess is None or measured is None:
        return None
    off = abs(guess - measured) / measured if measured else None
    return f"You guessed {guess:.2f}{unit}; this run measured {measured:.2f}{unit}" + (
        f" (your guess was {off:.0%} off)." if off is not None else "."
    )


def hand_calculation(alpha: float | None, k: float | None, c: float | None) -> list[str]:
    """Leviathan's formulas worked step by step with the run's numbers; with blanks where a number is missing."""
    if alpha is None or k is None:
        return [
            "α = ______   k = ______   c = ______ (this experiment measures no speculative run: take α, k and "
            "c from lesson 2 or 3, or from the Playground)",
            "E[tokens per step] = (1 − α^(k+1)) ÷ (1 − α) = ______",
            "speedup = E ÷ (k·c + 1) = ______",
        ]
    e = expected_tokens_per_step(alpha, k)
    lines = [
        f"α = {alpha:.3f}, k = {k:.2f} (the depth actually drafted), "
        + (
            f"c = {c:.3f} (draft time per token ÷ a plain step)"
            if c is not None
            else "c not measured per token here: take c = 0, which gives an upper bound"
        ),
        f"α^(k+1) = {alpha:.3f}^{k + 1:.2f} = {alpha ** (k + 1):.4f}",
        f"E[tokens per step] = (1 − {alpha ** (k + 1):.4f}) ÷ (1 − {alpha:.3f}) = {e:.3f}"
        if alpha < 1
        else f"E[tokens per step] = k + 1 = {e:.3f} (α = 1)",
    ]
    cc = c if c is not None else 0.0
    lines.append(f"speedup = E ÷ (k·c + 1) = {e:.3f} ÷ ({k:.2f} × {cc:.3f} + 1) = {e / (k * cc + 1):.3f}")
    return lines


def worksheet_html(title: str, question: str, rows: list[dict], numbers: list[tuple[str, str]], source: str, calc: list[str]) -> str:
    """The printable page: every argument is text from the lesson, the run or the student, so all of it is escaped."""
    e = html.escape
    table = "".join(f"<tr><th>{e(r['what'])}</th><td>{e(r['value'])}</td><td>{e(r['vs measured'])}</td></tr>" for r in rows)
    nums = "".join(f"<tr><th>{e(name)}</th><td>{e(value)}</td></tr>" for name, value in numbers)
    steps = "".join(f"<li>{e(line)}</li>" for line in calc)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)} · SpecLab worksheet</title>
<style>
@page {{ size: A4; margin: 14mm; }}
body {{ font: 11pt/1.35 system-ui, sans-serif; max-width: 180mm; margin: auto; color: #111; }}
h1 {{ font-size: 15pt; margin: 0 0 4pt; }} h2 {{ font-size: 12pt; margin: 12pt 0 4pt; }}
table {{ border-collapse: collapse; width: 100%; }} th, td {{ border: 1px solid #999; padding: 3pt 6pt; text-align: left; }}
th {{ width: 55%; font-weight: 600; }} .src {{ color: #444; font-size: 9pt; }} li {{ margin: 2pt 0; }}
.blank {{ height: 40pt; border: 1px dashed #999; }}
</style></head><body>
<h1>{e(title)}</h1>
<p class="src">SpecLab worksheet. Numbers: {e(source)}.</p>
<h2>1. Predict, then measure</h2>
<p>{e(question)}</p>
<table><tr><th></th><td>value</td><td>÷ measured</td></tr>{table}</table>
<h2>2. This class's measured numbers</h2>
<table>{nums}</table>
<h2>3. Leviathan's formula by hand</h2>
<ol>{steps}</ol>
<p>Why do the model and the measurement differ? Write one sentence:</p><div class="blank"></div>
<p class="src">Formulas: Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers via Speculative
Decoding", ICML 2023 (eq. 1, Theorem 3.8). Thesis: J. Barrow, "Why is speculative decoding fast?", 2026.</p>
</body></html>
"""
