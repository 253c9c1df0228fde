"""The drafter interface: who proposes the k tokens that the target verifies, and how the loop talks to it.

Every drafter implements `Drafter` (below); the decode loop (engine/decoding/decode.py) only ever calls these
hooks and never asks which drafter it holds (the shape of transformers' CandidateGenerator):

    prefill(prompts, hidden)      after the target's prefill (hidden: its features, if `target_features`)
    propose(sequences, depth, cfg, generator) -> Draft | None     # 1. draft
    commit(Verified)              after verification (and after plain steps): keep what was accepted
    select(rows)                  finished sequences leave the batch
    take_counts() -> (FLOPs, bytes) of its own passes since the last call
    token_flops(context)          FLOPs of one drafted token (what a rejected draft wasted)

Which drafter `DecodeConfig.drafter` names is the registry's business (engine/drafters/__init__.py).
The drafters: `ModelDrafter` (model.py), `EagleDrafter` (eagle.py), `NgramDrafter` (ngram.py).

The two model drafters can stop early (`ConfidenceGate`, DecodeConfig.confidence_threshold): a row stops
once the product of its drafts' q falls below the threshold, so `depth` is then the most it drafts.

All return a `Draft`: ids (B, k), q_x (B, k) the drafter's probability of each proposed token,
probs (B, k, vocab) the full q when sampling needs it, and valid (B, k) — n-gram rows may find fewer
than k tokens; the rest is padding that verification never accepts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar, Protocol

import torch

from engine.drafters.tree import DraftTree
from engine.sampling import greedy_stats, probs_from_logits, sample

if TYPE_CHECKING:
    from engine.model.pair import ModelPair


@dataclass
class Draft:
    ids: torch.Tensor  # (B, k) long
    q_x: torch.Tensor  # (B, k) float: drafter's probability of each proposed token
    probs: torch.Tensor | None  # (B, k, vocab) float32 q, only when sampling
    valid: torch.Tensor  # (B, k) bool
    forwards: int  # draft model forward passes spent
    fed_tokens: int  # tokens fed through the draft model per row, summed over those passes
    tree: DraftTree | None = None  # a draft tree (ids are its nodes, engine/decoding/verify_tree.py); None: a chain

    @property
    def depth(self) -> int:
        """k: a chain's length, a tree's deepest level."""
        return self.tree.depth if self.tree is not None else int(self.ids.shape[1])

    @property
    def nodes(self) -> int:
        """Draft tokens the target verifies per row (a chain's k, a tree's N)."""
        return int(self.ids.shape[1])

    def cut(self, n: int, score: torch.Tensor | None = None) -> Draft:
        """A tree draft cut to each row's n best nodes by score (DraftTree.best); what the drafter spent is unchanged."""
        if self.tree is None or n >= self.nodes:
            return self
        tree = self.tree.best(n, score)
        return replace(self, ids=tree.tokens, q_x=tree.q, valid=self.valid[:, :n], tree=tree)


def choose_tokens(
    logits: torch.Tensor, temperature: float, top_p: float, generator, vocab: torch.Tensor | None, vocab_size: int, backend=None
):
    """One draft token per row from the drafter's logits (B, C), which score `vocab` (None: the whole vocabulary).

    Returns (token ids (B,), q of each chosen token (B,), q over the whole vocabulary (B, vocab_size) when
    sampling, else None). Greedy: q of the argmax at T = 1 (shown in the trace) without a full softmax.
    With a reduced vocabulary q is 0 outside it, which Algorithm 1 needs to stay exact. backend: the drafter's cache's
    (the run's, engine/model/backend.Backend), for greedy statistics."""
    if temperature == 0:
        native = backend.logit_stats(logits, top=True) if backend is not None else None  # with each row's maximum
        if native is not None:
            local, logz, top = native  # (B,) each
        else:
            local, logz = greedy_stats(logits, backend)  # (B,) each
            top = logits.gather(1, local[:, None]).squeeze(1).float()
        q_x = torch.exp(top - logz)
        q_full = None
    else:
        q_full = probs_from_logits(logits, temperature, top_p)
        local = sample(q_full, generator)
        q_x = q_full.gather(1, local[:, None]).squeeze(1)
        if vocab is not None:
            q_all = torch.zeros(q_full.shape[0], vocab_size, device=q_full.device)
            q_all[:, vocab] = q_full
            q_full = q_all
    return (vocab.index_select(0, local) if vocab is not None else local), q_x, q_full


class ConfidenceGate:
    """Collects a model drafter's tokens step by step and stops a row once it is unlikely to be accepted.

    A row keeps drafting while its running confidence, the product of q over its drafts so far (EAGLE-2's
    joint confidence, an estimate of the chance that the whole prefix is accepted), stays >= `threshold`.
    The token that takes it below is still proposed; later positions of that row are padding (valid =
    False, q = 0, so sampling verification draws the row's next token from p, as after a full
    acceptance). Drafting ends when every row has stopped. threshold 0 drafts the full depth."""

    def __init__(self, batch: int, threshold: float, device: torch.device):
        self.threshold = threshold
        self.confidence = torch.ones(batch, device=device) if threshold else None  # no gate: nothing to track
        self.alive = torch.ones(batch, dtype=torch.bool, device=device)
        self.ids, self.q_x, self.probs, self.valid = [], [], [], []
        self.done = False

    @property
    def width(self) -> int:
        return len(self.ids)

    def add(self, token: torch.Tensor, q: torch.Tensor, q_full: torch.Tensor | None) -> torch.Tensor:
        """Record one draft position (token, q (B,), q over the vocabulary or None); returns token."""
        valid = self.alive
        self.ids.append(token)
        self.valid.append(valid)
        if self.threshold == 0:  # no gate: every row drafts every position, nothing to mask
            self.q_x.append(q)
            if q_full is not None:
                self.probs.append(q_full)
            return token
        self.q_x.append(torch.where(valid, q, 0.0))
        if q_full is not None:
            self.probs.append(q_full * valid[:, None])
        self.confidence = self.confidence * q
        self.alive = valid & (self.confidence >= self.threshold)
        self.done = not bool(self.alive.any())
        return token

    def draft(self, forwards: int, fed_tokens: int) -> Draft:
        return Draft(
            ids=torch.stack(self.ids, dim=1),
            q_x=torch.stack(self.q_x, dim=1),
            probs=torch.stack(self.probs, dim=1) if self.probs else None,
            valid=torch.stack(self.valid, dim=1),
            forwards=forwards,
            fed_tokens=fed_tokens,
        )


@dataclass
class Verified:
    """What one target pass decided, handed to the drafter's `commit`.

    draft: what was proposed (None: a plain step, nothing drafted); num_accepted (B,): drafts each row
    kept; new_lengths (B,): each sequence's length after this step (accepted drafts + the target's token);
    hidden (B, k+1, F): the target's features over the verified positions, for drafters that asked."""

    draft: Draft | None
    num_accepted: torch.Tensor
    new_lengths: torch.Tensor
    hidden: torch.Tensor | None = None


class Drafter(Protocol):
    """One drafter, declared in one place: who it is (kind, display, about), what load_pair loads for it (loads),
    what it can do (branches, confident), and the hooks the decode loop calls. The CLI's choices, the config's
    validation, the bench, the app's labels and ModelPair's loaded weights all read these declarations through the
    registry (engine/drafters/__init__.py). `cfg` in the hooks is the run's engine.config.DecodeConfig."""

    kind: ClassVar[str]  # the DecodeConfig.drafter value that selects it (the CLI's --drafter choice)
    display: ClassVar[str]  # its short name in the app's controls ("draft model")
    about: ClassVar[str]  # one line on what it drafts from (the CLI's and the Playground's help)
    # What load_pair loads for it: a key of ModelPair.loaded ("draft": a draft model, "eagle": an EAGLE head), or None
    # (nothing: it drafts from the text alone, so every pair runs it).
    loads: ClassVar[str | None]
    branches: ClassVar[bool]  # drafts trees (tree_nodes > 0): it has a distribution to branch on
    confident: ClassVar[bool]  # reports its confidence in each draft token, so confidence_threshold can stop it early
    # What the drafter needs from the target's passes: False (nothing), True (its final hidden states) or
    # a tuple of layer indices whose outputs come first (EAGLE-3 fusion).
    target_features: bool | tuple[int, ...]
    # Optional `card: ClassVar[str]`: the drafter kind whose shipped calibration (engine/drafters/calibration.py) goodput
    # starts this one from, where it runs another drafter's weights (the hybrid: the EAGLE head's); default its own kind.

    @classmethod
    def available(cls, pair: ModelPair) -> bool: ...  # can this pair run it?

    @classmethod
    def label(cls, pair: ModelPair, cfg=None) -> str: ...  # display name (the trace's draft_name)

    @classmethod
    def params(cls, pair: ModelPair) -> int: ...  # its own weights (0 for a lookup)

    @classmethod
    def build(cls, pair: ModelPair, cfg, pad_id: int, backend=None) -> Drafter: ...  # ConfigError if unavailable

    # backend: the run's engine.model.backend.Backend, which a drafter's own cache takes (make_cache(..., backend=))

    # shared: the first `shared` tokens of every prompt are the same, and the target prefilled them once
    def prefill(self, prompts: list[list[int]], hidden: torch.Tensor | None, shared: int = 0) -> None: ...

    def propose(self, sequences: list[list[int]], depth: int, cfg, generator) -> Draft | None: ...

    def commit(self, verified: Verified) -> None: ...

    def select(self, rows: torch.Tensor) -> None: ...

    def take_counts(self) -> tuple[float, float]: ...

    def token_flops(self, context: int) -> float: ...
