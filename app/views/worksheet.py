"""The printable worksheet a lesson hands out (one HTML page: the prediction against the measurement and the models,
the run's key numbers, Leviathan's formula worked by hand with the run's α, k and c), and the rows and the sentence
on the student's guess that the Lessons page and a class's result page show. Every value escaped. No streamlit.
"""

from __future__ import annotations

import html

from engine.costs import expected_tokens_per_step


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "—" if x is None else f"{x:{spec}}"


def counted(x: float, unit: str, whole: bool = False) -> str:
    """'1.50×', or for a count '2 drafts', '1 draft': no decimals, and a count of one takes the singular."""
    return f"{x:{'.0f' if whole else '.2f'}}" + (unit[:-1] if whole and round(x) == 1 and unit.endswith("s") else unit)


def prediction_rows(
    guess: float | None, measured: float | None, models: list[tuple[str, float | None]], unit: str = "×", whole: bool = False
) -> list[dict]:
    """Rows {"what": name, "value": text, "vs measured": text}: your guess, the measurement, then each model. `whole`:
    the guess and the measurement are counts (lesson 0's kept drafts), written without decimals."""

    def versus(x):
        return f"{x / measured:.2f}× the measured" if x is not None and measured else "—"

    rows = [
        {"what": "your guess", "value": counted(guess, unit, whole) if guess is not None else "—", "vs measured": versus(guess)},
        {"what": "measured", "value": counted(measured, unit, whole) if measured is not None else "—", "vs measured": "—"},
    ]
    rows += [{"what": name, "value": fmt(x) + unit if x is not None else "—", "vs measured": versus(x)} for name, x in models]
    return rows


def guess_line(guess: float | None, measured: float | None, unit: str = "×", whole: bool = False) -> str | None:
    """One sentence: how far the guess was from the measurement (None without both)."""
    if guess is None or measured is None:
        return None
    off = abs(guess - measured) / measured if measured else None
    return f"You guessed {counted(guess, unit, whole)}; this run measured {counted(measured, unit, whole)}" + (
        f" (your guess was {off:.0%} off)." if off is not None else "."
    )


def hand_calculation(alpha: float | None, k: float | None, c: float | None) -> list[str]:
    """Leviathan's formulas worked step by step with the run's numbers; with blanks where a number is missing."""
    if alpha is None or k is None:
        return [
            "α = ______   k = ______   c = ______ (this lesson's run gives no one α, k and c to work with: take "
            "them from lesson 2 or 3, or from the Playground)",
            "E[tokens per step] = (1 − α^(k+1)) ÷ (1 − α) = ______",
            "speedup = E ÷ (k·c + 1) = ______",
        ]
    alpha, k = round(alpha, 3), round(k, 2)  # worked with the digits printed, so a student's own arithmetic agrees
    c = None if c is None else round(c, 3)
    e = expected_tokens_per_step(alpha, k)
    lines = [
        f"α = {alpha:.3f}, k = {k:.2f} (the mean depth actually drafted), "
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
    lines.append(
        "(Leviathan et al.'s Theorem 3.8: it assumes a verify pass costs one plain step; where the lesson's table shows "
        "a dearer verify pass, the measured speedup is lower.)"
    )
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
th {{ width: 55%; font-weight: 600; }} thead th {{ width: auto; }} .src {{ color: #444; font-size: 9pt; }} li {{ margin: 2pt 0; }}
.blank {{ height: 40pt; border: 1px dashed #999; }}
</style></head><body>
<h1>{e(title)}</h1>
<p class="src">SpecLab worksheet. Numbers: {e(source)}.</p>
<h2>1. Predict, then measure</h2>
<p>{e(question)}</p>
<table><thead><tr><th>what</th><th>value</th><th>÷ measured</th></tr></thead>{table}</table>
<h2>2. This class's measured numbers</h2>
<table>{nums}</table>
<h2>3. Leviathan's formula by hand</h2>
<ol>{steps}</ol>
<p>Why do the model and the measurement differ? Write one sentence:</p><div class="blank"></div>
<p class="src">Formulas: Y. Leviathan, M. Kalman, Y. Matias, "Fast Inference from Transformers via Speculative
Decoding", ICML 2023 (eq. 1, Theorem 3.8). Thesis: J. Barrow, "Why is speculative decoding fast?", 2026.</p>
</body></html>
"""
