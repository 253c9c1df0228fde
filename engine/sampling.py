"""Sampling and the speculative accept/resample rule.

Follows Leviathan, Kalman, Matias 2023, "Fast Inference from Transformers via Speculative Decoding",
Algorithm 1 (and transformers' `_speculative_sampling`), in their symbols:
    q = draft distribution, p = target distribution, x = drafted token.
    Accept x with probability min(1, p(x) / q(x)); at the first rejection sample from
    norm(max(0, p - q)); if all k drafts are accepted, sample a bonus token from p at position k+1.
The resulting tokens are distributed exactly as the target's p. With temperature 0 the rule is
the greedy one: accept the longest prefix that matches the target's argmax.
"""

from __future__ import annotations

import math

import numpy
import torch


def probs_from_logits(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Softmax(logits / T) restricted to the top-p nucleus and renormalised. (..., vocab) -> (..., vocab), float32."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        cumulative = sorted_probs.cumsum(dim=-1)
        # Keep a token if the mass strictly before it is < top_p (so the top token is always kept).
        keep_sorted = (cumulative - sorted_probs) < top_p
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = probs * keep
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row from (..., vocab) probabilities -> (...) ids."""
    flat = probs.reshape(-1, probs.shape[-1])
    return torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])


def first_rejection(accepted: torch.Tensor) -> torch.Tensor:
    """Number of leading accepted drafts per row: (B, k) bool -> (B,) long.

    `cumprod` turns everything after the first False into 0, so the row sum counts the accepted prefix."""
    return accepted.long().cumprod(dim=-1).sum(dim=-1)


def greedy_ids(logits: torch.Tensor) -> torch.Tensor:
    """The argmax over the last dimension (the first maximum on ties, like `argmax`). `max(dim).indices`
    because on a CPU bfloat16 `argmax` takes several times as long over a tree verify pass's logits
    (docs/journal.md, "Code history moved out of engine/"); a test checks the two agree, ties included."""
    return logits.max(dim=-1).indices


def greedy_stats(logits: torch.Tensor, backend=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(greedy_ids(logits), torch.logsumexp(logits.float(), -1)): what greedy verification and drafting read
    of their logits, the argmax and the normaliser of p (or q) at T = 1. On the run's `backend`
    (engine/model/backend.Backend) where it is "native", in one native call (`Backend.logit_stats`: the same argmax,
    the normaliser to within float32 rounding; a fraction of torch's two reductions over wide rows); elsewhere, or
    with no backend, torch's two reductions."""
    native = backend.logit_stats(logits) if backend is not None else None
    if native is not None:
        return native
    return greedy_ids(logits), torch.logsumexp(logits.float(), dim=-1)


def accept_greedy(
    draft_ids: torch.Tensor, target_logits: torch.Tensor, valid: torch.Tensor, target_ids: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy verification.

    draft_ids (B, k); target_logits (B, k+1, vocab); valid (B, k) marks real drafts (False = padding);
    target_ids: greedy_ids(target_logits) where the caller has them already.
    Returns num_accepted (B,) and next_ids (B,): the target's argmax after the accepted prefix
    (a correction if a draft was rejected, a bonus token if all k were accepted)."""
    target_ids = greedy_ids(target_logits) if target_ids is None else target_ids  # (B, k+1)
    num_accepted = first_rejection((draft_ids == target_ids[:, :-1]) & valid)  # (B,)
    next_ids = target_ids.gather(1, num_accepted[:, None]).squeeze(1)  # (B,)
    return num_accepted, next_ids


def accept_or_resample(
    draft_ids: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    valid: torch.Tensor,
    generator: torch.Generator | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sampling verification, Leviathan et al. 2023, Algorithm 1.

    draft_ids (B, k): the drafted tokens x_1..x_k
    draft_probs (B, k, vocab): q at each drafted position (a one-hot row for a deterministic drafter)
    target_probs (B, k+1, vocab): p at each drafted position plus the bonus position
    valid (B, k): real drafts; padding (q = 0 there) is never accepted, so a row that ran out of
        drafts gets its bonus token from p, exactly as after a full acceptance
    Returns num_accepted (B,) and next_ids (B,).
    """
    batch, depth = draft_ids.shape
    # 1. accept x_i with probability min(1, p(x_i) / q(x_i))
    p_x = target_probs[:, :depth].gather(2, draft_ids[..., None]).squeeze(2)  # (B, k)
    q_x = draft_probs.gather(2, draft_ids[..., None]).squeeze(2)  # (B, k)
    u = torch.rand(batch, depth, generator=generator, device=draft_ids.device)  # (B, k)
    accepted = (u * q_x < p_x) & valid  # u < p/q without dividing by q
    num_accepted = first_rejection(accepted)  # (B,)
    # 2. at the first rejection, resample from norm(max(0, p - q)); after k acceptances, from p_{k+1}
    rows = torch.arange(batch, device=draft_ids.device)
    p_next = target_probs[rows, num_accepted]  # (B, vocab)
    q_next = torch.cat([draft_probs, torch.zeros_like(draft_probs[:, :1])], dim=1)[rows, num_accepted]  # (B, vocab)
    residual = (p_next - q_next).clamp_min(0.0)
    all_accepted = num_accepted == depth
    residual[all_accepted] = p_next[all_accepted]
    # p == q exactly leaves no residual mass; then any draw from p is correct (the rejection had probability 0).
    empty = residual.sum(dim=-1) <= 0
    residual[empty] = p_next[empty]
    next_ids = sample(residual / residual.sum(dim=-1, keepdim=True), generator)
    return num_accepted, next_ids


def verify(logits: torch.Tensor, draft, greedy: bool, temperature: float, top_p: float, generator, backend=None):
    """Step 3 of a speculative step: decide each row's accepted count and the target's own next token.

    logits (B, k+1, vocab) of the verify pass over [last, d_1..d_k]; draft: the drafter's `Draft`, or None
    for a plain step. Returns num_accepted (B,), next_ids (B,) (a correction after a rejection, a bonus
    after a full acceptance) and p_chosen (B, k+1): the target's p of each drafted token at its position
    and, last, of the next token at position num_accepted (for the trace; at T = 1 when greedy). backend: the run's
    (`greedy_stats`)."""
    batch, device = logits.shape[0], logits.device
    depth = draft.depth if draft is not None else 0
    if greedy and device.type == "cpu" and logits.is_contiguous():
        return verify_greedy_host(logits, draft, backend)
    if greedy:
        # Only the chosen tokens' p are needed: normalise with logsumexp, no (B, k+1, vocab) softmax.
        target_ids, target_logz = greedy_stats(logits, backend)  # (B, k+1) each
        target_logz = target_logz[..., None]  # (B, k+1, 1)
        target_probs = None
        if draft is not None:
            num_accepted, next_ids = accept_greedy(draft.ids, logits, draft.valid, target_ids)
        else:
            num_accepted, next_ids = torch.zeros(batch, dtype=torch.long, device=device), target_ids[:, -1]
    else:
        target_probs = probs_from_logits(logits, temperature, top_p)  # (B, k+1, vocab)
        if draft is not None:
            num_accepted, next_ids = accept_or_resample(draft.ids, draft.probs, target_probs, draft.valid, generator)
        else:
            num_accepted = torch.zeros(batch, dtype=torch.long, device=device)
            next_ids = sample(target_probs[:, -1], generator)
    rows = torch.arange(batch, device=device)
    tokens = torch.cat([draft.ids, next_ids[:, None]], 1) if draft is not None else next_ids[:, None]  # (B, k+1)
    where = torch.cat([torch.arange(depth, device=device).expand(batch, depth), num_accepted[:, None]], 1)
    if target_probs is None:
        picked = logits[rows[:, None], where, tokens].float()  # (B, k+1) single elements, no copy of vocab
        p_chosen = torch.exp(picked - target_logz[rows[:, None], where, 0])
    else:
        p_chosen = target_probs[rows[:, None], where, tokens]
    return num_accepted, next_ids, p_chosen


def verify_greedy_host(logits: torch.Tensor, draft, backend=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`verify`'s greedy branch for contiguous CPU logits, decided on the host: the argmax and the normaliser in
    one native call (greedy_stats), the longest matching prefix counted in Python over a few ints, and the
    chosen tokens' logits read through a NumPy view of the logits (no copy, no torch op), p = exp(logit - logZ)
    in double precision (the tensor branch's float32 p to within rounding; the tokens are the same). Small torch
    ops run cold right after a pass: the tensor branch's ~25 cost about twice this one (docs/measurements.md)."""
    batch, width, vocab = logits.shape
    target_ids, target_logz = greedy_stats(logits, backend)  # (B, k+1) each
    ids, logz = target_ids.tolist(), target_logz.tolist()
    drafted = draft.ids.tolist() if draft is not None else [[] for _ in range(batch)]
    valid = draft.valid.tolist() if draft is not None else drafted
    flat_logits = (logits.view(torch.int16) if logits.dtype == torch.bfloat16 else logits).numpy().reshape(-1)  # a view
    accepted, next_ids, p_chosen = [], [], []
    for r in range(batch):
        row, a = ids[r], 0
        for d, ok, t in zip(drafted[r], valid[r], row):  # the leading drafts equal to the target's argmax
            if not (ok and d == t):
                break
            a += 1
        accepted.append(a)
        next_ids.append(row[a])
        cells = [(j, d) for j, d in enumerate(drafted[r])] + [(a, row[a])]  # (column, token) of each chosen p
        picked = flat_logits[[(r * width + j) * vocab + d for j, d in cells]]
        if logits.dtype == torch.bfloat16:  # bfloat16 bits -> float32, exactly
            picked = (picked.astype(numpy.int32) << 16).view(numpy.float32)
        p_chosen.append([min(1.0, math.exp(x - logz[r][j])) for x, (j, _) in zip(picked.tolist(), cells)])
    return torch.tensor(accepted), torch.tensor(next_ids), torch.tensor(p_chosen)
