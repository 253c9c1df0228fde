"""The lessons' registry: every lesson is one module, app/lessons/l<N>_<name>.py, whose `RECORD` (an Experiment,
app/lessons/kit/experiment.py) declares everything about it: its run, settings, prediction, claims, verdict, table,
schema, drawing, worksheet numbers and GPU view. Found here by its file name, so a new lesson touches its record, its
Markdown (lessons/NN-name.md), its checks (lessons/NN-name.checks.json) and its recording (assets/lessons/<name>.json),
and nothing else. The page, the class, the teacher plan, the worksheet, scripts/record/record_lessons.py, the claim
tests and the recordings' loader (below) all iterate it. No streamlit at import.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re

from app.common import measurement, url_keys
from app.lessons.kit import runs
from app.lessons.kit.experiment import Experiment

LESSON_MODULE = re.compile(r"l(\d+)_\w+")


def _records() -> dict[str, Experiment]:
    here = [os.path.dirname(__file__)]  # the lesson modules sit beside this file
    found = sorted((int(m[1]), info.name) for info in pkgutil.iter_modules(here) if (m := LESSON_MODULE.fullmatch(info.name)))
    return {r.name: r for r in (importlib.import_module(f"app.lessons.{name}").RECORD for _, name in found)}


EXPERIMENTS: dict[str, Experiment] = _records()
SCHEMAS = {name: e.schema for name, e in EXPERIMENTS.items()}
url_keys.register("lessons", {k.key: k.label for e in EXPERIMENTS.values() for k in e.knobs})  # the knobs' URL keys


def preparations() -> list:
    """What the lessons' first live runs would otherwise wait for, as steps for the server to take when it starts
    (app/main.py hands them to the preload, one run-lock turn each): this machine's room (every lesson's settings
    come from it), then each record's `prepare`."""
    return [runs.machine_curve, *(e.prepare for e in EXPERIMENTS.values() if e.prepare)]


def check_measurement(name: str, m) -> dict:
    """A lesson's measurement checked against its record's schema (MeasurementError, one line, where it does not fit)."""
    return measurement.check_measurement(name, m, SCHEMAS)


def make_record(name: str, m: dict, **label) -> dict:
    """A recording of lesson `name`'s measurement, labelled (machine, dtype, note, settings, date) and checked."""
    return measurement.make_record(name, m, SCHEMAS, **label)


def load_record(path) -> dict:
    """Read and check one lesson recording (MeasurementError, one line, for a missing, large or malformed file)."""
    return measurement.load_record(path, SCHEMAS)


def save_record(record: dict, path) -> None:
    measurement.save_record(record, path, SCHEMAS)
