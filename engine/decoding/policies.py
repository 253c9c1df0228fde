"""Depth policies: how many tokens to speculate this step.

A policy sees the live load (active batch size) and the run so far, and returns k for the next step.
`fixed` always speculates `depth`; `off_above_batch` is the classic load rule: speculation switches off
while more than N sequences are in flight, because then the target's pass is already full of real
tokens and draft tokens only push it past the ridge point into compute-bound territory. It is what
vLLM's V0 engine offered as `--speculative-disable-by-batch-size` (a no-op since v0.10, since removed:
https://github.com/vllm-project/vllm/pull/35060); today's engines set draft length per batch-size range
instead (vLLM `num_speculative_tokens_per_batch_size`, TensorRT-LLM `draft_len_schedule`).
`heuristic` adapts depth to acceptance, as transformers' assisted generation does ("heuristic"
schedule): +2 after a step whose drafts were all accepted, -1 (not below 1) after a rejection, so a
weak draft is asked for fewer tokens and a good one for more. It keeps `off_above_batch`'s point in
mind too: it never speculates while the batch is above `disable_by_batch_size`.

The load-aware policies price the next step before choosing k:
`batch_table` is vLLM's `num_speculative_tokens_per_batch_size` (and TensorRT-LLM's `draft_len_schedule`):
a table of batch ranges -> k, k = 0 switching speculation off. Given explicitly, or derived from this
machine's measured pass-cost curve (engine/decoding/passcurve.py) with a prior acceptance.
`goodput` (engine/decoding/goodput.py) chooses, at every step, plain, a chain of k or a tree of n nodes, whichever
maximises expected emitted tokens per second from the measured pass cost and the run's own acceptance.

Every policy sees a `PolicyContext` before each step (`depth`; `tree_now`), a drafted tree (`tree_size`: the
static ones verify it whole) and the finished `Step` after it (`observe`: a no-op for the static ones)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from engine.config import DecodeConfig
from engine.decoding import warmstart
from engine.decoding.goodput import PRIOR_ACCEPTANCE, GoodputDepth, best_depth
from engine.drafters import DRAFTERS
from engine.drafters.calibration import shipped_acceptance
from engine.options import MAX_DEPTH, PolicyKind


@dataclass(frozen=True)
class PolicyContext:
    step: int  # decode step index (1 = first step after prefill)
    batch: int  # sequences still decoding
    base_depth: int  # the user's depth setting
    mean_accepted: float | None  # accepted draft tokens per sequence-step so far (None before any)
    last_depth: int = 0  # depth drafted at the previous step (0: none)
    last_all_accepted: bool = False  # every row accepted every draft at the previous step
    context: int = 0  # tokens in each row's KV cache, the mean over the rows in flight (goodput prices its read)
    rows: tuple[int, ...] = ()  # the rows in flight, by their index in the prompt list (goodput: the binding row)
    remaining: tuple[int, ...] = ()  # each of those rows' new tokens still allowed (max_new_tokens less those emitted)


class DepthPolicy(Protocol):
    name: str
    stop_below: float  # a joint draft confidence below which rows stop drafting this step (0: none)
    tree_now: bool  # in a tree-drafting run: this step drafts a tree (False: a chain of `depth`)

    def depth(self, ctx: PolicyContext) -> int: ...

    def tree_size(self, tree) -> tuple: ...  # (n, score): verify a drafted tree's n best nodes by score (DraftTree.best)

    def observe(self, step) -> None: ...  # the Step just taken (engine/trace/)


class _Static:
    """Policies that learn nothing from the steps they see (and verify a drafted tree whole)."""

    stop_below = 0.0
    tree_now = True

    def tree_size(self, tree) -> tuple:
        return tree.nodes, None

    def observe(self, step) -> None:
        pass


@dataclass(frozen=True)
class FixedDepth(_Static):
    name = "fixed"

    def depth(self, ctx: PolicyContext) -> int:
        return ctx.base_depth


@dataclass(frozen=True)
class OffAboveBatch(_Static):
    """The classic rule (vLLM V0's `--speculative-disable-by-batch-size N`): no speculation while batch > N."""

    threshold: int
    name = "off_above_batch"

    def depth(self, ctx: PolicyContext) -> int:
        return ctx.base_depth if ctx.batch <= self.threshold else 0


@dataclass
class HeuristicDepth(_Static):
    """Acceptance-driven depth (transformers' `num_assistant_tokens_schedule="heuristic"`), batch-aware.

    State lives in the object, and `make_policy` builds a fresh one for every run."""

    threshold: int
    current: int | None = None
    name = "heuristic"

    def depth(self, ctx: PolicyContext) -> int:
        if ctx.base_depth == 0 or ctx.batch > self.threshold:
            return 0
        if self.current is None:
            self.current = ctx.base_depth
        elif ctx.last_depth > 0:
            self.current = min(self.current + 2, MAX_DEPTH) if ctx.last_all_accepted else max(1, self.current - 1)
        return self.current


@dataclass(frozen=True)
class BatchTable(_Static):
    """vLLM's `num_speculative_tokens_per_batch_size`: rows (min_batch, max_batch, k); a batch no row
    covers speculates the user's `depth`. k is capped at `depth` (the user's maximum)."""

    table: tuple[tuple[int, int, int], ...]
    name = "batch_table"

    def depth(self, ctx: PolicyContext) -> int:
        for low, high, k in self.table:
            if low <= ctx.batch <= high:
                return min(k, ctx.base_depth)
        return ctx.base_depth


# Batch ranges of a derived table: each gets the k that is best at its geometric middle.
TABLE_RANGES = ((1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 32), (33, 64), (65, 128), (129, 256), (257, 1 << 20))


def derived_batch_table(
    curve, max_depth: int, draft_cost_ratio: float, accept: float = PRIOR_ACCEPTANCE
) -> tuple[tuple[int, int, int], ...]:
    """A batch table from this machine's measured pass-cost curve: for each range of TABLE_RANGES the k that
    maximises expected tokens per second with a constant acceptance `accept` and a drafter costing
    `draft_cost_ratio` x a batch-B target pass per draft position (c in Leviathan et al.)."""
    rows = []
    for low, high in TABLE_RANGES:
        batch = max(1, round((low * min(high, 4 * low)) ** 0.5))
        k, _ = best_depth(batch, max_depth, [accept] * max_depth, curve.time_ms, draft_cost_ratio * curve.time_ms(batch))
        rows.append((low, high, k))
    return tuple(rows)


def draft_cost_ratio(pair, drafter_kind: str, context: int) -> float:
    """FLOPs of one draft position / FLOPs of one target token at `context` (c's prior; 0 for a lookup)."""
    loaded = pair.loaded.get(DRAFTERS[drafter_kind].loads)
    return loaded.costs.token_flops(context) / pair.target_costs.token_flops(context) if loaded is not None else 0.0


def derived_table_for(pair, cfg: DecodeConfig) -> tuple[tuple[int, int, int], ...]:
    """The batch table policy "batch_table" derives for `pair` and `cfg` when none is given."""
    from engine.decoding.passcurve import pass_curve

    curve = pass_curve(pair)
    return derived_batch_table(curve, cfg.depth, draft_cost_ratio(pair, cfg.drafter, curve.context))


def goodput_policy(pair, cfg: DecodeConfig, batch: int = 1, context: int = 0, remember: bool = True) -> GoodputDepth:
    """Goodput for a run of `batch` rows over prompts of up to `context` tokens: this machine's pass-cost curve, the
    drafter's cost prior and card, the KV read priced past the short bucket (engine/decoding/context_curves.py), and,
    with `remember`, what the last run of the same (batch, context) bucket learnt (engine/decoding/warmstart.py)."""
    from engine.decoding.context_curves import kv_ms_per_token, kv_per_query
    from engine.decoding.passcurve import pass_curve

    curve = pass_curve(pair)
    ratio = draft_cost_ratio(pair, cfg.drafter, curve.context)
    key = warmstart.policy_key(pair, cfg, curve, batch, context) if remember else None  # starts where the last such run stopped
    prior = shipped_acceptance(pair, cfg.drafter)  # else from the drafter's card (its held-out acceptance)
    long = warmstart.context_bucket(context) > 0  # the short bucket: the curve alone
    kv = dict(kv_ms_per_token=kv_ms_per_token(pair), kv_per_query=kv_per_query(pair)) if long else {}
    shape = dict(tree_nodes=cfg.tree_nodes, tree_topk=cfg.tree_topk)
    return GoodputDepth(curve, cfg.depth, ratio, prior=prior, memory_key=key, task=cfg.task, **kv, **shape)


def make_policy(cfg: DecodeConfig, pair=None, drafter=None, batch: int = 1, context: int = 0) -> DepthPolicy:
    """The policy `cfg` names. The load-aware ones need the pair (for its measured pass-cost curve) and the
    drafter (for the prior of its cost per draft position); goodput's warm start is kept per `batch` bucket and
    `context` bucket (the longest prompt's tokens: engine/decoding/warmstart.py)."""
    if cfg.policy in (PolicyKind.BATCH_TABLE.value, PolicyKind.GOODPUT.value):
        if cfg.policy == PolicyKind.BATCH_TABLE.value and cfg.batch_table is not None:
            return BatchTable(cfg.batch_table)
        if pair is None or drafter is None or not cfg.speculative:
            return FixedDepth()  # plain decoding: nothing to choose
        if cfg.policy == PolicyKind.BATCH_TABLE.value:
            return BatchTable(derived_table_for(pair, cfg))
        return goodput_policy(pair, cfg, batch, context)
    if cfg.policy == PolicyKind.OFF_ABOVE_BATCH.value:
        return OffAboveBatch(cfg.disable_by_batch_size)
    if cfg.policy == PolicyKind.HEURISTIC.value:
        return HeuristicDepth(cfg.disable_by_batch_size)
    return FixedDepth()
