"""`ModelDrafter`: a small causal LM sharing the target's tokenizer, run autoregressively k times over its
own ragged KV cache (greedy argmax, or sampling from its own tempered / top-p distribution q).

With a reduced vocabulary (FR-Spec, `draft_vocab.json` beside the draft) its head scores only those
token ids; q is 0 outside them, which keeps Algorithm 1 exact. With `tree_nodes` it drafts an EAGLE-2
tree instead (engine/drafters/tree.py), its tree entries attending through a tree mask (lean forward only).
"""

from __future__ import annotations

import torch

from engine.drafters.base import ConfidenceGate, Draft, Verified, choose_tokens
from engine.drafters.tree import grow_tree
from engine.model.static_cache import make_cache
from engine.options import ConfigError


class ModelDrafter:
    kind = "model"
    display = "draft model"
    about = "a small LM sharing the target's tokenizer"
    loads = "draft"
    branches = True
    confident = True
    target_features = False

    @classmethod
    def available(cls, pair) -> bool:
        return cls.loads in pair.loaded

    @classmethod
    def label(cls, pair, cfg=None) -> str:
        return pair.loaded[cls.loads].name if cls.loads in pair.loaded else cls.display

    @classmethod
    def params(cls, pair) -> int:
        return sum(p.numel() for p in pair.weights(cls.loads).parameters()) if cls.loads in pair.loaded else 0

    @classmethod
    def build(cls, pair, cfg, pad_id: int, backend=None) -> ModelDrafter:
        if cls.loads not in pair.loaded:
            raise ConfigError("drafter='model' needs a draft model, but this pair has none: use drafter='ngram'")
        draft = pair.loaded[cls.loads]
        drafter = cls(draft.module, pair.device, draft.costs, pad_id, vocab=draft.vocab, cfg=cfg, backend=backend)
        if cfg.tree and drafter.cache.lean is None:
            raise ConfigError(
                "tree drafting with drafter='model' needs the lean forward for the draft (a plain Llama draft, not 'transformers')"
            )
        return drafter

    def __init__(
        self, model: torch.nn.Module, device: torch.device, costs, pad_id: int, vocab: torch.Tensor | None = None, cfg=None, backend=None
    ):
        self.cache = make_cache(model, device, costs, cfg, backend=backend)  # the run's backend (engine/model/backend.py)
        self.pad_id = pad_id
        self.lag = 0  # tokens of every sequence not yet in the draft cache (the same for all rows)
        self.lags: torch.Tensor | None = None  # (B,) after a tree step: each row's own count
        self.drafted = 0  # tree entries in the cache
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        # FR-Spec: with a reduced vocabulary the head scores only these token ids (lean forward only).
        self.vocab = None
        if vocab is not None and self.cache.lean is not None:
            self.vocab = vocab.to(device)
            self.cache.lean.restrict_head(self.vocab)

    def prefill(self, prompts: list[list[int]], hidden: torch.Tensor | None = None, shared: int = 0) -> None:
        """Cache all but the last token of each prompt (a prefix all rows share, once). The prefill step then appends
        the target's first token, so the first draft step feeds two tokens: the prompt's last and the new one."""
        self.cache.prefill([s[:-1] for s in prompts], self.pad_id, logits_to_keep=1, shared=shared)
        self.lag = 2

    def propose(self, sequences: list[list[int]], depth: int, cfg, generator) -> Draft:
        logits, fed = self.catch_up(sequences)  # (B, C): after each row's last token
        if cfg.tree:
            return self.propose_tree(logits, depth, cfg, fed)
        gate = ConfidenceGate(len(sequences), cfg.confidence_threshold, self.cache.device)
        for i in range(depth):
            token = gate.add(*choose_tokens(logits, cfg.temperature, cfg.top_p, generator, self.vocab, self.vocab_size, self.cache.backend))
            if gate.done or i == depth - 1:
                break
            logits = self.cache.forward(token[:, None], logits_to_keep=1)[:, -1]  # (B, C)
            fed += 1
        return gate.draft(forwards=gate.width, fed_tokens=fed)

    def catch_up(self, sequences: list[list[int]]) -> tuple[torch.Tensor, int]:
        """Feed the tokens the cache has not seen yet: every row's last `lag` (one uniform feed), or after a
        tree step each row's own `lags[r]` (ragged: holes before the shorter rows' tokens). Returns the logits
        after each row's last token (B, C) and the tokens fed per row."""
        if self.lags is None:
            feed = torch.tensor([s[-self.lag :] for s in sequences], dtype=torch.long, device=self.cache.device)  # (B, lag)
            return self.cache.forward(feed, logits_to_keep=1)[:, -1], self.lag
        lags = self.lags.tolist()
        width = max(lags)
        tokens = torch.full((len(sequences), width), self.pad_id, dtype=torch.long)
        for r, (seq, n) in enumerate(zip(sequences, lags)):
            tokens[r, width - n :] = torch.tensor(seq[-n:], dtype=torch.long)
        valid = torch.arange(width, device=self.cache.device)[None, :] >= (width - self.lags)[:, None]  # (B, W)
        ragged = not bool(valid.all())
        logits = self.cache.forward(tokens.to(self.cache.device), logits_to_keep=1, new_valid=valid if ragged else None)
        self.lags = None
        return logits[:, -1], width

    def propose_tree(self, root_logits: torch.Tensor, depth: int, cfg, fed: int) -> Draft:
        """EAGLE-2's dynamic tree (engine/drafters/tree.py) from the draft model's logits after the root."""

        def feed(tokens, positions, attend, _):
            return self.cache.forward_tree(tokens, positions, attend), None  # logits (B, k, C)

        tree = grow_tree(self.cache, root_logits, depth, cfg, self.vocab, feed)
        self.drafted = cfg.tree_topk * (depth - 1)  # tree entries in the cache, dropped in `commit`
        return Draft(
            ids=tree.tokens,
            q_x=tree.q,
            probs=None,
            valid=torch.ones_like(tree.tokens, dtype=torch.bool),
            forwards=depth,
            fed_tokens=fed + self.drafted,
            tree=tree,
        )

    def commit(self, verified: Verified) -> None:
        """After a plain step the cache falls one more token behind. After a chain's verification it keeps all
        but the last 2 tokens of each (grown) sequence: the draft never saw the target's correction/bonus token and,
        after a full acceptance, its own last draft; re-feeding the last two keeps every row's lag at exactly
        2 (one uniform (B, 2) feed). After a tree the tree entries go, and each row lags by the tokens the
        step added plus one (its own count: `propose_after_tree` feeds them ragged)."""
        if verified.draft is None:
            if self.lags is not None:
                self.lags = self.lags + 1
            else:
                self.lag += 1
            return
        if verified.draft.tree is not None:
            self.cache.keep(self.cache.lengths - self.drafted)  # the cache is each sequence before this step
            self.lags = verified.new_lengths - self.cache.lengths  # (B,) >= 2
            self.drafted = 0
            return
        self.cache.keep(verified.new_lengths - 2)
        self.lag = 2

    def select(self, rows: torch.Tensor) -> None:
        self.cache.select(rows)
        if self.lags is not None:
            self.lags = self.lags[rows]

    def take_counts(self) -> tuple[float, float]:
        return self.cache.take_counts()

    def token_flops(self, context: int) -> float:
        return self.cache.costs.token_flops(context)
