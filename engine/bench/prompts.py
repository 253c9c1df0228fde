"""The prompt sets the benchmarks and the app draw from: open chat prompts, extractive prompts (the
case prompt-lookup drafting is built for) and the held-out prompts the drafters never trained on."""

from __future__ import annotations

import json
from pathlib import Path

# Open-ended chat prompts (varied topics and tasks) and extractive prompts where the answer repeats
# its input -- the case prompt-lookup (n-gram) drafting is built for.
CHAT_PROMPTS = [
    "Explain why the sky is blue in a short paragraph.",
    "Write a short story about a robot who learns to paint.",
    "List five tips for staying focused while studying.",
    "Compare cats and dogs as pets.",
    "How do I make a cup of green tea?",
    "What causes the seasons on Earth?",
    "Write a polite email asking a colleague to review my report.",
    "Describe how a bicycle works.",
    "Give me three ideas for a rainy weekend.",
    "What is the difference between weather and climate?",
    "Explain what a computer program is to a ten year old.",
    "Write a haiku about autumn leaves.",
    "Why do we need sleep?",
    "Summarise the plot of Little Red Riding Hood.",
    "How does a refrigerator keep food cold?",
    "What are the benefits of learning a second language?",
]
EXTRACTIVE_PARAGRAPH = (
    "The Great Barrier Reef is the world's largest coral reef system. It is composed of over 2,900 individual "
    "reefs and 900 islands stretching for over 2,300 kilometres over an area of approximately 344,400 square "
    "kilometres. The reef is located in the Coral Sea, off the coast of Queensland, Australia."
)
EXTRACTIVE_PROMPTS = [
    f"Copy the following paragraph exactly, word for word:\n\n{EXTRACTIVE_PARAGRAPH}",
    f"Repeat this text exactly as written:\n\n{EXTRACTIVE_PARAGRAPH}",
]
PROMPT_SETS = {"chat": CHAT_PROMPTS, "extractive": EXTRACTIVE_PROMPTS}


HELDOUT_FILE = Path(__file__).resolve().parents[2] / "assets" / "heldout_prompts.json"


def heldout_prompts(n: int = 16) -> list[str]:
    """Prompts on the topics the shipped drafters never saw in training (training/prompts.py holds every
    10th topic out), round-robin over those topics: the honest set for measuring them. Read from
    assets/heldout_prompts.json (`python -m training.prompts --write`; a test keeps the two equal)."""
    prompts = json.loads(HELDOUT_FILE.read_text())["prompts"]
    if not 1 <= n <= len(prompts):
        raise ValueError(f"there are {len(prompts)} held-out prompts; asked for {n}")
    return prompts[:n]


SPEC_BENCH_SET = "spec-bench:"  # a prompt set "spec-bench:<task>": one task of Spec-Bench (assets/spec_bench/)


def spec_bench_sets() -> dict[str, str]:
    """prompt set -> its name in a table, one per Spec-Bench task ("spec-bench:qa" -> "Spec-Bench: QA")."""
    from engine.bench.prompt_files import SPEC_BENCH, read_prompts, task_name, tasks

    return {SPEC_BENCH_SET + t: f"Spec-Bench: {task_name(t)}" for t in tasks(read_prompts(SPEC_BENCH))}


def prompt_set_list(prompt_set: str) -> list[str]:
    """The prompts of a set: chat, extractive, heldout, or spec-bench:<task> (that task's first turns, in order)."""
    if prompt_set == "heldout":
        return heldout_prompts()
    if prompt_set.startswith(SPEC_BENCH_SET):
        from engine.bench.prompt_files import SPEC_BENCH, read_prompts, select

        return [p.text for p in select(read_prompts(SPEC_BENCH), task=prompt_set[len(SPEC_BENCH_SET) :])]
    if prompt_set not in PROMPT_SETS:
        raise ValueError(f"unknown prompt set {prompt_set!r}: choose chat, extractive, heldout or spec-bench:<task>")
    return PROMPT_SETS[prompt_set]


def batch_prompts(prompt_set: str, batch: int) -> list[str]:
    prompts = prompt_set_list(prompt_set)
    return [prompts[i % len(prompts)] for i in range(batch)]
