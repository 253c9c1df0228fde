"""The broad mix of requests (assets/training/mix.json): translation, news summaries, short questions, math
word problems, questions over passages, code, role play and extraction.

The chat rounds of prompts (training/prompts.py) are topics x kinds of request; a drafter trained on them
alone holds up on chat and less on tasks whose answers look different (a translation, a worked sum, a
function). This round fills each task's templates from the asset's slots with one seeded generator. All of
it is written for SpecLab; none of it comes from Spec-Bench, which stays a held-out test of the drafters.

    rows = build_mix(seed=0, topics=[...])   # [{"prompt", "topic", "task"}], count per task as the asset says
"""

from __future__ import annotations

import json
import random
from pathlib import Path

MIX_ASSET = Path(__file__).resolve().parent.parent / "assets" / "training" / "mix.json"
MIX_FORMAT = "speclab.training_mix/1"
SLOTS = ("de", "fr", "es", "news", "place", "name", "first", "day", "item", "question", "math", "reason", "code", "role")


def load_mix(path: Path = MIX_ASSET) -> dict:
    """The asset, checked: its tasks (name, count, templates) and every slot list non-empty."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("format") != MIX_FORMAT:
        raise ValueError(f"{path.name}: format {data.get('format') if isinstance(data, dict) else None!r}, expected {MIX_FORMAT!r}")
    slots = data.get("slots")
    if not isinstance(slots, dict) or set(slots) != set(SLOTS):
        raise ValueError(f"{path.name}: slots must be exactly {sorted(SLOTS)}")
    for name, values in slots.items():
        if not isinstance(values, list) or not values or not all(isinstance(v, str) and v.strip() for v in values):
            raise ValueError(f"{path.name}: slot {name!r} must be a non-empty list of non-empty strings")
    tasks = data.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise ValueError(f"{path.name}: no tasks")
    for t in tasks:
        if not isinstance(t, dict) or set(t) != {"task", "count", "templates"}:
            raise ValueError(f"{path.name}: a task needs exactly task, count and templates; got {t!r:.80}")
        if not isinstance(t["count"], int) or t["count"] < 1 or not t["templates"]:
            raise ValueError(f"{path.name}: task {t['task']!r} needs a positive count and templates")
    if len({t["task"] for t in tasks}) != len(tasks):
        raise ValueError(f"{path.name}: repeated task names")
    return data


def _numbers(rng: random.Random) -> dict:
    b, c, d = rng.randint(3, 12), rng.randint(2, 9), rng.randint(2, 6)
    cows = rng.randint(1, b - 1)
    return {
        "a": rng.randint(10, 90),
        "a0": 10 * rng.randint(4, 30),
        "b": b,
        "b2": b * rng.randint(2, 4),
        "b4": 2 * b + 2 * cows,
        "c": c,
        "d": d,
        "p": rng.choice((10, 20, 25, 50)),
        "year": rng.randint(1990, 2022),
        "year2": rng.randint(2024, 2030),
    }


def _sentences(rng: random.Random, pool: list[str], lo: int, hi: int) -> list[str]:
    return rng.sample(pool, rng.randint(lo, hi))


def _fill(template: str, rng: random.Random, slots: dict, subjects: list[str]) -> str:
    """One template with every slot drawn; a composite slot (an article, passages, a sum) is drawn from its
    own list and filled with the same names and numbers."""
    topic, other = subjects[:2]
    first, first2 = rng.sample(slots["first"], 2)
    v = {
        **_numbers(rng),
        "topic": topic,
        "other": other,
        "first": first,
        "first2": first2,
        **{k: rng.choice(slots[k]) for k in ("place", "name", "day", "item", "code", "role")},
    }

    def news(subject: str, lo: int, hi: int) -> str:
        return " ".join(s.format(**{**v, "topic": subject}) for s in _sentences(rng, slots["news"], lo, hi))

    v["question"] = rng.choice(slots["question"]).format(**v)
    v["math"] = rng.choice(slots["math"]).format(**v)
    v["reason"] = rng.choice(slots["reason"]).format(**v)
    v["de"] = " ".join(_sentences(rng, slots["de"], 2, 4))
    v["fr"] = " ".join(_sentences(rng, slots["fr"], 1, 3))
    v["es"] = " ".join(_sentences(rng, slots["es"], 1, 3))
    v["article"] = news(topic, 5, 7)
    order = rng.sample(subjects, len(subjects))  # the passage that answers is not always the first
    v["passages"] = "\n".join(f"Passage {i}: {news(s, 2, 3)}" for i, s in enumerate(order, start=1))
    return template.format(**v)


def build_mix(seed: int, topics: list[str], data: dict | None = None) -> list[dict]:
    """Every task's `count` distinct prompts, in task order, each {"prompt", "topic", "task"}; `topics` (three
    or more) fill {topic}, {other} and the passages' third subject."""
    if len(topics) < 3:
        raise ValueError("the mix needs at least three topics")
    data = data or load_mix()
    rng = random.Random(seed)
    rows, seen = [], set()
    for task in data["tasks"]:
        for _ in range(task["count"]):
            for _try in range(50):  # a task with few distinct fillings (code) stops repeating itself
                subjects = rng.sample(topics, 3)
                prompt = _fill(rng.choice(task["templates"]), rng, data["slots"], subjects)
                if prompt not in seen:
                    break
            else:
                raise ValueError(f"task {task['task']!r}: fewer distinct prompts than its count {task['count']}")
            seen.add(prompt)
            rows.append({"prompt": prompt, "topic": subjects[0], "task": task["task"]})
    return rows
