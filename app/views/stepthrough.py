"""One recorded speculative step, stage by stage: draft, one verify pass, accept a prefix, the target's own
token (a correction or a bonus), KV-cache roll-back (Leviathan et al. 2023, Algorithm 1; engine/decoding/decode.py
`Decoder.step`, steps 1 to 4).

Input: a Trace (loaded with engine/trace/'s strict loader), a step index and a sequence index. Output:
plain text per stage, read only from what the trace recorded; the cache lengths follow from the engine's
rule in step 4 (the target caches every token but the pending last one). Token texts are model output,
so the page shows them as code, never as Markdown. No streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass

STAGES = ("1 · draft", "2 · verify in one pass", "3 · accept the longest prefix", "4 · correction or bonus", "5 · roll back the KV cache")
TREE_STAGES = (
    "1 · draft a tree",
    "2 · verify the whole tree in one pass",
    "3 · accept the longest matching path",
    "4 · correction or bonus",
    "5 · roll back to the path",
)


@dataclass(frozen=True)
class Stage:
    title: str
    lines: list[str]  # Markdown-free sentences (token texts are quoted with repr)
    table: list[dict]  # rows to show as a table (may be empty)


def speculative_steps(trace) -> list[int]:
    """Indices of the decode steps that drafted at least one token for some row."""
    return [i for i, s in enumerate(trace.steps) if s.kind == "decode" and any(q.drafted for q in s.seqs)]


def interesting_step(trace) -> int | None:
    """The first step that accepts some drafts and rejects one (so every stage has something to show), else the
    first with a rejection, else the first speculative one."""
    steps = speculative_steps(trace)
    for i in steps:  # a tree step: one whose accepted path is at least 2 deep as well, so the walk shows
        if any(q.tree is not None and q.num_accepted >= 2 and q.num_rejected for q in trace.steps[i].seqs):
            return i
    for i in steps:
        if any(q.tree is None and q.num_accepted and q.num_rejected for q in trace.steps[i].seqs):
            return i
    for i in steps:
        if any(q.num_rejected for q in trace.steps[i].seqs):
            return i
    return steps[0] if steps else None


def step_measurement(trace, index: int, plain=None) -> dict:
    """Lesson 0's measurement (app/common/measurement.py "one_step") of step `index`, row 0: k, how many drafts
    were kept, the tokens gained and the step's timings, with the cost of one plain step to set it against: the
    median step of `plain` (plain decoding of the same prompt) when given, else of the run's own steps that
    drafted nothing (None when there are none)."""
    step = trace.steps[index]
    q = step.seqs[0]
    if plain is not None:
        plain_ms = [s.step_ms for s in plain.steps if s.kind == "decode"]
        source = f"plain decoding of the same prompt, median of {len(plain_ms)} steps"
    else:
        plain_ms = [s.step_ms for s in trace.steps if s.kind == "decode" and s.depth == 0]
        source = f"the same run's steps that drafted nothing (median of {len(plain_ms)})"
    plain_ms.sort()
    out = {
        "step": index,
        "k": len(q.drafted),
        "accepted": q.num_accepted,
        "gained": len(q.emitted),
        "next_kind": q.next_kind,
        "draft_ms": step.draft_ms,
        "verify_ms": step.verify_ms,
        "step_ms": max(step.step_ms, step.draft_ms + step.verify_ms),  # a step never costs less than its own parts
        "tokens_per_pass": step.tokens_per_pass,
        "alpha": trace.summary.get("alpha"),
        "plain_step_ms": plain_ms[len(plain_ms) // 2] if plain_ms else None,
        "plain_source": source if plain_ms else "no plain step was measured",
    }
    if plain is not None:
        out["same_text"] = [s["text"] for s in plain.sequences] == [s["text"] for s in trace.sequences]
    return out


def _tokens_before(trace, index: int, seq: int) -> int:
    """Prompt tokens + tokens the sequence had gained before step `index`."""
    gained = sum(len(q.emitted) for s in trace.steps[:index] for q in s.seqs if q.seq == seq)
    return int(trace.sequences[seq]["prompt_tokens"]) + gained


def _text_before(trace, index: int, seq: int, tail: int = 160) -> str:
    """The last `tail` characters the sequence had produced before step `index` (from the recorded token texts)."""
    parts = []
    for s in trace.steps[:index]:
        for q in s.seqs:
            if q.seq == seq:
                parts += [d.text for d in q.drafted[: q.num_accepted]] + [q.next_text]
    text = "".join(parts)
    return ("…" if len(text) > tail else "") + text[-tail:]


def _own_token(title: str, q, bonus: bool, if_bonus: str, if_correction: str) -> Stage:
    """Stage 4: the target's own token after the accepted drafts, a bonus or a correction."""
    why = f"{if_bonus if bonus else if_correction}: {q.next_text!r} (target p {q.next_prob:.3f})."
    return Stage(title, [why, f"The step gained {len(q.emitted)} token(s) from one target pass."], [])


def stages(trace, index: int, seq_pos: int = 0) -> list[Stage]:
    """The five stages of step `index` for the `seq_pos`-th row of that step (a tree step's own five when the
    row drafted a tree)."""
    step = trace.steps[index]
    q = step.seqs[seq_pos]
    if q.tree is not None:
        return tree_stages(trace, index, seq_pos)
    k, a = len(q.drafted), q.num_accepted
    n = _tokens_before(trace, index, q.seq)
    greedy = float(trace.config.get("temperature", 0.0)) == 0.0
    drafter = trace.config.get("drafter", "")
    out = [
        Stage(
            STAGES[0],
            [
                f"Sequence {q.seq + 1} has {n} tokens so far, ending {_text_before(trace, index, q.seq)!r}.",
                f"The drafter ({drafter}) proposed k = {k} tokens in {step.draft_ms:.1f} ms for the {step.batch} row(s) of "
                f"the batch, each with its own probability q.",
            ],
            [{"position": i + 1, "draft token": repr(d.text), "draft q": f"{d.draft_prob:.3f}"} for i, d in enumerate(q.drafted)],
        )
    ]
    out.append(
        Stage(
            STAGES[1],
            [
                f"The target ran ONE forward pass over [last token, d1..d{k}] for every row: {step.tokens_per_pass} tokens "
                f"({step.batch} rows × (k + 1)), {step.verify_ms:.1f} ms, {step.target_flops / 1e9:.2f} GFLOP and "
                f"{step.target_bytes / 1e6:.0f} MB by the engine's counts.",
                "At each position it gives its own probability p of the drafted token, and of its own next token.",
            ],
            [
                {"position": i + 1, "draft token": repr(d.text), "draft q": f"{d.draft_prob:.3f}", "target p": f"{d.target_prob:.3f}"}
                for i, d in enumerate(q.drafted)
            ],
        )
    )
    rule = (
        "greedy: a draft token is kept while it equals the target's argmax at its position"
        if greedy
        else "sampling: token x is kept with probability min(1, p(x)/q(x)); the first rejection ends the prefix"
    )
    kept = "".join(d.text for d in q.drafted[:a])
    out.append(
        Stage(
            STAGES[2],
            [
                f"Rule ({rule}).",
                f"Accepted {a} of {k}: {kept!r}." if a else f"Accepted 0 of {k}: the first draft token was already rejected.",
            ],
            [{"position": i + 1, "draft token": repr(d.text), "kept": "yes" if d.accepted else "no"} for i, d in enumerate(q.drafted)],
        )
    )
    how = "its argmax" if greedy else "a sample from norm(max(0, p − q))"
    out.append(
        _own_token(
            STAGES[3],
            q,
            q.next_kind == "bonus",
            f"All {k} drafts were accepted, so the pass's last position gives a bonus token",
            f"Position {a + 1} was rejected, so the target's own token there replaces it ({how})",
        )
    )
    held = n - 1 + k + 1
    out.append(
        Stage(
            STAGES[4],
            [
                f"After the pass the target's KV cache held {held} positions for this row (it caches every token but the "
                f"pending last one: {n - 1} before the pass, then k + 1 = {k + 1} new).",
                f"It keeps {n + a} (the {n - 1} before, the last token and the {a} accepted drafts) and drops the "
                f"{held - (n + a)} rejected position(s): RaggedCache.keep marks them as holes, no copy. The correction or "
                "bonus token is not cached yet; it is the next step's 'last token'.",
            ],
            [],
        )
    )
    return out


def tree_stages(trace, index: int, seq_pos: int = 0) -> list[Stage]:
    """The five stages of a draft-tree step (EAGLE-2 drafting, tree verification; engine/decoding/verify_tree.py), read from the
    row's recorded tree: nodes, parents, q, p and the accepted path."""
    step = trace.steps[index]
    q = step.seqs[seq_pos]
    tree = q.tree
    nodes, a, depths, path = len(tree.ids), q.num_accepted, tree.depths, tree.path()
    n = _tokens_before(trace, index, q.seq)
    greedy = float(trace.config.get("temperature", 0.0)) == 0.0

    def label(i: int) -> str:
        return "root (last token)" if i < 0 else f"node {i + 1}"

    rows = [
        {"node": i + 1, "parent": label(tree.parents[i]), "depth": depths[i], "token": repr(tree.texts[i]), "draft q": f"{tree.q[i]:.3f}"}
        for i in range(nodes)
    ]
    out = _tree_draft_and_verify(trace, index, q, n, rows)
    rule = (
        "greedy: walk down from the root, each time to the child whose token is the target's argmax after its "
        "parent; stop where no child matches"
        if greedy
        else "sampling: recursive rejection sampling over a node's children (each tried with probability p' of its "
        "token; a rejected sibling leaves p', the rest renormalised), which keeps the target's distribution"
    )
    kept = "".join(tree.texts[i] for i in path)
    out.append(
        Stage(
            TREE_STAGES[2],
            [
                f"Rule ({rule}).",
                (
                    f"Accepted a path of {a} of the {nodes} nodes: {kept!r}; the other {nodes - a} were verified and thrown away."
                    if a
                    else f"Accepted 0 of {nodes}: no child of the root matched."
                ),
            ],
            [
                {"node": i + 1, "depth": depths[i], "token": repr(tree.texts[i]), "on the path": "yes" if tree.accepted[i] else "no"}
                for i in range(nodes)
            ],
        )
    )
    leaf = path[-1] if path else -1
    has_children = any(p == leaf for p in tree.parents)
    how = "its argmax" if greedy else "a sample from what is left of p after the rejected children"
    out.append(
        _own_token(
            TREE_STAGES[3],
            q,
            q.next_kind == "bonus" or not has_children,
            f"The path ends at a leaf ({label(leaf)}), so the pass's column there gives a bonus token",
            f"None of {label(leaf)}'s children matched, so the target's own token there continues the text ({how})",
        )
    )
    held = n - 1 + nodes + 1
    out.append(
        Stage(
            TREE_STAGES[4],
            [
                f"After the pass the target's KV cache held {held} positions for this row ({n - 1} before the pass, then "
                f"the last token and all {nodes} nodes).",
                f"It keeps {n + a}: the {n - 1} before, the last token and the {a} node(s) on the accepted path. "
                "RaggedCache.keep_path copies the path's keys and values next to the cache (only the slots not already in "
                f"place) and drops the other {held - (n + a)}. The correction or bonus token is the next step's 'last token'.",
            ],
            [],
        )
    )
    return out


def _tree_draft_and_verify(trace, index: int, q, n: int, rows: list[dict]) -> list[Stage]:
    """Stages 1 and 2 of a draft-tree step: the tree grown by the drafter, then the one pass over all its nodes."""
    step, tree, cfg = trace.steps[index], q.tree, trace.config
    nodes, depths, topk = len(tree.ids), tree.depths, cfg.get("tree_topk")
    out = [
        Stage(
            TREE_STAGES[0],
            [
                f"Sequence {q.seq + 1} has {n} tokens so far, ending {_text_before(trace, index, q.seq)!r}.",
                f"The drafter ({cfg.get('drafter', '')}) grew a tree level by level in {step.draft_ms:.1f} ms: at each level "
                f"the top-{topk} children of the {topk} best nodes so far, then the {nodes} nodes of highest joint confidence "
                f"(the product of q along the path), {max(depths, default=0)} levels deep (EAGLE-2).",
                "A chain would have proposed one continuation; the tree proposes several at once, branching where the drafter is unsure.",
            ],
            rows,
        )
    ]
    out.append(
        Stage(
            TREE_STAGES[1],
            [
                f"The target ran ONE forward pass over [last token, node 1..node {nodes}]: {step.tokens_per_pass} tokens, "
                f"{step.verify_ms:.1f} ms, {step.target_flops / 1e9:.2f} GFLOP and {step.target_bytes / 1e6:.0f} MB by the "
                "engine's counts.",
                "A tree attention mask lets each node see the context and its own ancestors only, at the position of its "
                "depth, so every node's p is the target's probability after its own path, as if that path had been "
                "decoded alone.",
            ],
            [r | {"target p": f"{tree.p[i]:.3f}"} for i, r in enumerate(rows)],
        )
    )
    return out
