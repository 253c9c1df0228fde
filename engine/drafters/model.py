"""`ModelDrafter`: a small causal LM sharing the target's tokenizer, run autoregressively k times over its
own ragged KV cache (greedy argmax, or sampling from its own tempered / top-p distribution q).

With a reduced vocabulary (FR-Spec, `draft_vocab.json` beside the draft) its head scores only those
token ids; q is 0 outside them, which keeps Algorithm 1 exact.
"""

from __future__ import annotations

import torch

from ..config import ConfigError
from ..static_cache import make_cache
from .base import ConfidenceGate, Draft, Verified, choose_tokens


class ModelDrafter:
    kind = "model"
    target_features = False

    @classmethod
    def available(cls, pair) -> bool:
        return pair.draft is not None

    @classmethod
    def label(cls, pair, cfg=None) -> str:
        return pair.draft_name or "draft model"

    @classmethod
    def params(cls, pair) -> int:
        return sum(p.numel() for p in pair.draft.parameters()) if pair.draft is not None else 0

    @classmethod
    def build(cls, pair, cfg, pad_id: int) -> ModelDrafter:
        if pair.draft is None:
            raise ConfigError("drafter='model' needs a draft model, but this pair has none: use drafter='ngram'")
        return cls(pair.draft, pair.device, pair.draft_costs, pad_id, vocab=pair.draft_vocab, cfg=cfg)

    def __init__(self, model: torch.nn.Module, device: torch.device, costs, pad_id: int,
                 vocab: torch.Tensor | None = None, cfg=None):
        self.cache = make_cache(model, device, costs, cfg)  # static buffers / CUDA graphs as cfg.cuda_graphs says
        self.pad_id = pad_id
        self.lag = 0  # tokens of every sequence not yet in the draft cache (the same for all rows)
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        # FR-Spec: with a reduced vocabulary the head scores only these token ids (lean forward only).
        self.vocab = None
        if vocab is not None and self.cache.lean is not None:
            self.vocab = vocab.to(device)
            self.cache.lean.restrict_head(self.vocab)

    def prefill(self, prompts: list[list[int]], hidden: torch.Tensor | None = None) -> None:
        """Cache all but the last token of each prompt. The prefill step then appends the target's first
        token, so the first draft step feeds two tokens: the prompt's last and the new one."""
        self.cache.prefill([s[:-1] for s in prompts], self.pad_id, logits_to_keep=1)
        self.lag = 2

    def propose(self, sequences: list[list[int]], depth: int, cfg, generator) -> Draft:
        feed = torch.tensor([s[-self.lag :] for s in sequences], dtype=torch.long, device=self.cache.device)  # (B, lag)
        fed = self.lag
        gate = ConfidenceGate(len(sequences), cfg.confidence_threshold, self.cache.device)
        for i in range(depth):
            logits = self.cache.forward(feed, logits_to_keep=1)[:, -1]  # (B, vocab)
            token = gate.add(*choose_tokens(logits, cfg.temperature, cfg.top_p, generator, self.vocab, self.vocab_size))
            if gate.done or i == depth - 1:
                break
            feed = token[:, None]
            fed += 1
        return gate.draft(forwards=gate.width, fed_tokens=fed)

    def commit(self, verified: Verified) -> None:
        """After a plain step the cache falls one more token behind. After verification it keeps all but the
        last 2 tokens of each (grown) sequence: the draft never saw the target's correction/bonus token and,
        after a full acceptance, its own last draft; re-feeding the last two keeps every row's lag at exactly
        2 (one uniform (B, 2) feed)."""
        if verified.draft is None:
            self.lag += 1
            return
        self.cache.keep(verified.new_lengths - 2)
        self.lag = 2

    def select(self, rows: torch.Tensor) -> None:
        self.cache.select(rows)

    def take_counts(self) -> tuple[float, float]:
        return self.cache.take_counts()

    def token_flops(self, context: int) -> float:
        return self.cache.costs.token_flops(context)
