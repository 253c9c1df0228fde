"""`LookupEagleDrafter`: prompt lookup where the text repeats itself, the EAGLE head everywhere else.

The two drafters win on different text: a lookup proposes a repeated span for free and is accepted often where an
answer copies its prompt (summaries, answers over passages, edits), and proposes nothing useful elsewhere; the head
drafts every token from the target's own features at the cost of its passes. Each step, every row first looks up
the continuation of its last tokens (NgramDrafter.lookup) and keeps it where the match is at least `MIN_MATCH` tokens
long (one shared token is a coincidence too often). When every row found one, the head does not run this step (no
drafter pass at all); otherwise the head drafts every row and each row that found one takes its lookup instead.
The head still takes in every verified token's features (EagleDrafter.absorb), so it drafts from where the text is
whichever drafter proposed last. Greedy output stays the target's own: whose drafts they were never changes what
verification accepts. The same idea as suffix decoding beside a model speculator (Oliaro et al., SuffixDecoding,
2024; Arctic Inference), with a lookup in place of the suffix tree.
"""

from __future__ import annotations

import torch

from engine.drafters.base import Draft, Verified
from engine.drafters.eagle import EagleDrafter
from engine.drafters.ngram import NgramDrafter
from engine.options import ConfigError

MIN_MATCH = 2  # a row's lookup is used only where its last MIN_MATCH tokens or more occurred before


class LookupEagleDrafter:
    kind = "ngram_eagle"
    display = "n-gram, else EAGLE"
    about = "prompt lookup where the text repeats itself, else the EAGLE head (each row each step takes one of the two)"
    loads = EagleDrafter.loads  # the head's weights: the lookup needs none
    branches = False  # chains only: a lookup has no distribution to branch on
    confident = True  # the head's rows stop early below confidence_threshold; a lookup's proposal has q = 1
    card = EagleDrafter.kind  # goodput's prior: the head's held-out acceptance (chat, where lookups rarely fire)

    @classmethod
    def available(cls, pair) -> bool:
        return EagleDrafter.available(pair)

    @classmethod
    def label(cls, pair, cfg=None) -> str:
        return f"n-gram lookup, else {EagleDrafter.label(pair, cfg)}"

    @classmethod
    def params(cls, pair) -> int:
        return EagleDrafter.params(pair)

    @classmethod
    def build(cls, pair, cfg, pad_id: int, backend=None) -> LookupEagleDrafter:
        if not EagleDrafter.available(pair):
            raise ConfigError(f"drafter={cls.kind!r} needs an EAGLE head for this target, but none is loaded: use drafter='ngram'")
        return cls(EagleDrafter.build(pair, cfg, pad_id, backend), NgramDrafter.build(pair, cfg, pad_id, backend))

    def __init__(self, head: EagleDrafter, lookup: NgramDrafter):
        self.head, self.lookup = head, lookup
        self.target_features = head.target_features
        self.head_drafted = False  # this step's draft ran the head (its entries to drop, its FLOPs spent)

    def prefill(self, prompts: list[list[int]], hidden: torch.Tensor, shared: int = 0) -> None:
        self.head.prefill(prompts, hidden, shared)

    def found(self, sequences: list[list[int]], depth: int) -> list[list[int]]:
        """Each row's lookup continuation (up to `depth` tokens) from a match of at least MIN_MATCH tokens, else []."""
        lk = self.lookup
        return [NgramDrafter.lookup(s, depth, max(lk.ngram_size, MIN_MATCH), lk.stop_ids, shortest=MIN_MATCH) for s in sequences]

    def propose(self, sequences: list[list[int]], depth: int, cfg, generator) -> Draft:
        found = self.found(sequences, depth)
        if all(found):  # every row copies: a draft without a single drafter pass
            self.head_drafted = False
            return self.lookup.draft_of(found, cfg)
        self.head_drafted = True
        draft = self.head.propose(sequences, depth, cfg, generator)
        return substitute(draft, found, cfg.temperature > 0, self.lookup.vocab_size) if any(found) else draft

    def commit(self, verified: Verified) -> None:
        if verified.draft is None or self.head_drafted:
            self.head.commit(verified)  # a plain step, or a draft the head made: its own bookkeeping
        else:
            self.head.absorb(verified)  # a lookup's draft: the head only takes in what the target verified
        self.head_drafted = False

    def select(self, rows: torch.Tensor) -> None:
        self.head.select(rows)

    def take_counts(self) -> tuple[float, float]:
        return self.head.take_counts()

    def token_flops(self, context: int) -> float:
        """A rejected draft's drafter FLOPs: the head's where it drafted this step, none for a lookup's."""
        return self.head.token_flops(context) if self.head_drafted else 0.0


def substitute(draft: Draft, found: list[list[int]], sampling: bool, vocab_size: int) -> Draft:
    """The head's chain with each row that found a lookup continuation taking it instead (q = 1, a point mass when
    sampling), widened to the longer of the two; the rest of a row is padding (valid = False, q = 0)."""
    if sampling and draft.probs is None:
        raise ValueError("a sampled draft carries its probabilities")
    width = max(draft.nodes, max(len(f) for f in found))
    pad = width - draft.nodes
    ids = torch.nn.functional.pad(draft.ids, (0, pad))
    q_x = torch.nn.functional.pad(draft.q_x, (0, pad))
    valid = torch.nn.functional.pad(draft.valid, (0, pad))
    probs = torch.nn.functional.pad(draft.probs, (0, 0, 0, pad)) if draft.probs is not None else None
    for r, cont in enumerate(found):
        if not cont:
            continue
        n = len(cont)
        ids[r] = 0
        ids[r, :n] = torch.tensor(cont, dtype=torch.long, device=ids.device)
        valid[r], q_x[r] = False, 0.0
        valid[r, :n], q_x[r, :n] = True, 1.0
        if sampling:
            probs[r] = 0.0
            probs[r, torch.arange(n), ids[r, :n]] = 1.0
    return Draft(ids=ids, q_x=q_x, probs=probs, valid=valid, forwards=draft.forwards, fed_tokens=draft.fed_tokens)
