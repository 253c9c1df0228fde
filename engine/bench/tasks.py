"""The task bench: speculative decoding measured per task (Spec-Bench's, or a prompt file's own categories) and per
batch, the axis Spec-Bench leaves out. Each (task, batch) runs plain decoding and every contender on the same rows,
interleaved round by round (engine/bench/cells.py), and reports per contender:

- the decode-only speedup over plain decoding: the one verdict rule's typical ratio over the paired rounds with its
  95% range and its word (engine/verdict.py), so no winner is named inside the noise;
- τ, the mean tokens a row gains per target pass (Spec-Bench's mean accepted tokens, vLLM's
  `mean_acceptance_length` = 1 + accepted ÷ drafting steps; 1.00 for plain decoding), and the acceptance at each
  draft position;
- the whole-run speedup (prefill included) beside it, as a medians' ratio;
- the rows whose text differs from plain decoding's (`rows_differ`). Greedy speculation is lossless in exact
  arithmetic, but in bfloat16 a verify pass of k + 1 tokens rounds differently from a one-token pass, and a near-tie
  can flip: a row may then stop at its end-of-turn token where plain decoding's ran on to the token limit, or the
  reverse. Tokens/s then compare different amounts of text in the same decode steps, so such a cell is marked.

At batch 1 a task's prompts decode one after another (Spec-Bench's setting); at batch B the task's prompts fill B rows
(repeated in order where the task has fewer). Every run names its task (`DecodeConfig.task`), so goodput starts each
run of a task from the acceptance that task's last run ended with, not from the drafter's card
(engine/decoding/goodput_steps.py, `start_from_task`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from engine import verdict
from engine.bench.cells import run_cells
from engine.bench.prompt_files import Prompt, task_name, tasks
from engine.bench.task_records import judged
from engine.config import DecodeConfig
from engine.drafters import DRAFTERS
from engine.options import MAX_TASK


@dataclass(frozen=True)
class Contender:
    name: str  # as the table prints it
    spec: dict  # DecodeConfig fields beside max_new_tokens


TREE = {"tree_nodes": 8, "tree_topk": 2}  # 8 nodes, 2 children a node: fits depth 3 (2 + 2 × 2 × 2 = 10 nodes)


DEPTHS = {"ngram": 4, "ngram_eagle": 4}  # a chain's depth per drafter (3 elsewhere): a lookup's drafts are free, so it drafts deeper


TREE_DRAFTER = "eagle"  # the tree and goodput contenders branch on the EAGLE head's distribution


BOTH_DRAFTER = "ngram_eagle"  # the lookup and the head in one chain (engine/drafters/hybrid.py), priced by goodput too


def _contenders() -> dict[str, Contender]:
    """Every registered drafter as a chain (engine/drafters/__init__.py's registry, in its order, by its display
    name), then a tree and the goodput policy on TREE_DRAFTER where it branches, and goodput over BOTH_DRAFTER's chains;
    plain decoding is each cell's baseline."""
    out = {}
    for kind, d in DRAFTERS.items():
        depth = DEPTHS.get(kind, 3)
        out[kind] = Contender(f"{d.display}, k {depth}", {"drafter": kind, "depth": depth})
    tree = DRAFTERS.get(TREE_DRAFTER)
    if tree is not None and tree.branches:
        spec = {"drafter": TREE_DRAFTER, "depth": 3, **TREE}
        out["tree"] = Contender(f"{tree.display} tree, {TREE['tree_nodes']} nodes", spec)
        out["goodput"] = Contender(f"goodput ({tree.display}, k ≤ 3, tree ≤ {TREE['tree_nodes']})", spec | {"policy": "goodput"})
    both = DRAFTERS.get(BOTH_DRAFTER)
    if both is not None:  # goodput over both shipped drafters: lookups where the text repeats, the head elsewhere
        depth = DEPTHS.get(BOTH_DRAFTER, 3)
        spec = {"drafter": BOTH_DRAFTER, "depth": depth, "policy": "goodput"}
        out["goodput_both"] = Contender(f"goodput ({both.display}, k ≤ {depth})", spec)
    return out


CONTENDERS = _contenders()


def contender(key: str) -> Contender:
    if key not in CONTENDERS:
        raise ValueError(f"unknown contender {key!r}: choose from {', '.join(CONTENDERS)}")
    return CONTENDERS[key]


def rows_of(prompts: list[Prompt], batch: int) -> list[str]:
    """A batch of `batch` rows from one task's prompts, in order, repeated where there are fewer."""
    return [prompts[i % len(prompts)].text for i in range(batch)]


def _cell(task: str, batch: int, name: str, cell: dict, plain: dict) -> dict:
    """One measured cell; its speedup and verdict come from task_records.judged, the one place a row is judged."""
    return {
        "task": task,
        "batch": batch,
        "contender": name,
        "decode_tokens_per_s": cell["decode_tokens_per_s"],
        "decode_tokens_per_s_runs": cell["decode_tokens_per_s_runs"],
        "whole_run_speedup": cell["tokens_per_s"] / plain["tokens_per_s"] if plain["tokens_per_s"] else None,
        "tau": cell["tokens_per_step"] or 1.0,
        "per_position_acceptance": cell["per_position_acceptance"],
        "ttft_s": cell["ttft_s"],
        "other_cores": cell["other_cores"],
        "rows_differ": rows_differ(cell["outputs"], plain["outputs"]),
    }


def rows_differ(outputs: list[list[int]], plain: list[list[int]]) -> int:
    """How many rows' generated tokens differ from plain decoding's of the same prompts (greedy runs repeat exactly)."""
    return sum(a != b for a, b in zip(outputs, plain)) + abs(len(outputs) - len(plain))


def task_label(task: str) -> str:
    """A task as `DecodeConfig.task` names it (a prompt file's category may be any string): its printable characters,
    at most MAX_TASK of them."""
    return "".join(c for c in task if c.isprintable())[:MAX_TASK]


def run_tasks(pair, prompts: list[Prompt], batches: list[int], keys: list, max_new_tokens: int, rounds: int, log=print) -> list[dict]:
    """One row per (task, batch, contender), plain decoding first in each (task, batch); `rounds` interleaved rounds
    after one warm-up of each contender. keys: CONTENDERS' keys or Contender objects. ValueError, one line, for an
    unknown contender or a batch below 1."""
    chosen = [k if isinstance(k, Contender) else contender(k) for k in keys]
    if any(b < 1 for b in batches):
        raise ValueError(f"batch sizes must be ≥ 1, not {batches}")
    cfgs = [DecodeConfig(mode="autoregressive", max_new_tokens=max_new_tokens)]
    cfgs += [DecodeConfig(max_new_tokens=max_new_tokens, **c.spec) for c in chosen]
    names = ["plain"] + [c.name for c in chosen]
    out = []
    for task in tasks(prompts):
        group = [p for p in prompts if p.task == task]
        for batch in batches:
            sequential = batch == 1
            texts = [p.text for p in group] if sequential else rows_of(group, batch)
            named = [DecodeConfig.from_dict(c.to_dict() | {"task": task_label(task)}) for c in cfgs]  # goodput learns per task
            cells = run_cells(pair, texts, named, rounds, sequential=sequential)
            rows = judged([_cell(task, batch, name, cell, cells[0]) for name, cell in zip(names, cells)])
            out += rows
            log(f"  {task_name(task):<15} batch {batch:>3}: " + ", ".join(f"{r['contender']} {r['speedup']:.2f}×" for r in rows[1:]))
    return out


def _mark(row: dict) -> str:
    """A cell of the leaderboard: the speedup, its verdict's sign, τ, and ≠n where n rows' text differs from plain's."""
    sign = {"faster": "+", "slower": "−", "level": "=", "can't tell": "?"}.get(row["verdict"], "")
    differ = f" ≠{row['rows_differ']}" if row.get("rows_differ") else ""
    return f"{row['speedup']:.2f}×{sign} τ {row['tau']:.2f}{differ}"


def format_tasks(rows: list[dict]) -> str:
    """Spec-Bench's leaderboard per batch: contenders as rows, tasks as columns, each cell the decode-only speedup
    over plain decoding (+ faster, − slower, = level, ? can't tell, by the one rule) and τ."""
    lines = []
    order = list(dict.fromkeys(r["task"] for r in rows))
    for batch in sorted({r["batch"] for r in rows}):
        at = [r for r in rows if r["batch"] == batch]
        names = list(dict.fromkeys(r["contender"] for r in at if r["contender"] != "plain"))
        width = max([len(n) for n in names] + [10])
        head = f"batch {batch:<{width - 6}}" + "".join(f" {task_name(t):>20}" for t in order)
        lines += [head, "-" * len(head)]
        plain = {r["task"]: r for r in at if r["contender"] == "plain"}
        lines.append(f"{'plain tok/s':<{width}}" + "".join(f" {plain[t]['decode_tokens_per_s']:>20.1f}" for t in order if t in plain))
        for name in names:
            cells = {r["task"]: r for r in at if r["contender"] == name}
            lines.append(f"{name:<{width}}" + "".join(f" {_mark(cells[t]) if t in cells else '':>20}" for t in order))
        lines.append("")
    lines.append("cells: decode-only speedup over plain (+ faster, − slower, = level, ? can't tell: " + verdict.RULE + ") and τ")
    lines.append("≠n: n rows' text differs from plain decoding's (bfloat16 rounding flipped a near-tie): unequal work, read with care")
    return "\n".join(lines)


def summary(rows: list[dict]) -> dict:
    """Per (batch, contender): the median over tasks of the speedup and of τ (Spec-Bench's "overall" is a mean over
    prompts; a median over tasks keeps one task from carrying the row)."""
    out: dict = {}
    for r in rows:
        if r["contender"] != "plain":
            out.setdefault((r["batch"], r["contender"]), []).append(r)
    return {
        key: {"speedup": statistics.median(r["speedup"] for r in rs), "tau": statistics.median(r["tau"] for r in rs)}
        for key, rs in out.items()
    }
