"""Depth policies: how many tokens to speculate this step.

A policy sees the live load (active batch size) and the run so far, and returns k for the next step.
`fixed` always speculates `depth`; `off_above_batch` is the classic load rule: speculation switches off
while more than N sequences are in flight, because then the target's pass is already full of real
tokens and draft tokens only push it past the ridge point into compute-bound territory. It is what
vLLM's V0 engine offered as `--speculative-disable-by-batch-size` (a no-op since v0.10, removed in
February 2026, vllm-project/vllm PR #35060); today's engines set draft length per batch-size range
instead (vLLM `num_speculative_tokens_per_batch_size`, TensorRT-LLM `draft_len_schedule`).
`heuristic` adapts depth to acceptance, as transformers' assisted generation does ("heuristic"
schedule): +2 after a step whose drafts were all accepted, -1 (not below 1) after a rejection, so a
weak draft is asked for fewer tokens and a good one for more. It keeps `off_above_batch`'s point in
mind too: it never speculates while the batch is above `disable_by_batch_size`.
Later policies (batch schedules, confidence, goodput) implement the same small interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .config import MAX_DEPTH, DecodeConfig, PolicyKind


@dataclass(frozen=True)
class PolicyContext:
    step: int  # decode step index (1 = first step after prefill)
    batch: int  # sequences still decoding
    base_depth: int  # the user's depth setting
    mean_accepted: float | None  # accepted draft tokens per sequence-step so far (None before any)
    last_depth: int = 0  # depth drafted at the previous step (0: none)
    last_all_accepted: bool = False  # every row accepted every draft at the previous step


class DepthPolicy(Protocol):
    name: str

    def depth(self, ctx: PolicyContext) -> int: ...


@dataclass(frozen=True)
class FixedDepth:
    name = "fixed"

    def depth(self, ctx: PolicyContext) -> int:
        return ctx.base_depth


@dataclass(frozen=True)
class OffAboveBatch:
    """The classic rule (vLLM V0's `--speculative-disable-by-batch-size N`): no speculation while batch > N."""

    threshold: int
    name = "off_above_batch"

    def depth(self, ctx: PolicyContext) -> int:
        return ctx.base_depth if ctx.batch <= self.threshold else 0


@dataclass
class HeuristicDepth:
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


def make_policy(cfg: DecodeConfig) -> DepthPolicy:
    if cfg.policy == PolicyKind.OFF_ABOVE_BATCH.value:
        return OffAboveBatch(cfg.disable_by_batch_size)
    if cfg.policy == PolicyKind.HEURISTIC.value:
        return HeuristicDepth(cfg.disable_by_batch_size)
    return FixedDepth()
