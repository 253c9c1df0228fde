"""EAGLE-2's dynamic draft tree: expand the best nodes level by level, then keep the best N overall.

Follows Li et al. 2024, "EAGLE-2: Faster Inference of Language Models with Dynamic Draft Trees"
(SafeAILab/EAGLE, `topK_genrate`), in SpecLab's terms:
    score(node) = log of the product of the drafter's q along the path root -> node  (joint confidence)
    level 1:  the top-k tokens of the drafter's q after the root
    level l:  the k best level-(l-1) nodes by score (the frontier) are fed to the drafter in one
              forward (a tree attention mask: each sees the context and its own ancestors); each gets
              its top-k children, k^2 candidates, whose best k become the next frontier
    rerank:   of all k + (depth-1) k^2 candidates keep the N with the highest score. A child never
              scores above its parent (q <= 1), so the kept set is a tree: every kept node's parent is kept.
`grow_tree` runs those levels over a drafter's RaggedCache; the drafter only supplies `feed`, one forward
of the frontier (engine/drafters/eagle.py, model.py). `TreeBuilder` keeps the candidates and returns the
`DraftTree` (engine/decoding/verify_tree.py) the target verifies.
The tree is a deterministic function of the drafter's q (top-k, no sampling), which is what makes the
one-hot recursive rejection sampling of engine/decoding/verify_tree.py lossless.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class DraftTree:
    tokens: torch.Tensor  # (B, N) long: each node's token
    parents: torch.Tensor  # (B, N) long: parent node index, -1 for children of the root
    depths: torch.Tensor  # (B, N) long: 1 .. D
    q: torch.Tensor  # (B, N) float: the drafter's probability of the node's token after its parent
    topk: int  # most children a node has

    @property
    def nodes(self) -> int:
        return int(self.tokens.shape[1])

    @property
    def depth(self) -> int:
        return int(self.depths.max()) if self.tokens.numel() else 0

    @property
    def parent_columns(self) -> torch.Tensor:
        """(B, N): each node's parent as a verify column (0 = the root)."""
        return self.parents + 1

    @property
    def offsets(self) -> torch.Tensor:
        """(B, N+1): each verify column's position after the row's length: the root 0, a node its depth."""
        return torch.cat([torch.zeros_like(self.depths[:, :1]), self.depths], dim=1)

    def attention(self) -> torch.Tensor:
        """(B, N+1, N+1) bool: column i attends to column j iff j is i itself or one of its ancestors. Made once
        per tree (the verify pass's mask and greedy acceptance both read it); a DraftTree is never changed in place."""
        cached = self.__dict__.get("_attention")
        if cached is None:
            cached = self.__dict__["_attention"] = self._lineage()
        return cached

    def _lineage(self) -> torch.Tensor:
        batch, n = self.tokens.shape
        up = torch.cat([torch.zeros_like(self.parents[:, :1]), self.parent_columns], dim=1)  # (B, N+1); root -> root
        seen = torch.eye(n + 1, dtype=torch.bool, device=self.tokens.device).expand(batch, n + 1, n + 1).clone()
        cur = torch.arange(n + 1, device=self.tokens.device).expand(batch, n + 1)
        for _ in range(self.depth):  # one level up per round: D rounds, not one per node
            cur = up.gather(1, cur)  # (B, N+1): each column's ancestor one level higher (the root stays)
            seen.scatter_(2, cur[..., None], True)
        return seen

    def children(self) -> torch.Tensor:
        """(B, N+1, topk) long: the verify columns of each column's children, best first; -1 = none."""
        batch, n = self.tokens.shape
        device = self.tokens.device
        parent_cols = self.parent_columns  # (B, N)
        onehot = parent_cols[..., None] == torch.arange(n + 1, device=device)  # (B, N, N+1)
        rank = (onehot.long().cumsum(1) - 1).gather(2, parent_cols[..., None]).squeeze(2)  # (B, N): sibling rank
        table = torch.full((batch, n + 1, self.topk), -1, dtype=torch.long, device=device)
        cols = torch.arange(1, n + 1, device=device).expand(batch, n)
        table[torch.arange(batch, device=device)[:, None], parent_cols, rank] = cols
        return table

    def select(self, rows: torch.Tensor) -> DraftTree:
        return DraftTree(self.tokens[rows], self.parents[rows], self.depths[rows], self.q[rows], self.topk)

    def path_sum(self, values: torch.Tensor) -> torch.Tensor:
        """(B, N): each node's sum of `values` (B, N) along root -> node (of log probabilities: a path's log product)."""
        total = values
        for level in range(2, self.depth + 1):  # parents come before children: one level per round
            total = torch.where(self.depths == level, values + total.gather(1, self.parents.clamp_min(0)), total)
        return total

    def joint(self) -> torch.Tensor:
        """(B, N) float: each node's joint draft confidence, log of the product of q along root -> node (the
        score EAGLE-2 reranks by). A child never scores above its parent (log q <= 0). Made once per tree (the cut
        and goodput's pricing both read it), as `attention` is."""
        cached = self.__dict__.get("_joint")
        if cached is None:
            cached = self.__dict__["_joint"] = self.path_sum(self.q.clamp_min(1e-30).log().clamp_max(0.0))
        return cached

    def best(self, n: int, score: torch.Tensor | None = None) -> DraftTree:
        """The tree cut to each row's `n` nodes of highest score (B, N) (default: the joint confidence; ties: the
        earlier node), in creation order. Still a tree for any score that never rises from a parent to its child
        (a path's log product of probabilities): a node's ancestors score at least as high and come earlier."""
        if n >= self.nodes:
            return self
        score = self.joint() if score is None else score
        keep = torch.sort(score, dim=1, descending=True, stable=True).indices[:, :n].sort(dim=1).values  # (B, n)
        return DraftTree(
            tokens=self.tokens.gather(1, keep),
            parents=kept_parents(self.parents, keep),
            depths=self.depths.gather(1, keep),
            q=self.q.gather(1, keep),
            topk=self.topk,
        )


def kept_parents(parents: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """parents (B, M) of M candidates (-1: the root), keep (B, N) ascending candidate indices -> (B, N) each
    kept node's parent as an index into the kept ones. Raises if a kept node's parent was not kept."""
    batch, total = parents.shape
    n = keep.shape[1]
    node_of = torch.full((batch, total), -1, dtype=torch.long, device=parents.device)  # candidate -> node index
    node_of.scatter_(1, keep, torch.arange(n, device=parents.device).expand(batch, n))
    parent_cand = parents.gather(1, keep)
    node_parents = torch.where(parent_cand >= 0, node_of.gather(1, parent_cand.clamp_min(0)), -1)
    if bool(((parent_cand >= 0) & (node_parents < 0)).any()):
        raise AssertionError("draft tree lost a parent: the reranking must keep every kept node's ancestors")
    return node_parents


class TreeBuilder:
    """Candidates of one draft step for a batch: ids are assigned in creation order (level by level)."""

    def __init__(self, topk: int, budget: int, temperature: float, vocab: torch.Tensor | None, backend=None):
        self.topk, self.budget = topk, budget
        self.backend = backend  # the run's (engine/model/backend.Backend): a "native" run's children in one kernel call
        self.temperature = temperature or 1.0  # greedy runs rank by q at T = 1
        self.vocab = vocab  # (C,) token ids the drafter's logits score (None: the whole vocabulary)
        self.tokens, self.parents, self.logq, self.scores, self.depths = [], [], [], [], []
        self.count = 0  # candidates so far

    def _children(self, logits: torch.Tensor, parent_ids: torch.Tensor | None, parent_scores: torch.Tensor | None):
        """logits (B, F, C) after each of F frontier nodes -> top-k children, recorded as candidates.
        Returns their candidate ids (B, F*k) and scores (B, F*k)."""
        batch, width, _ = logits.shape
        native = self.backend.topk_logq(logits, self.topk, self.temperature) if self.backend is not None else None
        if native is None:
            native = torch.log_softmax(logits.float() / self.temperature, dim=-1).topk(self.topk, dim=-1)
        top, local = native  # (B, F, k) log q and ids, best first
        top = top.clamp_max(0.0)  # log q <= 0 even after rounding: a child never outscores its parent
        scores = top if parent_scores is None else parent_scores[..., None] + top  # (B, F, k)
        if parent_ids is None:
            parents = torch.full((batch, width, self.topk), -1, dtype=torch.long, device=logits.device)
        else:
            parents = parent_ids[..., None].expand(batch, width, self.topk)
        tokens = self.vocab[local] if self.vocab is not None else local
        n = width * self.topk
        ids = torch.arange(self.count, self.count + n, device=logits.device).expand(batch, n)
        self.tokens.append(tokens.reshape(batch, n))
        self.parents.append(parents.reshape(batch, n))
        self.logq.append(top.reshape(batch, n))
        self.scores.append(scores.reshape(batch, n))
        self.depths.append(len(self.depths) + 1)
        self.count += n
        return ids, scores.reshape(batch, n)

    def root(self, logits: torch.Tensor):
        """Level 1 from the drafter's logits after the root (B, C). Returns the frontier (see `grow`)."""
        ids, scores = self._children(logits[:, None], None, None)  # k candidates, already best first
        return Frontier(ids=ids, scores=scores, slots=None, tokens=self.tokens[-1])

    def grow(self, frontier: Frontier, logits: torch.Tensor) -> Frontier:
        """The frontier's children from logits (B, k, C) after each frontier node; returns the next frontier:
        the k best children, their parent's slot in `frontier` (B, k) and their tokens."""
        ids, scores = self._children(logits, frontier.ids, frontier.scores)  # (B, k*k)
        best = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, : self.topk]  # (B, k)
        return Frontier(
            ids=ids.gather(1, best), scores=scores.gather(1, best), slots=best // self.topk, tokens=self.tokens[-1].gather(1, best)
        )

    def tree(self) -> DraftTree:
        """The `budget` best candidates (ties: the earlier, so a parent beats a child that equals it),
        in creation order: by depth, and siblings best first."""
        tokens, parents = torch.cat(self.tokens, 1), torch.cat(self.parents, 1)  # (B, M)
        logq, scores = torch.cat(self.logq, 1), torch.cat(self.scores, 1)
        depths = torch.cat([torch.full_like(t, d) for t, d in zip(self.tokens, self.depths)], 1)
        n = min(self.budget, tokens.shape[1])
        keep = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :n].sort(dim=1).values  # (B, N)
        return DraftTree(
            tokens=tokens.gather(1, keep),
            parents=kept_parents(parents, keep),
            depths=depths.gather(1, keep),
            q=logq.gather(1, keep).exp(),
            topk=self.topk,
        )


class Frontier:
    """The nodes a tree step feeds to the drafter next: candidate ids (B, k), scores (B, k), their
    parents' slots in the previous frontier (B, k) (None at level 1) and their tokens (B, k)."""

    def __init__(self, ids: torch.Tensor, scores: torch.Tensor, slots: torch.Tensor | None, tokens: torch.Tensor):
        self.ids, self.scores, self.slots, self.tokens = ids, scores, slots, tokens


def grow_tree(
    cache, root_logits: torch.Tensor, depth: int, cfg, vocab: torch.Tensor | None, feed, carry: torch.Tensor | None = None
) -> DraftTree:
    """Levels 2..depth of EAGLE-2's tree over a drafter's `cache` (a RaggedCache whose last entry is the
    root's). root_logits (B, C): the drafter's scores after the root.

    feed(tokens (B, k), positions (B, k), attend (B, k, W+k), carry) -> (logits (B, k, C), out) runs the
    drafter over the frontier: depth-d nodes go at position start + d - 1, each attending to the row's cache
    as it was before the tree, its ancestors' entries and itself. `out` (B, k, ...) or None is what each
    node hands its children (the EAGLE head's guessed features); `carry` is the root's, per frontier slot.
    The k * (depth - 1) tree entries stay in the cache for the drafter to drop after verification."""
    k = cfg.tree_topk
    builder = TreeBuilder(k, cfg.tree_nodes, cfg.temperature, vocab, cache.backend)
    frontier = builder.root(root_logits)
    batch, device = root_logits.shape[0], root_logits.device
    context, start = cache.valid, cache.lengths  # (B, W0), (B,): the cache before the tree
    ancestors = torch.zeros(batch, k, 0, dtype=torch.bool, device=device)  # (B, k, T): over tree entries fed
    eye = torch.eye(k, dtype=torch.bool, device=device).expand(batch, k, k)
    for level in range(2, depth + 1):
        attend = torch.cat([context[:, None].expand(batch, k, context.shape[1]), ancestors, eye], dim=2)
        positions = (start + level - 2)[:, None].expand(batch, k)  # (B, k): the frontier is depth level - 1
        logits, out = feed(frontier.tokens, positions, attend, carry)  # (B, k, C)
        frontier = builder.grow(frontier, logits)
        seen = torch.cat([ancestors, eye], dim=2)  # (B, k, T + k): each fed entry's ancestors and itself
        ancestors = seen.gather(1, frontier.slots[..., None].expand(batch, k, seen.shape[2]))
        carry = None if out is None else out.gather(1, frontier.slots[..., None].expand(batch, k, out.shape[2]))
    return builder.tree()
