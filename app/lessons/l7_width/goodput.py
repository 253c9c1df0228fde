"""Lesson 7's fourth contender, goodput with trees allowed: the shape it chose at every decode step, kept per row,
and what the run says of its choices against the fixed chain and tree, by the one rule."""

from __future__ import annotations

from app.lessons.kit import noise
from app.lessons.kit.noise import runs_text
from app.lessons.kit.rows import PLAIN, cell, load_rate, load_runs, ratio

GOODPUT = "goodput"
FIXED = (PLAIN, "chain", "tree")  # the fixed shapes goodput is set against
SHAPES = ("plain", "chain", "tree")  # what one decode step verified
MAX_SHAPES = 512  # steps kept per row (the schema's list cap, engine/checks.py SPEC_MAX_LIST)


def step_shapes(traces: list) -> list[dict]:
    """The shape each decode step verified, in order (batch-1 prompts one after another): {"shape": plain, chain or
    tree, "nodes": draft nodes per row (0, k or n), "depth"}. From the trace alone: a tree step records its nodes
    (`Step.tree_nodes`, engine/decoding/decode.py), a chain drafted `Step.depth` tokens, a plain step none."""
    out = []
    for step in (s for t in traces for s in t.steps if s.kind == "decode"):
        if step.tree_nodes is not None:
            out.append({"shape": "tree", "nodes": step.tree_nodes, "depth": step.depth})
        else:
            out.append({"shape": "chain" if step.depth else "plain", "nodes": step.depth, "depth": step.depth})
    return out


def goodput_fields(batch: int, traces: list) -> dict:
    """A goodput row's own numbers, from its median run: the shape of each decode step, the mean draft nodes per
    row it verified, and its tokens per pass as batch × (mean nodes + 1), rounded (the fixed shapes' formula)."""
    shapes = step_shapes(traces)
    mean = sum(s["nodes"] for s in shapes) / len(shapes) if shapes else 0.0
    return {"tokens_per_pass": round(batch * (mean + 1)), "mean_nodes": mean, "shapes": shapes[:MAX_SHAPES]}


def shapes_text(shapes: list[dict]) -> str:
    """'plain decoding at 3, a chain at 5 (k = 2 to 4) and a tree at 4 (6 to 18 nodes, mean 9.5) of 12 decode steps'."""
    parts = []
    for kind, name in zip(SHAPES, ("plain decoding", "a chain", "a tree")):
        sizes = [s["nodes"] for s in shapes if s["shape"] == kind]
        if not sizes:
            continue
        lo, hi = min(sizes), max(sizes)
        what = "k = " if kind == "chain" else ""
        unit = " nodes" if kind == "tree" else ""
        size = (
            ""
            if kind == "plain"
            else f" ({what}{lo}{unit})"
            if lo == hi
            else f" ({what}{lo} to {hi}{unit}, mean {sum(sizes) / len(sizes):.1f})"
        )
        parts.append(f"{name} at {len(sizes)}{size}")
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{listed} of {len(shapes)} decode step{'s' if len(shapes) != 1 else ''}"


NAMED = {PLAIN: "plain decoding", "chain": "the chain", "tree": "the tree"}  # a fixed contender in a sentence


def _choice_text(good: dict, best: dict, shape: tuple[str, int], verdict: int) -> str:
    """What goodput verified, step by step, set against the fastest fixed shape's own (`shape`: its kind and nodes)."""
    shapes = good["shapes"]
    text = f" It chose {shapes_text(shapes)}, {nodes_per_row(good):.1f} draft nodes per row on average"
    if all((s["shape"], s["nodes"]) == shape for s in shapes):
        text += f": the same shape as {NAMED[best['contender']]} at every step"
        if verdict < 0:  # the same verify passes, yet slower: the gap lies in what else a goodput run does
            text += ", so the gap lies outside its choices (a goodput run also prefills its drafter and prices every step)"
        return text + "."
    counts = {k: sum(s["shape"] == k for s in shapes) for k in SHAPES}
    common = [k for k, n in counts.items() if n == max(counts.values())]
    if len(common) > 1:  # a tie: no most frequent choice to name
        return text + "."
    return text + f"; its most frequent choice ({common[0]}) {'is' if common[0] == shape[0] else 'is not'} that shape's kind."


def _goodput_line(batch: int, good: dict, best: dict, shape: tuple[str, int]) -> tuple[str, int | None]:
    """Goodput against the fastest fixed shape (by median) at one batch size, a verdict only by the one rule; and
    (verdict, or None without rounds to judge by)."""
    v = noise.judge(load_runs(good), load_runs(best))
    spread = v is not None and v.lo is not None
    verdict = v.sign if v else 0
    said = f"goodput was {v.word} it ({v.interval})" if v else "one run each: can't tell"
    vs = f", {ratio(good, best):.2f}×" if load_rate(best) else ""
    text = (
        f"Batch {batch}: goodput decoded {load_rate(good):.1f} tokens/s{vs} the fastest fixed shape, "
        f"{NAMED[best['contender']]} ({load_rate(best):.1f}): {said}."
    )
    if spread:
        text += f" Goodput {runs_text(load_runs(good))}; {best['contender']} {runs_text(load_runs(best))}."
    if good.get("shapes"):
        text += _choice_text(good, best, shape, verdict)
    return text, verdict if spread else None


def goodput_conclusion(result: dict) -> list[str]:
    """Goodput against the fastest fixed shape at each batch size, what it chose, and whether it matched the best
    fixed shape throughout (said only where every batch size had a spread to judge by). [] without a goodput row."""
    lines, verdicts, best_of = [], {}, {}
    for batch in sorted({r["batch"] for r in result["rows"]}):
        good = cell(result["rows"], batch, GOODPUT)
        fixed = [r for r in (cell(result["rows"], batch, n) for n in FIXED) if r]
        if not good or not fixed:
            continue
        best = best_of[batch] = max(fixed, key=load_rate)
        shape = {PLAIN: ("plain", 0), "chain": ("chain", result["depth"]), "tree": ("tree", result["nodes"])}[best["contender"]]
        line, verdicts[batch] = _goodput_line(batch, good, best, shape)
        lines.append(line)
    if len(verdicts) < 2 or None in verdicts.values():
        return lines
    short = [b for b, v in verdicts.items() if v < 0]
    if short:
        text = f"Goodput fell short of the fastest fixed shape at batch {' and '.join(map(str, short))}, by the rule."
    else:
        how = {(0,): "was not told apart from it", (1,): "beat it by the rule"}.get(
            tuple(set(verdicts.values())), "beat it or was not told apart from it"
        )
        text = f"Goodput {how} at every batch size, against the fastest fixed shape there."
    names = {b: r["contender"] for b, r in best_of.items()}
    if len(set(names.values())) > 1:
        text += (
            " The fastest fixed shape was not the same at every batch size ("
            + ", ".join(f"{NAMED[n]} at batch {b}" for b, n in names.items())
            + "): no one fixed shape was best at every batch size"
            + ("; goodput chose its shape per step." if not short else ".")
        )
    lines.append(text)
    return lines


def nodes_per_row(r: dict) -> float:
    """Draft nodes per row a contender verified: goodput's measured mean, else its fixed shape's (0, k or n)."""
    return r["mean_nodes"] if r.get("mean_nodes") is not None else r["tokens_per_pass"] / r["batch"] - 1
