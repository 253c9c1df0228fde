"""What a draft is worth before the target sees it: expected tokens from the drafter's own probabilities,
calibrated by this run's measured acceptance. The goodput policy (engine/decoding/policies.py) prices and cuts
draft trees with it.

In one step a row emits 1 + (accepted path length) tokens, and the accepted path length is the number of
nodes whose whole path is accepted, so

    E[tokens](tree) = 1 + sum over the tree's nodes of P(the node's whole path is accepted).

A path is accepted when each of its draft tokens is, given the one before it was, so
P(path) = product over its tokens of a(q), where q is the drafter's probability of the token after its parent
and a(q) the chance that such a token is accepted once verification reaches it. A cut keeps EAGLE-2's order, the
product of q itself (`DraftTree.joint`); a(q) prices what the kept nodes are worth, learned from every verified
draft of the run, chains and trees alike: q is cut into buckets by powers of two ((1/2, 1], (1/4, 1/2], ..., the last bucket
everything below), and each bucket counts the drafts verification reached, how many it accepted and their
summed q, counts decaying by CALIBRATION_DECAY per decode step; a(q) = min(1, q x (accepted + m) / (sum of q + m)),
m = PRIOR_NODES x the bucket's middle q, so a bucket that has seen little stays near the drafter's own q
(an EAGLE head is often underconfident: its top tokens are accepted more often than q says). The cut does not rank
by a(q): its factor jumps at the buckets' edges, so a lower-q node could outrank its better sibling (what that cost:
docs/engine.md, "A cut in EAGLE-2's order").

What it assumes: that a draft token's acceptance depends on its context only through its own q (the same
map for a chain's drafts and a tree's, for a top-1 child and a runner-up sibling, at any depth); that
acceptances along a path are independent given their q's (the product rule EAGLE-2's joint confidence
assumes too; siblings' chances are not renormalised, so with a factor above 1 a wide level can be
overvalued); that the map drifts slowly; and, before a step is drafted, that the next tree will look like
the recent ones (the policy keeps a moving average of the calibrated tree curve to choose between shapes;
once a tree is drafted it is cut with that tree's own probabilities). `pricing_check` tests those assumptions on a
recorded run: it replays the calibration over the run's steps and sets, for each cut size, the expected accepted
nodes against the measured ones (scripts/investigate/width_goodput.py prints it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from engine.drafters.tree import DraftTree

CONFIDENCE_BUCKETS = 8  # a draft token's own q: (1/2, 1], (1/4, 1/2], ..., (0, 1/128]
# Per decode step: the counts remember about the last twenty steps. (0.9, ten steps, left the sparse low-q buckets
# that deep and runner-up nodes fall in mostly at their prior: on a recorded EAGLE batch-1 run a 16 -> 32 node cut
# was priced 0.16 more accepted nodes and measured 0.20; `pricing_check` sets the two side by side.)
CALIBRATION_DECAY = 0.95
PRIOR_NODES = 4.0  # each bucket starts as if this many drafts at its middle q had been accepted at exactly q


def bucket(q: float) -> int:
    """The calibration bucket of a probability q in [0, 1]: floor(-log2 q), the last one for anything smaller."""
    if q <= 0:
        return CONFIDENCE_BUCKETS - 1
    return min(CONFIDENCE_BUCKETS - 1, max(0, math.floor(-math.log2(q))))


def _middle(b: int) -> float:
    return 2.0 ** -(b + 0.5)


@dataclass
class Calibration:
    """a(q): the chance that a draft token of probability q is accepted once verification reaches it. Per
    bucket, decayed counts of the reached drafts accepted and of their summed q."""

    accepted: list[float] = field(default_factory=lambda: [0.0] * CONFIDENCE_BUCKETS)
    confidence: list[float] = field(default_factory=lambda: [0.0] * CONFIDENCE_BUCKETS)

    def factors(self) -> list[float]:
        """a(q) / q per bucket, shrunk towards 1 by PRIOR_NODES drafts."""
        prior = [PRIOR_NODES * _middle(b) for b in range(CONFIDENCE_BUCKETS)]
        return [(a + m) / (c + m) for a, c, m in zip(self.accepted, self.confidence, prior)]

    def acceptance(self, q: list[float]) -> list[float]:
        """Each q -> a(q), a draft token's calibrated chance of acceptance given its parent's."""
        factors = self.factors()
        return [min(1.0, x * factors[bucket(x)]) for x in q]

    def observe(self, drafts: list[tuple[float, bool]]) -> None:
        """Learn from one step's reached drafts: (q, accepted) for each."""
        self.accepted = [CALIBRATION_DECAY * a for a in self.accepted]
        self.confidence = [CALIBRATION_DECAY * c for c in self.confidence]
        for q, hit in drafts:
            b = bucket(q)
            self.accepted[b] += 1.0 if hit else 0.0
            self.confidence[b] += q


def tree_value(tree, calibration: Calibration) -> tuple[list[list[float]], list[float]]:
    """(P (B, N): each node's calibrated chance that its whole path is accepted, gain (N,)): for n = 1..N the
    expected accepted nodes summed over the batch when each row keeps its n nodes of highest joint confidence
    (`DraftTree.best(n)`, EAGLE-2's order), so E[tokens](n) = batch + gain[n - 1]."""
    p = calibrated_paths(tree, calibration)
    return p, depth_gains(tree, p)[-1]  # every level kept


# Pricing runs in plain Python on host lists: a tree is a few dozen numbers a row, priced every step, right after a
# pass has streamed the weights through the caches, where plain Python beats numpy's and torch's versions of these
# two (scripts/investigate/goodput_overhead.py; docs/journal.md, "Code history moved out of engine/").
def calibrated_paths(tree, calibration: Calibration) -> list[list[float]]:
    """(B, N): each node's calibrated chance that its whole path is accepted (a product down the path)."""
    factors = calibration.factors()
    paths = []
    for q, parents in zip(tree.q.tolist(), tree.parents.tolist()):
        row: list[float] = []
        for x, parent in zip(q, parents):  # parents come before their children
            a = min(1.0, x * factors[bucket(x)])
            row.append(a if parent < 0 else a * row[parent])
        paths.append(row)
    return paths


def depth_gains(tree, paths: list[list[float]]) -> list[list[float]]:
    """(D, N): row d - 1 is `tree_value`'s gain for the tree stopped at depth d (its nodes deeper than d left out;
    past the number of nodes it keeps, the curve stays flat). EAGLE-2 grows a tree level by level, so the first d
    levels of a deeper tree stand for a tree of depth d (goodput chooses the depth with it). The order is the cut's
    own (`DraftTree.joint`, sorted stably), so the gain prices exactly the nodes `DraftTree.best(n)` keeps."""
    depths, joints = tree.depths.tolist(), tree.joint().tolist()
    levels, nodes = max((max(row, default=1) for row in depths), default=1), len(depths[0]) if depths else 0
    gains = [[0.0] * nodes for _ in range(levels)]
    for p, depth, joint in zip(paths, depths, joints):
        order = sorted(range(nodes), key=lambda i: -joint[i])  # stable: EAGLE-2's order, among the first d levels too
        for d, gain in enumerate(gains, start=1):
            total, k = 0.0, 0
            for i in order:
                if depth[i] <= d:
                    total += p[i]
                    gain[k] += total
                    k += 1
            for j in range(k, nodes):
                gain[j] += total
    return gains


def chain_drafts(drafted) -> list[tuple[float, bool]]:
    """A chain row's drafts (engine.trace.records.DraftToken) verification reached: (q, accepted), up to the first rejection."""
    reached = []
    for token in drafted:
        reached.append((token.draft_prob, token.accepted))
        if not token.accepted:
            break
    return reached


def tree_drafts(record) -> list[tuple[float, bool]]:
    """A tree row's (engine.trace.records.TreeRecord) nodes verification reached (the root's children, and the
    children of accepted nodes): (q, accepted)."""
    return [(q, hit) for parent, q, hit in zip(record.parents, record.q, record.accepted) if parent < 0 or record.accepted[parent]]


def chain_inside(record) -> list[bool]:
    """The chain a tree row (engine.trace.records.TreeRecord) holds: from the root, each level's best child (the
    draft a chain would have made from the same drafter, greedy), as far as the tree or its cut goes; each node's
    acceptance, up to and including the first rejected one."""
    hits: list[bool] = []
    node = -1
    while kids := record.children(node):
        node = kids[0]  # children come best first
        hits.append(record.accepted[node])
        if not hits[-1]:
            break
    return hits


def record_tree(record, topk: int = 0):
    """A TreeRecord (one row of one step, engine/trace/records.py) as a batch-1 DraftTree."""

    def row(values, dtype):
        return torch.tensor([values], dtype=dtype)

    topk = topk or max((len(record.children(i)) for i in range(-1, len(record.ids))), default=1)
    return DraftTree(
        row(record.ids, torch.long), row(record.parents, torch.long), row(record.depths, torch.long), row(record.q, torch.float), topk
    )


def pricing_check(steps, sizes=(1, 2, 4, 8, 16, 32)) -> dict[int, tuple[float, float, int]]:
    """Replay a greedy run's tree steps (engine.trace.records.Step) as the goodput policy learns from them, and,
    for each cut size n, set what the model expected against what verification measured: {n: (mean predicted
    accepted nodes, mean accepted nodes, rows)}. Before each step the calibration holds only the steps before
    it; the prediction for n is the sum of the best n nodes' calibrated path probabilities (tree_value), the
    measurement the accepted path's nodes among those n (greedy: a cut keeps ancestors, so the path verified
    in the cut is the full path's prefix inside it). Needs steps whose trees were verified whole for n up to
    their size (a fixed tree); rows with fewer nodes than n are left out of n. sizes=None: each row at the size
    it was verified at (a goodput run's own cuts), keyed by that size."""
    calibration, out = Calibration(), {}
    for step in steps:
        if step.kind != "decode":
            continue
        rows = [row.tree for row in step.seqs if row.tree is not None] if step.tree_nodes is not None else []
        for record in rows:
            tree = record_tree(record)
            p, _ = tree_value(tree, calibration)
            order = torch.sort(tree.joint()[0], descending=True, stable=True).indices.tolist()  # the cut's order
            on_path = set(record.path())
            for n in sizes or (len(record.ids),):
                if n > len(record.ids):
                    continue
                kept = set(order[:n])
                depth, node = 0, -1
                while True:  # walk the accepted path while it stays inside the cut
                    child = next((i for i in record.children(node) if i in on_path), None)
                    if child is None or child not in kept:
                        break
                    depth, node = depth + 1, child
                total = out.setdefault(n, [0.0, 0.0, 0])
                total[0] += sum(p[0][i] for i in order[:n])
                total[1] += depth
                total[2] += 1
        if step.tree_nodes is not None:
            calibration.observe([d for record in rows for d in tree_drafts(record)])
        elif step.depth > 0:
            calibration.observe([d for row in step.seqs for d in chain_drafts(row.drafted)])
    return {n: (p / rows, m / rows, rows) for n, (p, m, rows) in sorted(out.items())}
