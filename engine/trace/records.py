"""Step and Trace: what one decoding run did, step by step, and the summary the app and benches read.

A `Step` is one iteration of the decode loop for the whole (ragged) batch: one target forward pass,
the draft forwards that fed it, and per sequence what was drafted, accepted, rejected and emitted.
A `Trace` is the run: its config, the sequences, the steps and `summary` (field names fixed by
docs/design.md §4). Traces are saved as versioned JSON ("speclab.trace/1"; "speclab.trace/2" adds each row's draft tree, written only by
tree-drafting runs, so chain traces stay readable by older SpecLabs); anything else is refused
with a clear `TraceError` — traces are data, never executed or unpickled.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from engine.trace.rates import decode_rate

SCHEMA = "speclab.trace/1"  # chain runs: what every SpecLab reads
SCHEMA_TREE = "speclab.trace/2"  # /1 plus an optional `tree` per sequence-step (tree drafting)
SCHEMAS = (SCHEMA, SCHEMA_TREE)


class TraceError(ValueError):
    """A trace file that is missing, malformed or of an unknown schema."""


@dataclass
class DraftToken:
    id: int
    text: str
    draft_prob: float  # q(x): the drafter's probability of the token it proposed (1.0 for n-gram)
    target_prob: float  # p(x): the target's probability of the same token at the same position
    accepted: bool

    @property
    def accept_prob(self) -> float:
        """min(1, p/q): the chance that sampling-mode verification keeps this token."""
        return 1.0 if self.draft_prob <= 0 else min(1.0, self.target_prob / self.draft_prob)


@dataclass
class TreeRecord:
    """One row's draft tree in one step (engine/decoding/verify_tree.py): nodes in depth order, a parent before its children."""

    parents: list[int]  # each node's parent node index; -1: the root (the row's last token)
    ids: list[int]  # each node's token
    texts: list[str]
    q: list[float]  # the drafter's probability of the node's token after its parent
    p: list[float]  # the target's probability of the same token after the same path
    accepted: list[bool]  # on the accepted path

    @property
    def depths(self) -> list[int]:
        depths: list[int] = []
        for parent in self.parents:
            depths.append(1 if parent < 0 else depths[parent] + 1)
        return depths

    @property
    def depth(self) -> int:
        return max(self.depths, default=0)

    def path(self) -> list[int]:
        """Node indices of the accepted path, root first."""
        return [i for i, a in enumerate(self.accepted) if a]

    def children(self, node: int) -> list[int]:
        """Node indices whose parent is `node` (-1: the root), best first."""
        return [i for i, parent in enumerate(self.parents) if parent == node]

    def shown(self) -> list[int]:
        """The chain the step's `drafted` list shows: the accepted path, then the best rejected child of its
        end (none when the path ends at a leaf: the target's token is then a bonus)."""
        path = self.path()
        rejected = self.children(path[-1] if path else -1)
        return path + rejected[:1]


@dataclass
class SeqStep:
    seq: int  # index of the sequence in the prompt list
    drafted: list[DraftToken]
    num_accepted: int
    next_id: int  # the target's own token: a correction after a rejection, a bonus after full acceptance
    next_text: str
    next_prob: float
    next_kind: str  # "correction" | "bonus" | "plain" (no draft this step)
    emitted: list[int]  # ids appended to the sequence this step (truncated at EOS / max_new_tokens)
    finished: bool
    tree: TreeRecord | None = None  # tree drafting: the whole tree (`drafted` then shows its path, see TreeRecord)

    @property
    def num_rejected(self) -> int:
        return len(self.drafted) - self.num_accepted


@dataclass
class Step:
    index: int
    kind: str  # "prefill" | "decode"
    depth: int  # k used this step (0 for plain steps)
    batch: int  # sequences in the pass
    tokens_per_pass: int  # tokens the target processed in its one forward: batch * (depth + 1), a tree: batch * (nodes + 1)
    t_start_s: float  # seconds since the run started
    t_end_s: float
    draft_ms: float
    verify_ms: float
    overhead_ms: float  # engine work outside model forwards (acceptance, cache rollback, bookkeeping)
    target_flops: float
    draft_flops: float
    target_bytes: float
    draft_bytes: float
    flops_wasted: float  # spent on rejected draft tokens, in both models
    util_pct: float | None = None  # coarse gauge: NVML GPU utilisation or psutil CPU utilisation
    policy_ms: float = 0.0  # time the depth policy took to choose k (and to learn from the previous step)
    seqs: list[SeqStep] = field(default_factory=list)
    sm_clock_mhz: float | None = None  # NVML SM clock during the step (time-sampled; GPU only)
    power_w: float | None = None  # NVML board power during the step (time-sampled; GPU only)
    # Tree drafting: the nodes each row verified this step (the whole tree, or the goodput policy's cut of it,
    # engine/decoding/policies.py); None for a chain or a plain step. Written only when set ("speclab.trace/2").
    tree_nodes: int | None = None

    @property
    def step_ms(self) -> float:
        return (self.t_end_s - self.t_start_s) * 1000.0

    @property
    def flops(self) -> float:
        return self.target_flops + self.draft_flops

    @property
    def bytes(self) -> float:
        return self.target_bytes + self.draft_bytes


# Optional fields written only where they have a value: the GPU samples (NVML; CPU traces stay as they were)
# and a tree step's node count (chain traces stay "speclab.trace/1" as they were).
_ONLY_WHEN_SET = ("sm_clock_mhz", "power_w", "tree_nodes")


def _step_dict(step: Step) -> dict:
    d = asdict(step)
    for key in _ONLY_WHEN_SET:
        if d[key] is None:
            del d[key]
    return d


@dataclass
class AcceptanceCounts:
    """Raw acceptance counts over decode steps (counts add up across runs; ratios do not)."""

    drafted: int = 0  # draft tokens proposed
    accepted: int = 0  # draft tokens accepted
    rejections: int = 0  # sequence-steps that ended in a rejection
    seq_steps: int = 0  # sequence-steps that drafted anything
    pos_hits: list[int] = field(default_factory=list)  # per draft position: accepted
    pos_tries: list[int] = field(default_factory=list)  # per draft position: drafted


def acceptance_counts(steps: list[Step]) -> AcceptanceCounts:
    c = AcceptanceCounts()
    for step in steps:
        if step.kind != "decode":
            continue
        for seq in step.seqs:
            if not seq.drafted:
                continue
            c.seq_steps += 1
            c.accepted += seq.num_accepted
            c.rejections += 1 if seq.num_accepted < len(seq.drafted) else 0
            if seq.tree is not None:  # every node was drafted; position i counts the path reaching depth i + 1
                c.drafted += len(seq.tree.ids)
                hits = [i < seq.num_accepted for i in range(seq.tree.depth)]
            else:
                c.drafted += len(seq.drafted)
                hits = [tok.accepted for tok in seq.drafted]
            for i, hit in enumerate(hits):
                while len(c.pos_tries) <= i:
                    c.pos_tries.append(0)
                    c.pos_hits.append(0)
                c.pos_tries[i] += 1
                c.pos_hits[i] += 1 if hit else 0
    return c


def decode_timing(steps: list[Step], wall_s: float) -> dict:
    """The prompt's pass apart from decoding. ttft_s: time to first token (the prefill step's end: every row's first
    token comes from it); decode_tokens_per_s: tokens written by decode steps / the time after the prefill;
    tpot_ms: time per output token of a request, the mean over rows of (time from the first token to the row's last
    token) / (tokens it wrote in decode steps), so at batch 1 tpot_ms × decode_tokens_per_s = 1000. None where the
    run has no prefill step or wrote nothing after it (a run of one token per row)."""
    prefill = next((s for s in steps if s.kind == "prefill"), None)
    if prefill is None:
        return {"ttft_s": None, "decode_tokens_per_s": None, "tpot_ms": None}
    ttft = prefill.t_end_s
    done, written = {}, {}
    for step in steps:
        if step.kind != "decode":
            continue
        for row in step.seqs:
            if row.emitted:
                done[row.seq] = step.t_end_s - ttft
                written[row.seq] = written.get(row.seq, 0) + len(row.emitted)
    decode_s, tokens = wall_s - ttft, sum(written.values())
    rates = [done[q] / written[q] * 1000.0 for q in done if done[q] > 0]
    return {
        "ttft_s": ttft,
        "decode_tokens_per_s": decode_rate(tokens, decode_s),
        "tpot_ms": sum(rates) / len(rates) if rates else None,
    }


def summarize(steps: list[Step], new_tokens: int, wall_s: float, device: str, dtype: str, speculative: bool) -> dict:
    """The run summary; field names are the contract of docs/design.md §4."""
    c = acceptance_counts(steps)
    drafted, accepted, rejections, seq_steps = c.drafted, c.accepted, c.rejections, c.seq_steps
    pos_hits, pos_tries = c.pos_hits, c.pos_tries
    has_drafts = speculative and drafted > 0
    summary = {
        "new_tokens": new_tokens,
        "wall_s": wall_s,
        "tokens_per_s": new_tokens / wall_s if wall_s > 0 else 0.0,
        **decode_timing(steps, wall_s),
        "target_forwards": len(steps),
        "device": device,
        "dtype": dtype,
        "acceptance_rate": accepted / drafted if has_drafts else None,
        "alpha": accepted / (accepted + rejections) if has_drafts and accepted + rejections > 0 else None,
        "mean_accepted": accepted / seq_steps if has_drafts else None,
        "tokens_per_step": accepted / seq_steps + 1 if has_drafts else None,
        "per_position_acceptance": [h / t for h, t in zip(pos_hits, pos_tries)] if has_drafts else None,
        "drafted_tokens": drafted,
        "accepted_tokens": accepted,
        "flops": sum(s.flops for s in steps),
        "flops_wasted": sum(s.flops_wasted for s in steps),
        "bytes": sum(s.bytes for s in steps),
        "draft_ms": sum(s.draft_ms for s in steps),
        "verify_ms": sum(s.verify_ms for s in steps),
        "overhead_ms": sum(s.overhead_ms for s in steps),
    }
    for key, value in summary.items():
        if isinstance(value, float) and not math.isfinite(value):
            summary[key] = None
    return summary
