"""Draft trees: their shape, the tree attention of the one verify pass, and lossless tree acceptance.

A draft tree (SpecInfer, Miao et al. 2024; Medusa, Cai et al. 2024; EAGLE-2, Li et al. 2024) proposes
several continuations at once. Row b's tree has N nodes: `tokens[b, i]` continues its parent
`parents[b, i]` (-1: the root, the row's last token); nodes are ordered by depth, so a parent always
comes before its children, and siblings are ordered by the drafter's probability (the best first).

Verify pass (step 2): the target reads [last token, node_1 .. node_N] in ONE forward. Column 0 is the
root, column i+1 is node i. Each column attends to the row's cache and to its own ancestors and itself
(`DraftTree.attention`, (B, N+1, N+1)); its position is the row's length + its depth (`offsets`).
So column i+1's logits are the target's distribution after the path root -> node i, as if that path had
been decoded on its own.

Acceptance (step 3), lossless:
- greedy: the longest root-to-node path whose every token is the target's argmax after its parent,
  then the target's argmax after the path (a bonus at a leaf, else a correction);
- sampling: recursive rejection sampling over a node's children (SpecInfer's multi-step speculative
  sampling, EAGLE-2's `evaluate_posterior`). The children of a node are the drafter's top-k, a
  deterministic function of the context, so each candidate's proposal is one-hot: child x is accepted
  with probability p'(x), where p' is the target's p with the already-rejected siblings removed and
  renormalised; on acceptance the walk moves to x and repeats; when every child is rejected (or the
  node is a leaf) the next token is drawn from p'. Each emitted token is then distributed exactly as p.
Both return the accepted path as verify columns (`path`, (B, D+1): column 0 the root, then the accepted
nodes' columns), which roll-back keeps in the caches (RaggedCache.keep_path).
"""

from __future__ import annotations

import torch

from engine.drafters.tree import DraftTree
from engine.sampling import greedy_ids, probs_from_logits, sample


def path_from_leaf(tree: DraftTree, leaf: torch.Tensor) -> torch.Tensor:
    """(B, D+1) verify columns of the path root -> leaf (leaf (B,) a verify column, 0 for the root itself);
    column 0 is the root; entries past a row's path are 0. The path is the leaf's row of the tree attention
    (itself and its ancestors), read in column order: a parent's column always comes before its child's."""
    seen = tree.attention()  # (B, N+1, N+1)
    batch, width = seen.shape[0], seen.shape[2]
    lineage = seen.gather(1, leaf[:, None, None].expand(batch, 1, width)).squeeze(1)  # (B, N+1)
    cols = torch.arange(width, device=leaf.device).expand(batch, width)
    ordered = torch.where(lineage, cols, width).sort(dim=1).values[:, : tree.depth + 1]  # root, depth 1, 2, ...
    return torch.where(ordered < width, ordered, 0)


def accept_tree_greedy(tree: DraftTree, logits: torch.Tensor, target_ids: torch.Tensor | None = None):
    """Greedy tree verification. logits (B, N+1, vocab) of the verify pass; target_ids: their greedy_ids,
    where the caller has them already.

    Returns num_accepted (B,), next_ids (B,) and path (B, D+1): the longest path whose tokens are each the
    target's argmax after their parent (children of one parent are distinct, so at most one matches)."""
    target_ids = greedy_ids(logits) if target_ids is None else target_ids  # (B, N+1)
    match = tree.tokens == target_ids.gather(1, tree.parent_columns)  # (B, N): the target's argmax after the parent
    lineage = tree.attention()[:, 1:, 1:]  # (B, N, N): each node's ancestors and itself, the root left out
    accepted = ~(lineage & ~match[:, None, :]).any(2)  # on the path: the node and all its ancestors match
    reached = torch.where(accepted, tree.depths, 0)  # (B, N)
    num_accepted, deepest = reached.max(dim=1)  # (B,)
    leaf = torch.where(num_accepted > 0, deepest + 1, 0)  # (B,) verify column of the path's end
    next_ids = target_ids.gather(1, leaf[:, None]).squeeze(1)
    return num_accepted, next_ids, path_from_leaf(tree, leaf)


def accept_tree_sampling(tree: DraftTree, target_probs: torch.Tensor, generator):
    """Sampling tree verification: recursive rejection sampling over each node's children (see the module
    docstring). target_probs (B, N+1, vocab): p at every verify column. Returns num_accepted (B,),
    next_ids (B,) and path (B, D+1)."""
    batch, device = tree.tokens.shape[0], tree.tokens.device
    rows = torch.arange(batch, device=device)
    children = tree.children()  # (B, N+1, topk)
    tokens = torch.cat([torch.zeros_like(tree.tokens[:, :1]), tree.tokens], dim=1)  # (B, N+1); column 0 unused
    path = torch.zeros(batch, tree.depth + 1, dtype=torch.long, device=device)
    num_accepted = torch.zeros(batch, dtype=torch.long, device=device)
    next_ids = torch.zeros(batch, dtype=torch.long, device=device)
    cur = torch.zeros(batch, dtype=torch.long, device=device)  # (B,) the column the walk stands on
    alive = torch.ones(batch, dtype=torch.bool, device=device)
    for level in range(tree.depth + 1):
        residual = target_probs[rows, cur].clone()  # (B, vocab): p' at the current node
        moved = torch.zeros_like(alive)
        nxt = cur.clone()
        for j in range(tree.topk):
            child = children[rows, cur, j]  # (B,)
            trying = alive & ~moved & (child > 0)
            x = tokens[rows, child.clamp_min(0)]  # (B,)
            p_x = residual[rows, x] / residual.sum(dim=-1).clamp_min(1e-30)
            u = torch.rand(batch, generator=generator, device=device)
            take = trying & (u < p_x)
            moved |= take
            nxt = torch.where(take, child, nxt)
            drop = trying & ~take
            residual[rows[drop], x[drop]] = 0.0  # a rejected sibling leaves p'; the rest is renormalised
        finish = alive & ~moved
        if bool(finish.any()):
            rest = residual[finish]
            empty = rest.sum(dim=-1) <= 0  # only by rounding (a rejection had probability ~0): draw from p
            rest[empty] = target_probs[rows[finish], cur[finish]][empty]
            next_ids[finish] = sample(rest / rest.sum(dim=-1, keepdim=True), generator)
        alive = alive & moved
        cur = torch.where(moved, nxt, cur)
        num_accepted = num_accepted + moved.long()
        if level < tree.depth:
            path[:, level + 1] = torch.where(moved, cur, 0)
        if not bool(alive.any()):
            break
    return num_accepted, next_ids, path


def verify_tree(logits: torch.Tensor, tree: DraftTree, greedy: bool, temperature: float, top_p: float, generator, backend=None):
    """Step 3 for a tree draft. logits (B, N+1, vocab) of the verify pass over [last, node_1..node_N].

    Returns num_accepted (B,), next_ids (B,), p_chosen (B, N+1): the target's p of each node's token after
    its parent and, last, of the next token after the accepted path (at T = 1 when greedy), and path (B, D+1).
    backend: the run's (engine/model/backend.Backend; `Backend.logit_stats` on "native", else torch's way)."""
    batch, device = logits.shape[0], logits.device
    rows = torch.arange(batch, device=device)
    if greedy:
        native = backend.logit_stats(logits) if backend is not None else None  # every column's argmax and normaliser
        num_accepted, next_ids, path = accept_tree_greedy(tree, logits, native[0] if native is not None else None)
        cols = torch.cat([tree.parent_columns, path.gather(1, num_accepted[:, None])], dim=1)  # (B, N+1)
        tokens = torch.cat([tree.tokens, next_ids[:, None]], dim=1)
        if native is not None:
            logz = native[1]  # (B, N+1)
        else:
            # Normalise only the columns some p is read at (parents and path ends; leaves mostly are not): torch's
            # float logsumexp over (B, N+1, vocab) costs more than the rest of acceptance together.
            needed = torch.zeros(logits.shape[1], dtype=torch.bool, device=device)
            needed[cols.flatten()] = True
            where = needed.nonzero().squeeze(1)  # (M,) columns, ascending
            logz = torch.zeros(batch, logits.shape[1], device=device)
            logz[:, where] = torch.logsumexp(logits[:, where].float(), dim=-1)  # (B, M)
        p_chosen = torch.exp(logits[rows[:, None], cols, tokens].float() - logz.gather(1, cols))
    else:
        target_probs = probs_from_logits(logits, temperature, top_p)  # (B, N+1, vocab)
        num_accepted, next_ids, path = accept_tree_sampling(tree, target_probs, generator)
        cols = torch.cat([tree.parent_columns, path.gather(1, num_accepted[:, None])], dim=1)
        tokens = torch.cat([tree.tokens, next_ids[:, None]], dim=1)
        p_chosen = target_probs[rows[:, None], cols, tokens]
    return num_accepted, next_ids, p_chosen, path
