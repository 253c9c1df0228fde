"""Drafters: who proposes the k tokens that the target verifies.

- `ModelDrafter`: a small causal LM sharing the target's tokenizer, run autoregressively k times over its
  own ragged KV cache (greedy argmax, or sampling from its own tempered / top-p distribution q).
- `EagleDrafter`: an EAGLE head (engine/eagle.py): one decoder layer over the target's own final hidden
  states, drafting feature by feature; the target's verify pass hands it fresh features every step.
- `NgramDrafter`: prompt-lookup decoding (Saxena 2023; transformers' PromptLookupCandidateGenerator):
  find the most recent earlier occurrence of the sequence's last n tokens (n = ngram_size down to 1) and
  propose the tokens that followed it. No model, no FLOPs; q is a point mass on the proposal.

The two model drafters can stop early (`ConfidenceGate`, DecodeConfig.confidence_threshold): a row stops
once the product of its drafts' q falls below the threshold, so `depth` is then the most it drafts.

All return a `Draft`: ids (B, k), q_x (B, k) the drafter's probability of each proposed token,
probs (B, k, vocab) the full q when sampling needs it, and valid (B, k) — n-gram rows may find fewer
than k tokens; the rest is padding that verification never accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .kvcache import RaggedCache
from .sampling import probs_from_logits, sample


@dataclass
class Draft:
    ids: torch.Tensor  # (B, k) long
    q_x: torch.Tensor  # (B, k) float: drafter's probability of each proposed token
    probs: torch.Tensor | None  # (B, k, vocab) float32 q, only when sampling
    valid: torch.Tensor  # (B, k) bool
    forwards: int  # draft model forward passes spent
    fed_tokens: int  # tokens fed through the draft model per row, summed over those passes

    @property
    def depth(self) -> int:
        return int(self.ids.shape[1])


def choose_tokens(logits: torch.Tensor, temperature: float, top_p: float, generator,
                  vocab: torch.Tensor | None, vocab_size: int):
    """One draft token per row from the drafter's logits (B, C), which score `vocab` (None: the whole vocabulary).

    Returns (token ids (B,), q of each chosen token (B,), q over the whole vocabulary (B, vocab_size) when
    sampling, else None). Greedy: q of the argmax at T = 1 (shown in the trace) without a full softmax.
    With a reduced vocabulary q is 0 outside it, which Algorithm 1 needs to stay exact."""
    if temperature == 0:
        local = logits.argmax(dim=-1)  # (B,)
        logits = logits.float()
        q_x = torch.exp(logits.gather(1, local[:, None]).squeeze(1) - torch.logsumexp(logits, dim=-1))
        q_full = None
    else:
        q_full = probs_from_logits(logits, temperature, top_p)
        local = sample(q_full, generator)
        q_x = q_full.gather(1, local[:, None]).squeeze(1)
        if vocab is not None:
            q_all = torch.zeros(q_full.shape[0], vocab_size, device=q_full.device)
            q_all[:, vocab] = q_full
            q_full = q_all
    return (vocab[local] if vocab is not None else local), q_x, q_full


class ConfidenceGate:
    """Collects a model drafter's tokens step by step and stops a row once it is unlikely to be accepted.

    A row keeps drafting while its running confidence, the product of q over its drafts so far (EAGLE-2's
    joint confidence, an estimate of the chance that the whole prefix is accepted), stays >= `threshold`.
    The token that takes it below is still proposed; later positions of that row are padding (valid =
    False, q = 0, so sampling verification draws the row's next token from p, as after a full
    acceptance). Drafting ends when every row has stopped. threshold 0 drafts the full depth."""

    def __init__(self, batch: int, threshold: float, device: torch.device):
        self.threshold = threshold
        self.confidence = torch.ones(batch, device=device)
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


class ModelDrafter:
    name = "model"

    def __init__(self, model: torch.nn.Module, device: torch.device, costs, pad_id: int,
                 vocab: torch.Tensor | None = None):
        self.cache = RaggedCache(model, device, costs)
        self.pad_id = pad_id
        self.lag = 0  # tokens of every sequence not yet in the draft cache (the same for all rows)
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        # FR-Spec: with a reduced vocabulary the head scores only these token ids (lean forward only).
        self.vocab = None
        if vocab is not None and self.cache.lean is not None:
            self.vocab = vocab.to(device)
            self.cache.lean.restrict_head(self.vocab)

    def prefill(self, sequences: list[list[int]]) -> None:
        """Cache all but the last token of each prompt. The prefill step then appends the target's first
        token, so the first draft step feeds two tokens: the prompt's last and the new one."""
        self.cache.prefill([s[:-1] for s in sequences], self.pad_id, logits_to_keep=1)
        self.lag = 2

    def advance(self, tokens_added: int = 1) -> None:
        """Sequences grew without drafting (a plain step): the cache falls one more token behind."""
        self.lag += tokens_added

    def propose(self, sequences: list[list[int]], depth: int, temperature: float, top_p: float, generator,
                threshold: float = 0.0) -> Draft:
        feed = torch.tensor([s[-self.lag :] for s in sequences], dtype=torch.long, device=self.cache.device)  # (B, lag)
        fed = self.lag
        gate = ConfidenceGate(len(sequences), threshold, self.cache.device)
        for i in range(depth):
            logits = self.cache.forward(feed, logits_to_keep=1)[:, -1]  # (B, vocab)
            token = gate.add(*choose_tokens(logits, temperature, top_p, generator, self.vocab, self.vocab_size))
            if gate.done or i == depth - 1:
                break
            feed = token[:, None]
            fed += 1
        return gate.draft(forwards=gate.width, fed_tokens=fed)

    def commit(self, new_seq_lengths: torch.Tensor) -> None:
        """After verification: keep all but the last 2 tokens of each (grown) sequence in the draft cache.

        The draft never saw the target's correction/bonus token and, after a full acceptance, its own last
        draft; re-feeding the last two tokens keeps every row's lag at exactly 2 (one uniform (B, 2) feed)."""
        self.cache.keep(new_seq_lengths - 2)
        self.lag = 2

    def select(self, rows: torch.Tensor) -> None:
        self.cache.select(rows)


class EagleDrafter:
    """EAGLE (Li et al. 2024): one decoder layer that drafts from the target's own final hidden states.

    Its cache holds entries i = (f_i, t_{i+1}) for every token but the last, like the target's cache.
    The target's features arrive with each verify pass and wait in `pending` until the next `propose`
    feeds them (with the tokens they preceded) in one forward; each further draft step feeds the head's
    own output g back in. After verification the draft entries are dropped and the verified features of
    the accepted tokens (plus the correction/bonus position) become the new `pending` (engine/eagle.py)."""

    name = "eagle"

    def __init__(self, runner, device: torch.device, costs, pad_id: int):
        self.runner = runner
        self.cache = RaggedCache(None, device, costs, runner=runner)
        self.pad_id = pad_id
        self.vocab = runner.vocab  # (C,) token ids the head scores
        self.vocab_size = runner.config.vocab_size
        self.pending: torch.Tensor | None = None  # (B, P, H) target features not yet in the cache
        self.pending_valid: torch.Tensor | None = None  # (B, P) bool: ragged rows leave holes
        self.drafted = 0

    def prefill(self, sequences: list[list[int]], hidden: torch.Tensor) -> None:
        """hidden (B, W, H): the target's features over the left-padded prompts (as its prefill padded them).
        Entries 0..L-2 pair f_i with t_{i+1}; f_{L-1} waits for the target's first token."""
        self.cache.prefill([s[1:] for s in sequences], self.pad_id, logits_to_keep=1, features=hidden[:, :-1])
        self.pending = hidden[:, -1:]
        self.pending_valid = torch.ones(hidden.shape[0], 1, dtype=torch.bool, device=hidden.device)

    def advance(self, hidden: torch.Tensor) -> None:
        """A plain step: its one verified feature (B, 1, H) joins the pending ones."""
        self.pending = torch.cat([self.pending, hidden], dim=1)
        self.pending_valid = torch.cat([self.pending_valid, torch.ones_like(self.pending_valid[:, :1])], dim=1)

    def propose(self, sequences: list[list[int]], depth: int, temperature: float, top_p: float, generator,
                threshold: float = 0.0) -> Draft:
        device = self.cache.device
        batch, width = self.pending_valid.shape
        counts = self.pending_valid.sum(1).tolist()
        # the tokens that follow each pending feature: each row's last `count` tokens, in its valid columns
        tokens = torch.full((batch, width), self.pad_id, dtype=torch.long)
        valid_cpu = self.pending_valid.cpu()
        for r, (seq, n) in enumerate(zip(sequences, counts)):
            tokens[r, valid_cpu[r]] = torch.tensor(seq[-n:], dtype=torch.long)
        ragged = not bool(valid_cpu.all())
        g = self.cache.forward(tokens.to(device), logits_to_keep=1, features=self.pending,
                               new_valid=self.pending_valid if ragged else None)  # (B, P, H)
        last = width - 1 - self.pending_valid.flip(1).long().argmax(1)  # (B,) each row's last real column
        feature = g[torch.arange(batch, device=device), last]  # (B, H)
        fed = width
        gate = ConfidenceGate(batch, threshold, device)
        for i in range(depth):
            logits = torch.nn.functional.linear(feature, self.runner.head)  # (B, C): over the reduced vocabulary
            token = gate.add(*choose_tokens(logits, temperature, top_p, generator, self.vocab, self.vocab_size))
            if gate.done or i == depth - 1:
                break
            feature = self.cache.forward(token[:, None], logits_to_keep=1, features=feature[:, None])[:, -1]
            fed += 1
        self.pending = self.pending_valid = None
        self.drafted = gate.width - 1  # draft entries now in the cache, dropped again in `commit`
        return gate.draft(forwards=gate.width, fed_tokens=fed)

    def commit(self, num_accepted: torch.Tensor, hidden: torch.Tensor) -> None:
        """hidden (B, k+1, H): the verify pass's features. Drop the draft entries; row r's first a_r + 1
        verified features (its accepted tokens and the one before them) become pending."""
        self.cache.keep(self.cache.lengths - self.drafted)
        self.drafted = 0
        self.pending = hidden
        self.pending_valid = torch.arange(hidden.shape[1], device=hidden.device)[None, :] <= num_accepted[:, None]

    def select(self, rows: torch.Tensor) -> None:
        self.cache.select(rows)
        if self.pending is not None:
            self.pending, self.pending_valid = self.pending[rows], self.pending_valid[rows]
        # columns that are holes in every remaining row could be trimmed; `propose` copes with them


class NgramDrafter:
    name = "ngram"

    def __init__(self, ngram_size: int, vocab_size: int, device: torch.device, stop_ids: frozenset[int] = frozenset()):
        self.ngram_size = ngram_size
        self.vocab_size = vocab_size
        self.device = device
        self.stop_ids = stop_ids  # special tokens (chat-template markers): never proposed

    @staticmethod
    def lookup(tokens: list[int], depth: int, ngram_size: int, stop_ids: frozenset[int] = frozenset()) -> list[int]:
        """Continuation (up to `depth` tokens) of the latest earlier match of the last n tokens, n = ngram_size..1.

        The continuation stops before any of `stop_ids`: copying the prompt's chat-template markers
        (<|im_end|>, <|im_start|>) would only propose tokens the target rejects."""
        length = len(tokens)
        for n in range(min(ngram_size, length - 1), 0, -1):
            pattern = tokens[-n:]
            # Search right to left so the most recent context wins; the match must end before the suffix itself.
            for start in range(length - n - 1, -1, -1):
                if tokens[start : start + n] == pattern:
                    continuation = []
                    for token in tokens[start + n : start + n + depth]:
                        if token in stop_ids:
                            break
                        continuation.append(token)
                    if continuation:
                        return continuation
        return []

    def propose(self, sequences: list[list[int]], depth: int, temperature: float, top_p: float, generator,
                threshold: float = 0.0) -> Draft:
        """`threshold` is ignored: a lookup proposal has q = 1."""
        found = [self.lookup(s, depth, self.ngram_size, self.stop_ids) for s in sequences]
        width = max((len(f) for f in found), default=0)
        batch = len(sequences)
        ids = torch.zeros(batch, width, dtype=torch.long)
        valid = torch.zeros(batch, width, dtype=torch.bool)
        for i, cont in enumerate(found):
            ids[i, : len(cont)] = torch.tensor(cont, dtype=torch.long)
            valid[i, : len(cont)] = True
        ids, valid = ids.to(self.device), valid.to(self.device)
        probs = None
        if temperature > 0:
            # q is a point mass on the proposal; padding rows get q = 0 so a resample there draws from p.
            probs = torch.zeros(batch, width, self.vocab_size, device=self.device)
            probs.scatter_(2, ids[..., None], valid[..., None].float())
        return Draft(ids=ids, q_x=valid.float(), probs=probs, valid=valid, forwards=0, fed_tokens=0)
