"""Drafting with the EAGLE head (Li et al. 2024): the drafter that feeds the target's verified features to the
head and proposes a chain or a draft tree from its outputs. The head itself (what it computes, loading a saved
one, running it over a KV cache) is model code: engine/model/eagle_head.py."""

from __future__ import annotations

import torch

from engine.drafters.base import ConfidenceGate, Draft, Verified, choose_tokens
from engine.drafters.tree import grow_tree
from engine.model.static_cache import make_cache
from engine.options import ConfigError

# The head reads at most WINDOW of a prompt's entries: the first SINKS and the latest (a StreamingLLM cache, as
# MagicDec's drafts use). It was trained on sequences of 256 tokens (training/eagle.py --max-len), so a longer cache
# is one it never saw; and the target's features it reads already carry the whole context.
WINDOW, SINKS = 256, 4


def windowed(tokens: list[list[int]], features: torch.Tensor, shared: int = 0, window: int = WINDOW, sinks: int = SINKS):
    """A prompt's entries (tokens per row; features (B, W, H) left-padded as the target's prefill padded them) cut to
    at most `window` per row: the first `sinks` and the latest. Where the rows share their first `shared` entries and
    their own parts fit beside the sinks, the cut falls inside the shared part, so the cut rows still share their
    first entries (a shared prefill, a warm prefix). Returns (tokens, features, dropped (B,), shared)."""
    if max(len(t) for t in tokens) <= window:
        return tokens, features, torch.zeros(len(tokens), dtype=torch.long), shared
    own = max(len(t) for t in tokens) - shared  # the longest row's entries past the shared part
    if shared > 0 and sinks + own < window:  # keep: the sinks, the shared part's latest `tail`, each row's own part
        tail = window - sinks - own
        keep = [[*range(sinks), *range(shared - tail, len(t))] for t in tokens]
        shared = sinks + tail
    else:
        keep = [list(range(len(t))) if len(t) <= window else [*range(sinks), *range(len(t) - window + sinks, len(t))] for t in tokens]
        shared = 0
    width, kept = features.shape[1], max(len(k) for k in keep)
    index = torch.zeros(len(tokens), kept, dtype=torch.long)
    for r, (t, k) in enumerate(zip(tokens, keep)):
        index[r, kept - len(k) :] = torch.tensor(k, dtype=torch.long) + width - len(t)  # left padding: column 0's entry, masked
    gathered = features.gather(1, index.to(features.device)[..., None].expand(-1, -1, features.shape[-1]))
    dropped = torch.tensor([len(t) - len(k) for t, k in zip(tokens, keep)], dtype=torch.long)
    return [[t[i] for i in k] for t, k in zip(tokens, keep)], gathered, dropped, shared


class EagleDrafter:
    """EAGLE (Li et al. 2024): one decoder layer that drafts from the target's own final hidden states.

    Its cache holds entries i = (f_i, t_{i+1}) for every token but the last, like the target's cache.
    The target's features arrive with each verify pass and wait in `pending` until the next `propose`
    feeds them (with the tokens they preceded) in one forward; each further draft step feeds the head's
    own output g back in. After verification the draft entries are dropped and the verified features of
    the accepted tokens (plus the correction/bonus position) become the new `pending` (training/eagle.py trains it)."""

    kind = "eagle"
    display = "EAGLE head"
    about = "one layer that drafts from the target's own last hidden states (EAGLE, Li et al. 2024)"
    loads = "eagle"
    branches = True
    confident = True

    @classmethod
    def available(cls, pair) -> bool:
        return cls.loads in pair.loaded

    @classmethod
    def label(cls, pair, cfg=None) -> str:
        return pair.loaded[cls.loads].name if cls.loads in pair.loaded else cls.display

    @classmethod
    def params(cls, pair) -> int:  # its own weights: it borrows the target's embedding and head
        return pair.weights(cls.loads).params if cls.loads in pair.loaded else 0

    @classmethod
    def build(cls, pair, cfg, pad_id: int, backend=None) -> EagleDrafter:
        if cls.loads not in pair.loaded:
            raise ConfigError("drafter='eagle' needs an EAGLE head for this target, but none is loaded: use drafter='model' or 'ngram'")
        head = pair.loaded[cls.loads]
        return cls(head.module, pair.device, head.costs, pad_id, cfg=cfg, backend=backend)

    def __init__(self, runner, device: torch.device, costs, pad_id: int, cfg=None, backend=None):
        self.runner = runner
        self.cache = make_cache(None, device, costs, cfg, runner=runner, backend=backend)  # the run's backend (engine/model/backend.py)
        self.matrices = runner.matrices(runner.lean.prepared(), self.cache.backend)  # what `project` multiplies by, per run
        self.pad_id = pad_id
        self.vocab = runner.vocab  # (C,) token ids the head scores
        self.vocab_size = runner.config.vocab_size
        self.pending: torch.Tensor | None = None  # (B, P, H) target features not yet in the cache
        self.pending_valid: torch.Tensor | None = None  # (B, P) bool: ragged rows leave holes
        self.pending_full = False  # known on the host: every pending feature real (False: `pending_valid` says)
        self.later: list[torch.Tensor] = []  # (B, 1, H) features of plain steps, joined to `pending` when drafting
        self.drafted = 0
        self.dropped = torch.zeros(0, dtype=torch.long, device=device)  # (B,) entries of each prompt the window left out
        # the target hands over its final features, and for a head with EAGLE-3 fusion some earlier layers' too
        self.target_features = runner.feature_layers or True

    def prefill(self, sequences: list[list[int]], hidden: torch.Tensor, shared: int = 0) -> None:
        """hidden (B, W, H): the target's features over the left-padded prompts (as its prefill padded them); shared:
        the prompts' common prefix, whose features the target computed once (the entries of all but its last token are
        read in once, as a shared prefix of the cache).
        Entries 0..L-2 pair f_i with t_{i+1}; f_{L-1} waits for the target's first token. The entries (the window of
        them, `windowed`) are read into the cache here, with the target's prefill, as the draft model reads its prompts
        and as vLLM and SGLang prefill a draft head: reading a prompt is prompt processing. Read at the first draft
        instead, it was priced as decoding, 1-4 plain steps of a short run at batch 16 over long prompts, and goodput
        paid it at every exploring draft (docs/engine.md, "goodput at a long context")."""
        shared = max(0, shared - 1)  # entry i pairs f_i with t_(i+1): the prefix's entries but its last
        tokens, features, dropped, shared = windowed([s[1:] for s in sequences], hidden[:, :-1], shared, WINDOW, SINKS)
        self.dropped = dropped.to(self.cache.device)
        self.cache.prefill(tokens, self.pad_id, logits_to_keep=1, features=features, shared=shared)
        self.pending = hidden[:, -1:]
        self.pending_valid = torch.ones(hidden.shape[0], 1, dtype=torch.bool, device=hidden.device)
        self.pending_full = True

    def entries(self) -> torch.Tensor:
        """(B,) the target's tokens this head has taken in per row: entries in its cache (and those its window left
        out) plus the features waiting to be fed. Equals the target cache's lengths between steps (tests)."""
        return self.cache.lengths + self.dropped + self.pending_valid.long().sum(1) + len(self.later)

    def _catch_up(self) -> None:
        """Before drafting: the plain steps' features into `pending`."""
        if self.later:
            self.pending = torch.cat([self.pending, *self.later], dim=1)
            ones = torch.ones(self.pending_valid.shape[0], len(self.later), dtype=torch.bool, device=self.pending_valid.device)
            self.pending_valid = torch.cat([self.pending_valid, ones], dim=1)
            self.later = []

    def propose(self, sequences: list[list[int]], depth: int, cfg, generator) -> Draft:
        self._catch_up()
        device = self.cache.device
        batch, width = self.pending_valid.shape
        ragged = not self.pending_full and not bool(self.pending_valid.all())
        # the tokens that follow each pending feature: each row's last `count` tokens, in its valid columns
        if not ragged:  # each row's last `width` tokens, in one op
            tokens = torch.tensor([seq[-width:] for seq in sequences], dtype=torch.long)
        else:
            valid_cpu = self.pending_valid.cpu()
            tokens = torch.full((batch, width), self.pad_id, dtype=torch.long)
            for r, (seq, n) in enumerate(zip(sequences, valid_cpu.sum(1).tolist())):
                tokens[r, valid_cpu[r]] = torch.tensor(seq[-n:], dtype=torch.long)
        g = self.cache.forward(
            tokens.to(device), logits_to_keep=1, features=self.pending, new_valid=self.pending_valid if ragged else None
        )  # (B, P, H)
        if not ragged:
            feature = g[:, -1].contiguous()  # (B, H): every row's last column is real
        else:
            last = width - 1 - self.pending_valid.flip(1).long().argmax(1)  # (B,) each row's last real column
            feature = g[torch.arange(batch, device=device), last]  # (B, H)
        fed = width
        if cfg.tree:
            return self.propose_tree(feature, depth, cfg, fed)
        gate = ConfidenceGate(batch, cfg.confidence_threshold, device)
        fed_back = feature[:, None]  # (B, 1, H): the guess the next entry pairs with its token
        for i in range(depth):
            logits = self.runner.project(feature, self.cache.backend, self.matrices)  # (B, C): over the reduced vocabulary
            token = gate.add(*choose_tokens(logits, cfg.temperature, cfg.top_p, generator, self.vocab, self.vocab_size, self.cache.backend))
            if gate.done or i == depth - 1:
                break
            fed_back = self.cache.forward(token[:, None], logits_to_keep=1, features=fed_back)  # (B, 1, H)
            feature = fed_back[:, -1]
            fed += 1
        self.pending = self.pending_valid = None
        self.drafted = gate.width - 1  # draft entries now in the cache, dropped again in `commit`
        return gate.draft(forwards=gate.width, fed_tokens=fed)

    def propose_tree(self, feature: torch.Tensor, depth: int, cfg, fed: int) -> Draft:
        """EAGLE-2's dynamic tree (engine/drafters/tree.py) from the root's guessed feature (B, H): each
        frontier node is a head entry (its token, its parent's guessed feature g); its children are scored
        from its own g. The tree entries are dropped again in `commit`, like a chain's."""
        k = cfg.tree_topk

        def feed(tokens, positions, attend, parent_g):
            g = self.cache.forward_tree(tokens, positions, attend, features=parent_g)  # (B, k, H)
            return self.runner.project(g, self.cache.backend, self.matrices), g  # logits (B, k, C) over the reduced vocabulary

        root_g = feature[:, None].expand(feature.shape[0], k, feature.shape[-1])  # (B, k, H)
        tree = grow_tree(self.cache, self.runner.project(feature, self.cache.backend, self.matrices), depth, cfg, self.vocab, feed, root_g)
        self.pending = self.pending_valid = None
        self.drafted = k * (depth - 1)  # tree entries now in the cache, dropped again in `commit`
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
        """verified.hidden (B, k+1, H): the target pass's features. After a plain step its one feature joins
        the pending ones. After verification the draft entries are dropped, and row r's first a_r + 1
        verified features (its accepted tokens and the one before them) become pending."""
        hidden = verified.hidden
        if verified.draft is None:  # joined at the next draft: one concatenation, not one per plain step
            self.later.append(hidden)
            return
        self.cache.drop_last(self.drafted)  # the draft entries are the last columns, all real
        self.drafted = 0
        if hidden.shape[0] == 1:  # one row: only its verified features wait, so no hole enters the head's cache
            n = int(verified.num_accepted[0]) + 1
            self.pending, self.pending_valid = hidden[:, :n], torch.ones(1, n, dtype=torch.bool, device=hidden.device)
            self.pending_full = True
            return
        self.pending, self.pending_full = hidden, False
        self.pending_valid = torch.arange(hidden.shape[1], device=hidden.device)[None, :] <= verified.num_accepted[:, None]

    def absorb(self, verified: Verified) -> None:
        """A step another drafter proposed (engine/drafters/hybrid.py): the head has no entries to drop; row r's first
        a_r + 1 verified features join the pending ones, after those still waiting, as if it had drafted."""
        self._catch_up()
        hidden, accepted = verified.hidden, verified.num_accepted
        if hidden.shape[0] == 1:  # one row: only its verified features, so no hole enters the head's cache
            n = int(accepted[0]) + 1
            new, valid = hidden[:, :n], torch.ones(1, n, dtype=torch.bool, device=hidden.device)
        else:
            new, valid = hidden, torch.arange(hidden.shape[1], device=hidden.device)[None, :] <= accepted[:, None]
            self.pending_full = False
        if self.pending is None:
            self.pending_full = hidden.shape[0] == 1
            self.pending, self.pending_valid = new, valid
        else:
            self.pending, self.pending_valid = torch.cat([self.pending, new], 1), torch.cat([self.pending_valid, valid], 1)

    def select(self, rows: torch.Tensor) -> None:
        self.later = [h[rows] for h in self.later]
        self.cache.select(rows)
        self.dropped = self.dropped[rows]
        if self.pending is not None:
            self.pending, self.pending_valid = self.pending[rows], self.pending_valid[rows]
        # columns that are holes in every remaining row could be trimmed; `propose` copes with them

    def take_counts(self) -> tuple[float, float]:
        return self.cache.take_counts()

    def token_flops(self, context: int) -> float:
        return self.cache.costs.token_flops(context)
