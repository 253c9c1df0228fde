"""Depth policies: how many tokens to speculate this step.

A policy sees the live load (active batch size) and the run so far, and returns k for the next step.
`fixed` always speculates `depth`; `off_above_batch` is vLLM's `disable_by_batch_size`: speculation
switches off while more than N sequences are in flight, because then the target's pass is already
full of real tokens and draft tokens only push it past the ridge point into compute-bound territory.
Later policies (batch schedules, acceptance-driven, goodput) implement the same small interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .config import DecodeConfig, PolicyKind


@dataclass(frozen=True)
class PolicyContext:
    step: int  # decode step index (1 = first step after prefill)
    batch: int  # sequences still decoding
    base_depth: int  # the user's depth setting
    mean_accepted: float | None  # accepted draft tokens per sequence-step so far (None before any)


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
    """vLLM `--speculative-disable-by-batch-size N`: no speculation while batch > N."""

    threshold: int
    name = "off_above_batch"

    def depth(self, ctx: PolicyContext) -> int:
        return ctx.base_depth if ctx.batch <= self.threshold else 0


def make_policy(cfg: DecodeConfig) -> DepthPolicy:
    if cfg.policy == PolicyKind.OFF_ABOVE_BATCH.value:
        return OffAboveBatch(cfg.disable_by_batch_size)
    return FixedDepth()
