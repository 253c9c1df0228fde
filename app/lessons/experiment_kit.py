"""What every Lessons experiment is made of: its settings (Knob), the prediction a student makes first (Prediction),
the experiment itself (Experiment), and the lanes most lessons run (plain and speculative decoding of the same prompts,
interleaved). The experiments live in app/lessons/pass_lessons.py (lessons 1-3: one pass, more FLOPs, past the ridge)
and app/lessons/load_lessons.py (lessons 4-7: load, adaptive depth, width); app/lessons/experiments.py is their table.
No streamlit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.lessons.runs import Job, interleaved, lane_pair
from engine import DecodeConfig
from engine.drafters import drafter_name


@dataclass(frozen=True)
class Knob:
    """One setting of a lesson, drawn as a select slider bound to the URL query parameter `key`."""

    key: str
    label: str
    options: tuple
    default: float | int
    help: str = ""


@dataclass(frozen=True)
class Prediction:
    """The number a student commits to before the run, and what it is set against afterwards."""

    question: str  # may use {settings} fields, e.g. "speedup at batch {batch}"
    placeholder: str
    measured: Callable[[dict, dict], float | None]  # (measurement, settings) -> the measured number
    models: Callable[[dict, dict], list[tuple[str, float | None]]]  # -> [(model name, its number)]
    unit: str = "×"


@dataclass(frozen=True)
class Experiment:
    run: Callable[[object, object, dict], dict]  # (pair, probe, settings) -> measurement (plain numbers)
    knobs: tuple[Knob, ...]
    predict: Prediction
    needs: tuple[str, ...] = ()  # drafter kinds, any one of which the pair must offer
    leviathan: Callable[[dict, dict], dict | None] = field(default=lambda m, s: None)  # -> {alpha, k, c} for worksheets

    def defaults(self) -> dict:
        return {k.key.split("_", 1)[1]: k.default for k in self.knobs}


def model_drafter(pair) -> str:
    """The EAGLE head where the pair has one, else the draft model."""
    return "eagle" if drafter_name(pair, "eagle") else "model"


ROUNDS = 3  # every contender runs this many times, interleaved (app/lessons/runs.py); a lesson may run fewer


def lane_jobs(prompts: list[str], depth: int, drafter: str, tokens: int, **spec) -> dict[str, Job]:
    return {
        "ar": Job(prompts, DecodeConfig(mode="autoregressive", max_new_tokens=tokens)),
        "spec": Job(prompts, DecodeConfig(depth=depth, drafter=drafter, max_new_tokens=tokens, **spec)),
    }


def lanes(pair, prompts: list[str], depth: int, drafter: str, tokens: int, rounds: int = ROUNDS, **spec) -> dict:
    """Plain and speculative decoding of the same prompts, interleaved `rounds` times, as lanes (the median run
    of each, with every run's tokens/s) and the compare numbers of the two median runs."""
    runs = interleaved(pair, lane_jobs(prompts, depth, drafter, tokens, **spec), rounds)
    return lane_pair(runs["ar"], runs["spec"])


def _leviathan_of(m: dict) -> dict | None:
    """α, the depth actually drafted and c of one compare dict (None when the run drafted nothing)."""
    if m.get("alpha") is None or not m.get("drafted_depth") or m.get("c") is None:
        return None
    return {"alpha": m["alpha"], "k": m["drafted_depth"], "c": m["c"], "measured": m.get("speedup")}


def _leviathan_models(m: dict) -> list[tuple[str, float | None]]:
    return [
        ("Leviathan, Theorem 3.8 (verify = one plain step)", m.get("predicted_speedup")),
        ("Leviathan with the measured verify cost", m.get("predicted_measured_verify")),
    ]
