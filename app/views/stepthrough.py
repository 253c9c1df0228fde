"""One recorded speculative step, stage by stage: draft, one verify pass, accept a prefix, the target's own
token (a correction or a bonus), KV-cache roll-back (Leviathan et al. 2023, Algorithm 1; engine/decode.py
`Decoder.step`, steps 1 to 4).

Input: a Trace (loaded with engine/trace.py's strict loader), a step index and a sequence index. Output:
plain text per stage, read only from what the trace recorded; the cache lengths follow from the engine's
rule in step 4 (the target caches every token but the pending last one). Token texts are model output,
so the page shows them as code, never as Markdown. No streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass

STAGES = ("1 · draft", "2 · verify in one pass", "3 · accept the longest prefix", "4 · correction or bonus",
          "5 · roll back the KV cache")  # fmt: skip


@dataclass(frozen=True)
class Stage:
    title: str
    lines: list[str]  # Markdown-free sentences (token texts are quoted with repr)
    table: list[dict]  # rows to show as a table (may be empty)


def speculative_steps(trace) -> list[int]:
    """Indices of the decode steps that drafted at least one token for some row."""
    return [i for i, s in enumerate(trace.steps) if s.kind == "decode" and any(q.drafted for q in s.seqs)]


def interesting_step(trace) -> int | None:
    """The first step with a rejection (so every stage has something to show), else the first speculative one."""
    steps = speculative_steps(trace)
    for i in steps:
        if any(q.num_rejected for q in trace.steps[i].seqs):
            return i
    return steps[0] if steps else None


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


def stages(trace, index: int, seq_pos: int = 0) -> list[Stage]:
    """The five stages of step `index` for the `seq_pos`-th row of that step."""
    step = trace.steps[index]
    q = step.seqs[seq_pos]
    k, a = len(q.drafted), q.num_accepted
    n = _tokens_before(trace, index, q.seq)
    greedy = float(trace.config.get("temperature", 0.0)) == 0.0
    drafter = trace.config.get("drafter", "")
    out = [Stage(STAGES[0], [
        f"Sequence {q.seq + 1} has {n} tokens so far, ending {_text_before(trace, index, q.seq)!r}.",
        f"The drafter ({drafter}) proposed k = {k} tokens in {step.draft_ms:.1f} ms for the {step.batch} row(s) of "
        f"the batch, each with its own probability q.",
    ], [{"position": i + 1, "draft token": repr(d.text), "draft q": f"{d.draft_prob:.3f}"} for i, d in enumerate(q.drafted)])]  # fmt: skip
    out.append(Stage(STAGES[1], [
        f"The target ran ONE forward pass over [last token, d1..d{k}] for every row: {step.tokens_per_pass} tokens "
        f"({step.batch} rows × (k + 1)), {step.verify_ms:.1f} ms, {step.target_flops / 1e9:.2f} GFLOP and "
        f"{step.target_bytes / 1e6:.0f} MB by the engine's counts.",
        "At each position it gives its own probability p of the drafted token, and of its own next token.",
    ], [{"position": i + 1, "draft token": repr(d.text), "draft q": f"{d.draft_prob:.3f}",
         "target p": f"{d.target_prob:.3f}"} for i, d in enumerate(q.drafted)]))  # fmt: skip
    rule = (
        "greedy: a draft token is kept while it equals the target's argmax at its position"
        if greedy
        else "sampling: token x is kept with probability min(1, p(x)/q(x)); the first rejection ends the prefix"
    )
    kept = "".join(d.text for d in q.drafted[:a])
    out.append(Stage(STAGES[2], [
        f"Rule ({rule}).",
        f"Accepted {a} of {k}: {kept!r}." if a else f"Accepted 0 of {k}: the first draft token was already rejected.",
    ], [{"position": i + 1, "draft token": repr(d.text), "kept": "yes" if d.accepted else "no"}
        for i, d in enumerate(q.drafted)]))  # fmt: skip
    if q.next_kind == "bonus":
        why = (f"All {k} drafts were accepted, so the pass's last position gives a bonus token: "
               f"{q.next_text!r} (target p {q.next_prob:.3f}).")  # fmt: skip
    else:
        how = "its argmax" if greedy else "a sample from norm(max(0, p − q))"
        why = (f"Position {a + 1} was rejected, so the target's own token there replaces it ({how}): "
               f"{q.next_text!r} (target p {q.next_prob:.3f}).")  # fmt: skip
    out.append(Stage(STAGES[3], [why, f"The step gained {len(q.emitted)} token(s) from one target pass."], []))
    held = n - 1 + k + 1
    out.append(Stage(STAGES[4], [
        f"After the pass the target's KV cache held {held} positions for this row (it caches every token but the "
        f"pending last one: {n - 1} before the pass, then k + 1 = {k + 1} new).",
        f"It keeps {n + a} (the {n - 1} before, the last token and the {a} accepted drafts) and drops the "
        f"{held - (n + a)} rejected position(s): RaggedCache.keep marks them as holes, no copy. The correction or "
        "bonus token is not cached yet; it is the next step's 'last token'.",
    ], []))  # fmt: skip
    return out
