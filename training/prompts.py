"""The distillation prompt set: topics x task templates, seeded, with whole topics held out; round 7 is a broad
mix of tasks instead (translation, summaries, math, passages, code: training/mix.py).

Shared by the draft distillation (training/distill.py), the EAGLE head training (training/eagle.py) and
the agreement analysis. The topics, tasks and paragraphs live in assets/training/prompts.json, one entry per
round of data gathering (`load_rounds` reads it and checks it strictly). The engine's benchmark reads the
held-out prompts from assets/heldout_prompts.json, which `python -m training.prompts --write` regenerates
from this module (a test checks the two agree), so the runtime never imports training code.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "assets"
PROMPTS_ASSET = ASSETS / "training" / "prompts.json"
PROMPTS_FORMAT = "speclab.training_prompts/1"
HELDOUT_ASSET = ASSETS / "heldout_prompts.json"
HELDOUT_FORMAT = "speclab.heldout_prompts/1"


@dataclass(frozen=True)
class Round:
    """One round of gathered prompts: its new topics, and the tasks it adds (every later round uses them too)."""

    number: int
    topics: list[str]
    tasks: list[tuple[str, str]]
    mix: str | None = None  # a round of task prompts (training/mix.py) drawn from this asset, not topics x tasks


def _strings(value, where: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(s, str) and s.strip() for s in value):
        raise ValueError(f"{where}: expected a non-empty list of non-empty strings")
    if len(set(value)) != len(value):
        raise ValueError(f"{where}: repeated entries")
    return list(value)


def _keys(entry, allowed: set[str], required: set[str], where: str) -> None:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object")
    if set(entry) - allowed or required - set(entry):
        raise ValueError(f"{where}: keys {sorted(entry)}; allowed {sorted(allowed)}, required {sorted(required)}")


def _tasks(value, where: str) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected a list of tasks")
    out = []
    for i, task in enumerate(value):
        _keys(task, {"task", "template"}, {"task", "template"}, f"{where}[{i}]")
        name, template = _strings([task["task"], task["template"]], f"{where}[{i}]")
        if "{topic}" not in template and "{paragraph}" not in template:
            raise ValueError(f"{where}[{i}] ({name}): the template names neither {{topic}} nor {{paragraph}}")
        out.append((name, template))
    if out:
        _strings([name for name, _ in out], f"{where} names")
    return out


def _round(entry, number: int) -> Round:
    where = f"{PROMPTS_ASSET.name} round {number}"
    if number == 1:
        _keys(entry, {"round", "about", "topic_groups", "tasks"}, {"round", "about", "topic_groups", "tasks"}, where)
        topics = []
        for i, group in enumerate(entry["topic_groups"]):
            _keys(group, {"group", "topics"}, {"group", "topics"}, f"{where} group {i}")
            topics += _strings(group["topics"], f"{where} group {group['group']!r}")
    elif "mix" in entry:
        _keys(entry, {"round", "about", "mix"}, {"round", "about", "mix"}, where)
        if not (PROMPTS_ASSET.parent / str(entry["mix"])).is_file():
            raise ValueError(f"{where}: mix file {entry['mix']!r} not found beside {PROMPTS_ASSET.name}")
        topics = None
    else:
        _keys(entry, {"round", "about", "topics", "tasks"}, {"round", "about", "topics"}, where)
        topics = entry["topics"]
    if entry["round"] != number:
        raise ValueError(f"{where}: numbered {entry['round']!r} (rounds go 1, 2, 3, ... in order)")
    if topics is None:
        return Round(number, [], [], mix=entry["mix"])
    return Round(number, _strings(topics, f"{where} topics"), _tasks(entry.get("tasks", []), f"{where} tasks"))


def load_rounds(path: Path = PROMPTS_ASSET) -> tuple[list[Round], list[str]]:
    """The rounds and paragraph templates of the prompt asset; a ValueError names anything malformed."""
    data = json.loads(path.read_text(encoding="utf-8"))
    _keys(data, {"format", "about", "paragraph_templates", "rounds"}, {"format", "paragraph_templates", "rounds"}, path.name)
    if data["format"] != PROMPTS_FORMAT:
        raise ValueError(f"{path.name}: format {data['format']!r}, expected {PROMPTS_FORMAT!r}")
    if not isinstance(data["rounds"], list) or not data["rounds"]:
        raise ValueError(f"{path.name}: no rounds")
    rounds = [_round(entry, number) for number, entry in enumerate(data["rounds"], start=1)]
    if not rounds[0].tasks:
        raise ValueError(f"{path.name}: the first round has no tasks")
    return rounds, _strings(data["paragraph_templates"], f"{path.name} paragraph_templates")


ROUNDS, PARAGRAPH_TEMPLATES = load_rounds()
# The rounds by their historical names (the trainers' help and the tests cite them)
TOPICS, TASKS = ROUNDS[0].topics, ROUNDS[0].tasks
MORE_TOPICS, MORE_TASKS = ROUNDS[1].topics, ROUNDS[1].tasks
THIRD_TOPICS, FOURTH_TOPICS, FIFTH_TOPICS, SIXTH_TOPICS = (r.topics for r in ROUNDS[2:6])
MIX_ROUND = next((r.number for r in ROUNDS if r.mix), None)


class _Builder:
    """Adds rounds to {"train", "heldout", "heldout_topics"} with one seeded generator, in order."""

    def __init__(self, seed: int, heldout_every: int):
        self.rng = random.Random(seed)
        self.heldout_every = heldout_every
        self.pool: dict[str, list[str]] = {}  # topic -> the topics of its round (its "other" is drawn there)
        self.out = {"train": [], "heldout": [], "heldout_topics": []}

    def add(self, round_topics: list[str], pairs: list, tag: dict | None = None) -> None:
        every = self.heldout_every if self.heldout_every > 0 else len(round_topics) + 1
        held = set(round_topics[every - 1 :: every])
        self.pool.update(dict.fromkeys(round_topics, round_topics))
        train, heldout = [], []
        for topic, (task, template) in pairs:
            pool = self.pool[topic]
            ti = pool.index(topic)
            other = pool[(ti + 1 + self.rng.randrange(len(pool) - 1)) % len(pool)]
            paragraph = self.rng.choice(PARAGRAPH_TEMPLATES).format(topic=topic, topic_cap=topic[:1].upper() + topic[1:])
            row = {"prompt": template.format(topic=topic, other=other, paragraph=paragraph), "topic": topic, "task": task}
            row.update(tag or {})
            (heldout if topic in held else train).append(row)
        self.rng.shuffle(train)
        self.rng.shuffle(heldout)
        self.out["train"] += train
        self.out["heldout"] += heldout
        self.out["heldout_topics"] = sorted(set(self.out["heldout_topics"]) | held)


def build_prompts(seed: int = 0, heldout_every: int = 10, topics=None, tasks=None, extended: bool = False, rounds: int = 1) -> dict:
    """Every topic x task combination, seeded and shuffled; every `heldout_every`-th topic is held out.

    Returns {"train": [{prompt, topic, task}], "heldout": [...]}. Held-out topics never appear in training,
    so the held-out acceptance measures generalisation to new subjects, not memorised answers.

    `rounds` n appends the asset's rounds 2..n after the first, each after the one before (so shards already
    generated stay valid; their rows carry "round": n): a round's new topics take every task so far, and the
    tasks a round adds (round 2's) also go to the earlier rounds' training topics. `extended` is rounds 2.
    `topics` and `tasks` replace the first round's.
    """
    if not 1 <= rounds <= len(ROUNDS):
        raise ValueError(f"rounds must be 1 to {len(ROUNDS)}; got {rounds}")
    rounds = max(rounds, 2 if extended else 1)
    topics = list(TOPICS if topics is None else topics)
    all_tasks = list(TASKS if tasks is None else tasks)
    build = _Builder(seed, heldout_every)
    build.add(topics, [(t, k) for t in topics for k in all_tasks])
    seen, earlier = set(topics), list(topics)
    for later in ROUNDS[1:rounds]:
        if later.mix:
            _add_mix(build, later, seed, [t for t in earlier if t not in build.out["heldout_topics"]])
            continue
        earlier_train = [t for t in earlier if t not in build.out["heldout_topics"]]
        new = [t for t in later.topics if t not in seen]
        all_tasks += later.tasks
        pairs = [(t, k) for t in new for k in all_tasks] + [(t, k) for t in earlier_train for k in later.tasks]
        build.add(new, pairs, tag={"round": later.number})
        seen.update(later.topics)
        earlier += new
    return build.out


def _add_mix(build: _Builder, mix_round: Round, seed: int, topics: list[str]) -> None:
    """A mix round's prompts (training/mix.py) over the training topics so far; every `heldout_every`-th
    prompt of each task is held out."""
    from .mix import build_mix, load_mix

    rows = build_mix(seed + mix_round.number, topics, load_mix(PROMPTS_ASSET.parent / mix_round.mix))
    every = build.heldout_every if build.heldout_every > 0 else len(rows) + 1
    seen: dict[str, int] = {}
    train = []
    for row in rows:
        seen[row["task"]] = seen.get(row["task"], 0) + 1
        row["round"] = mix_round.number
        (build.out["heldout"] if seen[row["task"]] % every == 0 else train).append(row)
    random.Random(seed + mix_round.number).shuffle(train)  # a time-capped generation still covers every task
    build.out["train"] += train


def heldout_eval_prompts(heldout: list[dict], n: int) -> list[str]:
    """n held-out prompts, round-robin over the held-out topics so every topic is represented. Only the
    first round's (no "round" key), so the evaluation stays the same when later rounds add more."""
    by_topic: dict[str, list[str]] = {}
    for row in heldout:
        if row.get("round", 1) != 1:
            continue
        by_topic.setdefault(row["topic"], []).append(row["prompt"])
    out, i = [], 0
    topics = sorted(by_topic)
    while len(out) < n and any(by_topic.values()):
        lst = by_topic[topics[i % len(topics)]]
        if lst:
            out.append(lst.pop())
        i += 1
    return out


def heldout_asset() -> dict:
    """The contents of assets/heldout_prompts.json: every first-round held-out prompt, in the round-robin
    order `heldout_eval_prompts` takes them (so its first n are the engine benchmark's n held-out prompts)."""
    heldout = build_prompts(seed=0)["heldout"]
    return {
        "format": HELDOUT_FORMAT,
        "about": "Prompts on topics the shipped drafters never saw in training (every 10th topic held out), "
        "round-robin over those topics. Written by `python -m training.prompts --write`.",
        "prompts": heldout_eval_prompts(heldout, len(heldout)),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.prompts", description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help=f"(re)write {HELDOUT_ASSET.name} in assets/")
    args = p.parse_args(argv)
    data = heldout_asset()
    if args.write:
        HELDOUT_ASSET.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {len(data['prompts'])} held-out prompts to {HELDOUT_ASSET}")
    else:
        print(f"{len(data['prompts'])} held-out prompts; --write to store them in {HELDOUT_ASSET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
