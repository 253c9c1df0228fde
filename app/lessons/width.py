"""Lesson 7 ("Width: a draft tree"): its table and its conclusion, computed from the measurement (no streamlit).

Rows are one per (batch, contender) for plain decoding, a chain and a tree of the same depth (app/lessons/
experiments.py `width`). A winner between tree and chain is named only beyond the spread of their interleaved
runs (app/lessons/noise.py); every reason given is a measured number: tokens per pass, tokens emitted per pass,
the verify pass's time.
"""

from __future__ import annotations

from app.lessons.load import cell
from app.lessons.noise import clear_winner, runs_text


def width_table(result: dict) -> list[dict]:
    """Lesson 7's rows as a table: tokens per pass (what the verify pass carries), tokens emitted per pass,
    tokens/s (median, and the runs' range), the verify pass's median time and FLOPs against plain decoding."""
    out = []
    for r in result["rows"]:
        plain = cell(result["rows"], r["batch"], "plain decoding")
        runs = r.get("tokens_per_s_runs")
        out.append(
            {
                "batch": r["batch"],
                "contender": r["contender"],
                "tokens per pass": r["tokens_per_pass"],
                "tokens emitted per pass": round(r["tokens_per_step"], 2)
                if r.get("tokens_per_step")
                else (1.0 if r["contender"] == "plain decoding" else None),  # plain decoding: one per pass
                "tokens/s": round(r["tokens_per_s"], 1),
                "runs (tokens/s)": ", ".join(f"{v:.1f}" for v in runs["values"]) if runs else "one run",
                "verify ms (median)": round(r["verify_ms"], 1) if r.get("verify_ms") is not None else None,
                "FLOPs × plain": round(r["flops"] / plain["flops"], 2) if plain and plain["flops"] else None,
            }
        )
    return out


VERDICT = {1: "faster", -1: "slower", 0: "no clear winner"}


def _batch_line(batch: int, tree: dict, chain: dict, shape: str) -> tuple[str, int]:
    ratio = tree["tokens_per_s"] / chain["tokens_per_s"]
    verdict = clear_winner(tree.get("tokens_per_s_runs"), chain.get("tokens_per_s_runs"))
    spread = tree.get("tokens_per_s_runs") and chain.get("tokens_per_s_runs")
    why = (
        f"every run {'above' if verdict > 0 else 'below'} every run of the chain"
        if verdict
        else "their runs overlap"
        if spread
        else "one run each: no spread to judge by"
    )
    text = (
        f"Batch {batch}: the tree ({shape}) ran {tree['tokens_per_s']:.1f} tokens/s, {ratio:.2f}× the chain's "
        f"{chain['tokens_per_s']:.1f} ({VERDICT[verdict]}: {why})."
    )
    if spread:
        text += f" Tree {runs_text(tree['tokens_per_s_runs'])}; chain {runs_text(chain['tokens_per_s_runs'])}."
    if tree.get("tokens_per_step") and chain.get("tokens_per_step"):
        emitted = tree["tokens_per_step"] / chain["tokens_per_step"]
        text += (
            f" Each pass emitted {tree['tokens_per_step']:.2f} tokens per sequence against {chain['tokens_per_step']:.2f} ({emitted:.2f}×)"
        )
        if tree.get("verify_ms") and chain.get("verify_ms"):
            longer = tree["verify_ms"] / chain["verify_ms"]
            text += (
                f", and its verify pass of {tree['tokens_per_pass']} tokens took {tree['verify_ms']:.1f} ms "
                f"against {chain['verify_ms']:.1f} ms for the chain's {chain['tokens_per_pass']} ({longer:.2f}×)"
            )
            if verdict and (emitted > longer) == (verdict > 0):
                text += ": the extra tokens outweighed the longer pass" if verdict > 0 else ": the longer pass outweighed the extra tokens"
            elif verdict:
                text += ": the verify pass alone does not account for it (drafting the tree takes time too)"
        text += "."
    return text, verdict


def width_conclusion(result: dict) -> list[str]:
    """Lesson 7's conclusion, from the measurement: the tree against the chain of the same depth at each batch
    size (a winner only beyond the spread), then what the large batch's passes carried."""
    shape = f"{result['nodes']} nodes, top-{result['topk']}, depth {result['depth']}"
    lines, verdicts = [], {}
    for batch in sorted({r["batch"] for r in result["rows"]}):
        tree, chain = cell(result["rows"], batch, "tree"), cell(result["rows"], batch, "chain")
        if not tree or not chain or not chain["tokens_per_s"]:
            continue
        line, verdicts[batch] = _batch_line(batch, tree, chain, shape)
        lines.append(line)
    if len(verdicts) == 2:
        (small, v_small), (large, v_large) = sorted(verdicts.items())
        word = {1: "paid", -1: "cost", 0: "made no clear difference"}
        text = f"Width {word[v_small]} at batch {small} and {word[v_large]} at batch {large}."
        plain, chain, tree = (cell(result["rows"], large, n) for n in ("plain decoding", "chain", "tree"))
        if plain and chain and tree:
            text += (
                f" At batch {large} a plain pass carried {plain['tokens_per_pass']} tokens, the chain's verify pass "
                f"{chain['tokens_per_pass']} and the tree's {tree['tokens_per_pass']}: what grew the pass was the "
                f"tree's own width ({result['nodes'] + 1} positions per row against {result['depth'] + 1})."
            )
            ridge = result.get("ridge_tokens")
            if ridge:
                side = {n: "below" if n < ridge else "at or above" for n in (plain["tokens_per_pass"], tree["tokens_per_pass"])}
                text += (
                    f" Against the ridge from the probed peaks (≈ {ridge:.0f} tokens per pass), the plain pass is "
                    f"{side[plain['tokens_per_pass']]} it and the tree's {side[tree['tokens_per_pass']]} it."
                )
            kept = (tree["tokens_per_step"] - 1) / result["nodes"] if tree.get("tokens_per_step") else None
            if kept is not None and 0 <= kept <= 1:
                text += f" {1 - kept:.0%} of the tree's nodes were rejected at batch {large}."
        lines.append(text)
    return lines
