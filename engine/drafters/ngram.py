"""`NgramDrafter`: prompt-lookup decoding (Saxena 2023; transformers' PromptLookupCandidateGenerator).

Find the most recent earlier occurrence of the sequence's last n tokens (n = ngram_size down to 1) and
propose the tokens that followed it. No model, no FLOPs; q is a point mass on the proposal. Rows that
find fewer than k tokens are padded (valid = False); verification never accepts padding.
"""

from __future__ import annotations

import numpy
import torch

from engine.drafters.base import Draft, Verified


class NgramDrafter:
    kind = "ngram"
    display = "n-gram"
    about = "propose the continuation of the latest repeated n-gram (prompt lookup, no model)"
    loads = None
    branches = False
    confident = False  # a lookup proposal has q = 1
    target_features = False

    @classmethod
    def available(cls, pair) -> bool:
        return True  # no model needed

    @classmethod
    def label(cls, pair, cfg=None) -> str:
        return "n-gram prompt lookup" + (f" (n <= {cfg.ngram_size})" if cfg is not None else "")

    @classmethod
    def params(cls, pair) -> int:
        return 0

    @classmethod
    def build(cls, pair, cfg, pad_id: int, backend=None) -> NgramDrafter:
        vocab = pair.target.get_output_embeddings().weight.shape[0]
        special = frozenset(getattr(pair.tokenizer, "all_special_ids", []) or [])
        return cls(cfg.ngram_size, vocab, pair.device, special - pair.eos_ids)

    def __init__(self, ngram_size: int, vocab_size: int, device: torch.device, stop_ids: frozenset[int] = frozenset()):
        self.ngram_size = ngram_size
        self.vocab_size = vocab_size
        self.device = device
        self.stop_ids = stop_ids  # special tokens (chat-template markers): never proposed

    @staticmethod
    def lookup(tokens: list[int], depth: int, ngram_size: int, stop_ids: frozenset[int] = frozenset(), shortest: int = 1) -> list[int]:
        """Continuation (up to `depth` tokens) of the latest earlier match of the last n tokens, n = ngram_size..shortest.

        The continuation stops before any of `stop_ids`: copying the prompt's chat-template markers
        (<|im_end|>, <|im_start|>) would only propose tokens the target rejects. The search is one vector comparison per
        pattern token over the whole sequence, where a Python loop over a long prompt's tokens cost several times
        more, paid by every row at every draft (docs/journal.md, "a lookup's price on long prompts")."""
        length = len(tokens)
        if length < 2:
            return []
        seq = numpy.asarray(tokens, dtype=numpy.int64)
        for n in range(min(ngram_size, length - 1), max(shortest, 1) - 1, -1):
            # starts 0..length-n-1: a match ends before the sequence's last token, so at least one token follows it
            hit = seq[: length - n] == seq[length - n]
            for j in range(1, n):
                hit &= seq[j : length - n + j] == seq[length - n + j]
            for start in numpy.flatnonzero(hit)[::-1].tolist():  # the most recent context wins
                if continuation := NgramDrafter.following(tokens, start + n, depth, stop_ids):
                    return continuation
        return []

    @staticmethod
    def following(tokens: list[int], at: int, depth: int, stop_ids: frozenset[int]) -> list[int]:
        """Up to `depth` tokens from `at` on, stopping before any of `stop_ids`."""
        out = []
        for token in tokens[at : at + depth]:
            if token in stop_ids:
                break
            out.append(token)
        return out

    def prefill(self, prompts: list[list[int]], hidden: torch.Tensor | None = None, shared: int = 0) -> None:
        """Nothing to cache: the lookup reads each sequence's tokens afresh."""

    def propose(self, sequences: list[list[int]], depth: int, cfg, generator) -> Draft | None:
        """None when no row found a match. cfg.confidence_threshold is ignored: a lookup proposal has q = 1."""
        found = [self.lookup(s, depth, self.ngram_size, self.stop_ids) for s in sequences]
        return self.draft_of(found, cfg) if any(found) else None

    def draft_of(self, found: list[list[int]], cfg) -> Draft:
        """The draft of each row's continuation (`found`, at least one non-empty), shorter rows padded."""
        width, batch = max(len(f) for f in found), len(found)
        ids = torch.zeros(batch, width, dtype=torch.long)
        valid = torch.zeros(batch, width, dtype=torch.bool)
        for i, cont in enumerate(found):
            ids[i, : len(cont)] = torch.tensor(cont, dtype=torch.long)
            valid[i, : len(cont)] = True
        ids, valid = ids.to(self.device), valid.to(self.device)
        probs = None
        if cfg.temperature > 0:
            # q is a point mass on the proposal; padding rows get q = 0 so a resample there draws from p.
            probs = torch.zeros(batch, width, self.vocab_size, device=self.device)
            probs.scatter_(2, ids[..., None], valid[..., None].float())
        return Draft(ids=ids, q_x=valid.float(), probs=probs, valid=valid, forwards=0, fed_tokens=0)

    def commit(self, verified: Verified) -> None:
        """Nothing to roll back."""

    def select(self, rows: torch.Tensor) -> None:
        """No per-row state."""

    def take_counts(self) -> tuple[float, float]:
        return 0.0, 0.0

    def token_flops(self, context: int) -> float:
        return 0.0
