"""What a draft is worth before the target sees it: expected tokens from the drafter's joint confidence,
calibrated by this run's measured acceptance. The goodput policy (engine/decoding/policies.py) prices draft
trees with it.

A node's joint confidence c is the product of the drafter's q along the path root -> node (EAGLE-2's
reranking score, `DraftTree.joint`). In one step a row emits 1 + (accepted path length) tokens, and the
accepted path length is the number of nodes whose whole path is accepted, so

    E[tokens](tree) = 1 + sum over the tree's nodes of P(the node's whole path is accepted).

P is estimated from c with a calibration learned from every verified draft of the run, chains and trees
alike: joint confidences are cut into buckets by powers of two ((1/2, 1], (1/4, 1/2], ... , the last
bucket everything below), and each bucket keeps an exponential moving average, over steps, of the nodes
accepted and of the confidence they had; P(c) = min(1, c x accepted / confidence) of c's bucket, which
is the identity (the drafter's own c) until the bucket has seen a verified node.

What it assumes: that a node's chance of acceptance depends on its context only through c (the same map
for a chain's drafts and a tree's, for a top-1 child and a runner-up sibling, at any depth); that the map
moves slowly (one EMA step per decode step); and, before a step is drafted, that the next tree will look
like the recent ones (the policy keeps an EMA of the calibrated tree curve to choose between shapes; once
the tree is drafted it is cut with that tree's own confidences).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

CONFIDENCE_BUCKETS = 8  # (1/2, 1], (1/4, 1/2], ..., (0, 1/128]
CALIBRATION_WEIGHT = 0.2  # EMA weight of one decode step's verified drafts


def bucket(confidence: float) -> int:
    """The calibration bucket of a joint confidence c in [0, 1]: floor(-log2 c), the last one for anything smaller."""
    if confidence <= 0:
        return CONFIDENCE_BUCKETS - 1
    return min(CONFIDENCE_BUCKETS - 1, max(0, math.floor(-math.log2(confidence))))


@dataclass
class Calibration:
    """P(path accepted) as a function of the joint draft confidence c: per bucket, EMAs of the accepted
    nodes and of their confidences per step (None: not seen yet, so P = c)."""

    accepted: list[float | None] = field(default_factory=lambda: [None] * CONFIDENCE_BUCKETS)
    confidence: list[float | None] = field(default_factory=lambda: [None] * CONFIDENCE_BUCKETS)

    def factors(self) -> list[float]:
        """accepted / confidence per bucket (1.0 where nothing was verified yet)."""
        return [a / c if a is not None and c else 1.0 for a, c in zip(self.accepted, self.confidence)]

    def probability(self, log_joint: torch.Tensor) -> torch.Tensor:
        """log c (any shape) -> the calibrated chance that each node's whole path is accepted."""
        conf = log_joint.exp()
        index = torch.floor(-log_joint / math.log(2.0)).clamp(0, CONFIDENCE_BUCKETS - 1).long()
        factor = torch.tensor(self.factors(), dtype=conf.dtype, device=conf.device)[index]
        return (conf * factor).clamp_max(1.0)

    def observe(self, nodes: list[tuple[float, bool]]) -> None:
        """Learn from one step's verified nodes: (joint confidence, whole path accepted) for each."""
        hits = [0.0] * CONFIDENCE_BUCKETS
        mass = [0.0] * CONFIDENCE_BUCKETS
        seen = [False] * CONFIDENCE_BUCKETS
        for conf, hit in nodes:
            b = bucket(conf)
            hits[b] += 1.0 if hit else 0.0
            mass[b] += conf
            seen[b] = True
        w = CALIBRATION_WEIGHT
        for b in range(CONFIDENCE_BUCKETS):
            if not seen[b]:
                continue
            old_a, old_c = self.accepted[b], self.confidence[b]
            self.accepted[b] = hits[b] if old_a is None else (1 - w) * old_a + w * hits[b]
            self.confidence[b] = mass[b] if old_c is None else (1 - w) * old_c + w * mass[b]


def tree_gain(tree, calibration: Calibration) -> torch.Tensor:
    """(N,) float: for n = 1..N, the expected accepted nodes summed over the batch when each row keeps its n
    nodes of highest joint confidence (`DraftTree.best`), so E[tokens](n) = batch + gain[n - 1]."""
    log_joint = tree.joint()  # (B, N)
    order = torch.sort(log_joint, dim=1, descending=True, stable=True).indices  # the order DraftTree.best keeps them in
    prob = calibration.probability(log_joint.gather(1, order))  # (B, N)
    return prob.cumsum(dim=1).sum(dim=0)


def chain_nodes(drafted) -> list[tuple[float, bool]]:
    """A chain row's drafts (engine.trace.records.DraftToken) as calibration nodes: prefix joint confidence, accepted."""
    nodes, conf = [], 1.0
    for token in drafted:
        conf *= token.draft_prob
        nodes.append((conf, token.accepted))
    return nodes


def tree_nodes(record) -> list[tuple[float, bool]]:
    """A tree row (engine.trace.records.TreeRecord) as calibration nodes: joint confidence, on the accepted path."""
    joint: list[float] = []
    for parent, q in zip(record.parents, record.q):
        joint.append(q * (joint[parent] if parent >= 0 else 1.0))
    return list(zip(joint, record.accepted))
