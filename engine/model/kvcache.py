"""RaggedCache: one model's KV cache for a ragged batch, with per-sequence rollback.

Layout: a transformers `DynamicCache` of shape (B, kv_heads, W, head_dim) per layer, plus `valid`
(B, W), which marks each row's real columns; the attention mask is exactly `valid`. Prompts are
left-padded, and every forward appends the same number of new columns to all rows (each row feeds real
tokens), so columns stay in time order. After verification each row keeps its own number of tokens
(`keep`): a row's rejected tokens simply become masked holes. Nothing is copied, and nothing is ever
truncated to another row's acceptance. Columns that are holes in every row are cropped (at batch 1 this
is always the case: a plain crop, no mask at all), and when holes grow past `COMPACT_SLACK` columns a
per-row gather packs each row to the right again, so attention never reads much dead space. Position ids
are per row (`lengths`), so RoPE sees the true positions whatever the padding.

A shared prefix (prefix caching, as vLLM and SGLang do it): rows whose prompts begin with the same tokens (one
document, many questions) prefill that prefix once, at batch 1, copy its keys and values into every row, and then
feed each row's own suffix left-padded in one pass (its padding holes from the start). Row b then holds the prefix
in columns 0..P-1, holes, and its suffix: the same entries at the same positions as a prefill of its whole prompt.
"""

from __future__ import annotations

import numpy
import torch
from transformers import DynamicCache

from engine.costs import ModelCosts
from engine.model.forward import CostCounter, make_forward
from engine.model.prefix_cache import WarmPrefix, WarmPrompts, cloned, digest

# Hole columns (beyond the longest row) tolerated before a compaction: attention over a few masked
# columns is cheaper than copying every layer's keys and values after every step.
COMPACT_SLACK = 32
# The shortest common prefix worth a pass of its own: below it the extra pass (every weight read once more) costs
# about what prefilling the prefix in every row costs (a chat template's header stays under it).
SHARED_PREFIX_MIN = 64


def shared_prefix(token_lists: list[list[int]], minimum: int = SHARED_PREFIX_MIN) -> int:
    """Tokens every row's prompt begins with, when there are several rows and at least `minimum` such tokens; else 0.
    Never a whole prompt: every row keeps at least one token of its own to feed after the prefix."""
    if len(token_lists) < 2:
        return 0
    first, shortest = token_lists[0], min(len(t) for t in token_lists)
    n = 0
    while n < shortest - 1 and all(t[n] == first[n] for t in token_lists):
        n += 1
    return n if n >= minimum else 0


def joined_hidden(prefix: torch.Tensor, suffix: torch.Tensor, own: torch.Tensor) -> torch.Tensor:
    """A shared prefill's hidden states laid out as a prefill of the whole prompts lays them out: prefix (1, P, F)
    and suffixes (B, S, F), row b's own[b] suffix tokens in its last columns -> (B, P + S, F), each row's prompt
    right-aligned (its padding columns hold the prefix's first state: masked wherever they are read)."""
    batch, longest = suffix.shape[:2]
    shared = prefix.shape[1]
    joined = torch.cat([prefix.expand(batch, -1, -1), suffix], dim=1)  # (B, P + S, F): prefix, then the suffix block
    cols = torch.arange(shared + longest, device=suffix.device)[None, :]  # (1, W)
    token = cols - (longest - own)[:, None]  # (B, W): the index in row b's prompt of column j (negative: padding)
    index = torch.where(token >= shared, cols, token.clamp_min(0))  # (B, W)
    return joined.gather(1, index[..., None].expand(-1, -1, joined.shape[2]))


def left_padded(token_lists: list[list[int]], pad_id: int) -> torch.Tensor:
    """(B, W) token ids, each row right-aligned after `pad_id`s (W: the longest row)."""
    width = max(len(t) for t in token_lists)
    ids = torch.full((len(token_lists), width), pad_id, dtype=torch.long)
    for i, toks in enumerate(token_lists):
        ids[i, width - len(toks) :] = torch.tensor(toks, dtype=torch.long)
    return ids


class RaggedCache:
    def __init__(self, model: torch.nn.Module | None, device: torch.device, costs: ModelCosts, backend=None, runner=None):
        """model: a transformers causal LM; or `runner`, a model of SpecLab's own (the EAGLE head). Which forward runs
        them (lean Llama / transformers / runner) is engine/model/forward.py's choice for the run's `backend`
        (engine/model/backend.Backend; None: the environment's choice between the lean forward and transformers')."""
        self.start(model, device, costs, backend)
        self.run = make_forward(model, device, runner=runner, backend=backend)
        self.lean = self.run.lean  # the LeanLlama when the lean forward runs this model, else None
        self.cache = DynamicCache(config=self.run.config)
        self.runner_model = runner

    def start(self, model, device: torch.device, costs: ModelCosts, backend) -> None:
        """The bookkeeping every ragged cache keeps, whatever holds its keys and values (a subclass's own buffers
        build no DynamicCache and no forward of this class's: engine/model/static_cache.py)."""
        self.model = model
        self.backend = backend
        self.device = device
        self.counter = CostCounter(costs)  # FLOPs and bytes of the passes; the decode loop takes them per step
        self.lengths = torch.zeros(0, dtype=torch.long, device=device)  # (B,) valid tokens per row
        self.width = 0  # physical columns W
        self.valid = torch.zeros(0, 0, dtype=torch.bool, device=device)  # (B, W): real (unmasked) columns
        self.compactions = 0  # per-row gathers done so far (see COMPACT_SLACK)
        self.warm = None  # a warm prefix cache (engine/model/prefix_cache.py) a shared prefill may read
        self.warm_hits = 0  # shared prefixes read from it instead of prefilled
        self.warm_prompt_hits = 0  # whole prompt batches read from it instead of prefilled

    @property
    def costs(self) -> ModelCosts:
        return self.counter.costs

    @property
    def batch(self) -> int:
        return int(self.lengths.shape[0])

    def prefill(
        self,
        token_lists: list[list[int]],
        pad_id: int,
        logits_to_keep: int = 1,
        return_hidden: bool | tuple[int, ...] = False,
        features: torch.Tensor | None = None,
        shared: int = 0,
    ):
        """Run the model on left-padded prompts. Returns logits (B, logits_to_keep, vocab) (see `forward`).
        shared: the first `shared` tokens of every row are the same (and so are their `features`): they are
        prefilled once and copied into every row (`prefill_shared`); 0, or fewer than 1 token, prefills each row."""
        self.reserve(len(token_lists), max(len(t) for t in token_lists))
        shared = min(shared, min(len(t) for t in token_lists) - 1)
        key = None
        if self.warm is not None and self.warm.prompts:  # these very prompts prefilled before (engine/model/prefix_cache.py, WarmPrompts)
            spec = return_hidden if isinstance(return_hidden, tuple) else bool(return_hidden)
            rows = tuple(tuple(t) for t in token_lists)
            key = (*self.warm_identity(), "prompts", rows, pad_id, shared, logits_to_keep, digest(features), spec)
            if (entry := self.warm.get(key)) is not None:
                return self.take_prompts(entry)
        if shared >= 1 and len(token_lists) > 1:
            out = self.prefill_shared(token_lists, pad_id, shared, logits_to_keep, return_hidden, features)
        else:
            ids = left_padded(token_lists, pad_id)
            self.lengths = torch.tensor([len(t) for t in token_lists], dtype=torch.long, device=self.device)
            self.width = 0
            out = self.forward(ids.to(self.device), logits_to_keep=logits_to_keep, return_hidden=return_hidden, features=features)
        if key is not None:
            live = [(k.clone(), v.clone()) for k, v in self.live()]
            entry = WarmPrompts(tuple(k for k, _ in live), tuple(v for _, v in live), self.lengths.clone(), self.valid.clone(), cloned(out))
            self.warm.put(key, entry)
        return out

    def take_prompts(self, entry: WarmPrompts):
        """A warm batch of prompts (`prefill`): its keys and values, lengths and real columns become this cache's, and
        its outputs are returned as the prefill would return them (nothing is counted: nothing ran)."""
        self.take_warm(entry)
        self.lengths, self.valid = entry.lengths.clone(), entry.valid.clone()
        self.width = int(entry.valid.shape[1])
        self.warm_prompt_hits += 1
        return cloned(entry.out)

    def reserve(self, rows: int, width: int) -> None:
        """Room for `rows` rows of prompts up to `width` tokens before a prefill (the dynamic cache grows as it goes)."""

    def prefill_shared(self, token_lists, pad_id: int, shared: int, logits_to_keep: int, return_hidden, features):
        """`prefill` of rows that share their first `shared` tokens: the prefix once at batch 1, its keys and values
        copied into every row, then every row's suffix in one left-padded pass (its padding: holes). The logits are the
        suffix pass's (logits_to_keep <= the shortest suffix); the hidden states are laid out as `prefill` lays them out
        (B, W, F), left-padded prompts."""
        batch, width = len(token_lists), max(len(t) for t in token_lists)
        suffixes = [t[shared:] for t in token_lists]
        longest = width - shared  # the longest suffix
        prefix_features = suffix_features = None
        if features is not None:  # laid out over the left-padded prompts: row 0's prefix, every row's last `longest`
            start = width - len(token_lists[0])
            prefix_features, suffix_features = features[:1, start : start + shared], features[:, width - longest :]
        self.lengths = torch.tensor([shared], dtype=torch.long, device=self.device)
        self.width = 0
        prefix_ids = torch.tensor([token_lists[0][:shared]], dtype=torch.long, device=self.device)  # (1, P)
        first = self.prefix_pass(prefix_ids, return_hidden, prefix_features)
        self.select(torch.zeros(batch, dtype=torch.long, device=self.device))  # every row holds the prefix
        own = torch.tensor([len(t) for t in suffixes], device=self.device)
        new_valid = torch.arange(longest, device=self.device)[None, :] >= (longest - own)[:, None]  # (B, S)
        ids = left_padded(suffixes, pad_id).to(self.device)  # (B, S)
        out = self.forward(
            ids,
            logits_to_keep=logits_to_keep,
            return_hidden=return_hidden,
            new_valid=None if bool(new_valid.all()) else new_valid,
            features=suffix_features,
        )
        if not return_hidden:
            return out
        logits, hidden = out
        return logits, joined_hidden(first[1], hidden, own)

    def prefix_pass(self, prefix_ids: torch.Tensor, return_hidden, features):
        """The shared prefix's pass at batch 1 over the empty cache (prefix_ids (1, P)); what `forward` returns. Read
        from the warm prefix cache where it holds this prefix (`self.warm`, engine/model/prefix_cache.py): its keys and
        values become the first row instead of the pass (nothing is counted: nothing ran); after a miss the pass's are
        filed there. The key: the model, how its keys and values are held (`warm_identity`), the prefix's token ids, a
        digest of the features fed with them, the hidden states asked for."""
        if self.warm is None:
            return self.forward(prefix_ids, logits_to_keep=1, return_hidden=return_hidden, features=features)
        spec = return_hidden if isinstance(return_hidden, tuple) else bool(return_hidden)
        key = (*self.warm_identity(), tuple(prefix_ids[0].tolist()), digest(features), spec)
        entry = self.warm.get(key)
        if entry is not None:
            self.take_warm(entry)
            n = entry.tokens
            self.lengths = torch.tensor([n], dtype=torch.long, device=self.device)
            self.width, self.valid = n, torch.ones(1, n, dtype=torch.bool, device=self.device)
            self.warm_hits += 1
            return (None, entry.hidden) if spec else None
        out = self.forward(prefix_ids, logits_to_keep=1, return_hidden=return_hidden, features=features)
        live = [(k.clone(), v.clone()) for k, v in self.first_columns(prefix_ids.shape[1])]
        self.warm.put(key, WarmPrefix(tuple(k for k, _ in live), tuple(v for _, v in live), out[1].clone() if spec else None))
        return out

    def warm_identity(self) -> tuple:
        """What a warm prefix's key holds besides its tokens: the model (its keys and values take its weights' dtype) and
        how its keys and values are held (`warm_form`)."""
        model = self.runner_model if self.runner_model is not None else self.model
        return id(model), self.warm_form()

    def warm_form(self) -> str:
        """The forward that fills a dynamic cache."""
        return f"dynamic {type(self.run).__name__}"

    def first_columns(self, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, row 0's first `n` keys and values (views)."""
        return [(layer.keys[:1, :, :n], layer.values[:1, :, :n]) for layer in self.cache.layers]

    def live(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer (keys, values) of the live cache (B, kv_heads, W, head_dim)."""
        return [(layer.keys, layer.values) for layer in self.cache.layers]

    def take_warm(self, entry: WarmPrefix | WarmPrompts) -> None:
        """A warm entry's keys and values as this cache's rows (the caller keeps the bookkeeping)."""
        for i, (keys, values) in enumerate(zip(entry.keys, entry.values)):
            self.cache.update(keys.clone(), values.clone(), i)  # into the empty cache: later passes append to copies

    def attention_mask(self, n_new: int, new_valid: torch.Tensor | None = None) -> torch.Tensor:
        """(B, W + n_new) bool: each row's valid columns and the new tokens."""
        if self.width == 0:  # prefill: the new tokens themselves are left-padded
            cols = torch.arange(n_new, device=self.device)
            return cols[None, :] >= (n_new - self.lengths)[:, None]
        if new_valid is None:
            new_valid = torch.ones(self.batch, n_new, dtype=torch.bool, device=self.device)
        return torch.cat([self.valid, new_valid], dim=1)

    def advance(self, n_new: int, mask: torch.Tensor, new_valid: torch.Tensor | None, logits_to_keep: int) -> torch.Tensor:
        """Count the pass and move each row's length on by its real new columns; return their positions (B, n).
        Shared with the static buffers (engine/model/static_cache.py); the caller moves `width` on."""
        if self.width == 0:
            self.counter.prefill(self.lengths.tolist(), logits_to_keep)
            return (mask.long().cumsum(-1) - 1).clamp_min(0)  # (B, n): left padding gets position 0
        if new_valid is None and self.device.type == "cpu" and self.batch:  # from the lengths as ints: 3 small ops, not 7
            host = self.lengths.tolist()
            # the float32 mean of the lengths; one row's length is its own mean (exact in float32 below 2**24)
            mean = float(host[0]) if len(host) == 1 else float(numpy.float32(sum(host)) / numpy.float32(len(host)))
            self.counter.step(len(host), n_new, mean, logits_to_keep)
            self.lengths = torch.tensor([length + n_new for length in host])
            return torch.tensor([[length + i for i in range(n_new)] for length in host])  # (B, n)
        self.counter.step(self.batch, n_new, float(self.lengths.float().mean()), logits_to_keep)
        if new_valid is None:
            positions = self.lengths[:, None] + torch.arange(n_new, device=self.device)  # (B, n)
            self.lengths = self.lengths + n_new
        else:  # holes take no position; real columns count on from each row's length
            positions = self.lengths[:, None] + (new_valid.long().cumsum(1) - 1).clamp_min(0)
            self.lengths = self.lengths + new_valid.long().sum(1)
        return positions

    def forward(
        self,
        input_ids: torch.Tensor,
        logits_to_keep: int = 0,
        return_hidden: bool | tuple[int, ...] = False,
        new_valid: torch.Tensor | None = None,
        features: torch.Tensor | None = None,
    ):
        """Feed (B, n) tokens at each row's next positions. Returns logits (B, n or keep, vocab); with
        `return_hidden` (lean forward only) also the final hidden states (B, n, hidden); as a tuple of layer
        indices, those layers' outputs come first (EAGLE-3 fusion, engine/model/fastllama.py).

        new_valid (B, n) bool: which fed columns are real (default: all). The others are holes from the
        start: masked for every query, not counted in `lengths`, as if already rolled back. Real columns
        must be in time order. features: the runner's extra input (EAGLE: the target features)."""
        n_new = input_ids.shape[1]
        mask = self.attention_mask(n_new, new_valid)
        positions = self.advance(n_new, mask, new_valid, logits_to_keep)
        self.width += n_new
        self.valid = mask
        # No padding anywhere (always so at batch 1): let attention take its plain causal path, no mask to build.
        no_padding = bool(mask.all())
        return self.run(
            input_ids, positions, None if no_padding else mask, self.cache, logits_to_keep, return_hidden=return_hidden, features=features
        )

    def forward_tree(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        attend: torch.Tensor,
        logits_to_keep: int = 0,
        return_hidden: bool | tuple[int, ...] = False,
        features: torch.Tensor | None = None,
    ):
        """Feed (B, n) draft-tree tokens at explicit `positions` (B, n); `attend` (B, n, W+n) bool says which
        cache and new columns each of them sees (its context and its ancestors: engine/decoding/verify_tree.py). All n count
        as real until `keep_path` (or `keep`) rolls back. Returns what `forward` returns."""
        n_new = input_ids.shape[1]
        if self.width == 0:
            raise ValueError("RaggedCache.forward_tree needs a prefilled cache")
        self.counter.step(self.batch, n_new, float(self.lengths.float().mean()), logits_to_keep)
        self.lengths = self.lengths + n_new
        self.width += n_new
        self.valid = torch.cat([self.valid, torch.ones(self.batch, n_new, dtype=torch.bool, device=self.device)], 1)
        return self.run(input_ids, positions, attend, self.cache, logits_to_keep, return_hidden=return_hidden, features=features)

    def keep_path(self, path: torch.Tensor, keep: torch.Tensor, n_new: int) -> None:
        """Roll back a tree verify pass of `n_new` columns: row b keeps the columns path[b, j] (offsets into
        those n_new, in time order) where keep[b, j], packed right after its cache; the rest become holes.
        path, keep: (B, P). Only the P kept slots are copied, per layer, in place."""
        base, width = self.width - n_new, path.shape[1]
        # Slots whose column is already in place (the root always; a path down first children) are not
        # copied: only slots from the first one that moves, in any row.
        moved = (path != torch.arange(width, device=path.device)).any(0)  # (P,)
        start = int(moved.long().argmax()) if bool(moved.any()) else width
        for layer in self.cache.layers:
            if start < width:
                b, h, _, d = layer.keys.shape
                index = path[:, None, start:, None].expand(b, h, width - start, d)
                keys, values = layer.keys[:, :, base:].gather(2, index), layer.values[:, :, base:].gather(2, index)
                layer.keys[:, :, base + start : base + width] = keys
                layer.values[:, :, base + start : base + width] = values
            layer.keys, layer.values = layer.keys[:, :, : base + width], layer.values[:, :, : base + width]
        self.lengths = self.lengths - n_new + keep.long().sum(1)
        self.valid = torch.cat([self.valid[:, :base], keep], dim=1)
        self.width = base + width
        self._tidy()

    def take_counts(self) -> tuple[float, float]:
        """FLOPs and bytes of the forwards since the last call."""
        return self.counter.take()

    def keep(self, new_lengths: torch.Tensor) -> None:
        """Roll back: row i keeps its first new_lengths[i] tokens (<= lengths[i]); the rest become holes."""
        old, new = self.lengths.tolist(), new_lengths.tolist()
        if all(length == self.width for length in old) and len(set(new)) == 1 and new[0] <= self.width:
            # every column real and every row cut alike (always so at batch 1): a crop, nothing else to tidy
            if new[0] < self.width:
                self._slice_columns(0, new[0])
            self.lengths = new_lengths.clone()
            return
        drop = self.lengths - new_lengths  # (B,) tokens removed from each row's end
        if bool((drop < 0).any()):
            raise ValueError("RaggedCache.keep can only shorten rows")
        if self.batch and int(drop.max()) > 0:
            # valid columns at or to the right of each column; a row's last drop_i valid ones go
            right = self.valid.flip(1).long().cumsum(1).flip(1)
            self.valid = self.valid & (right > drop[:, None])
        self.lengths = new_lengths.clone()
        self._tidy()

    def drop_last(self, n: int) -> None:
        """Roll back the last `n` columns of every row, which must all be real (a drafter's own draft entries):
        `keep(lengths - n)` as a crop, without finding each row's last real columns."""
        if n:
            self._slice_columns(0, self.width - n)
            self.lengths = self.lengths - n
        self._tidy()

    def select(self, rows: torch.Tensor) -> None:
        """Keep only `rows` of the batch (finished sequences stop costing work), then crop shared padding."""
        self.lengths = self.lengths[rows]
        self.valid = self.valid[rows]
        for layer in self.cache.layers:
            layer.keys = layer.keys[rows]
            layer.values = layer.values[rows]
        self._tidy()

    def _slice_columns(self, start: int, stop: int) -> int:
        """Keep columns start..stop-1; returns the left margin of all-hole columns kept (none here: a view)."""
        for layer in self.cache.layers:
            layer.keys = layer.keys[:, :, start:stop]
            layer.values = layer.values[:, :, start:stop]
        self.valid = self.valid[:, start:stop]
        self.width = stop - start
        return 0

    def _tidy(self) -> None:
        """Crop columns that are holes in every row; pack rows again once holes exceed COMPACT_SLACK (a left margin
        the cache keeps rather than moves, `_slice_columns`, not counted)."""
        if not self.batch or not self.width or all(length == self.width for length in self.lengths.tolist()):
            return  # empty, or every column real in every row: no hole to crop, no slack to pack
        used, margin = self.valid.any(0), 0  # (W,)
        if not bool(used.all()):
            if not bool(used.any()):
                self._slice_columns(0, 0)
                return
            first = int(used.long().argmax())
            stop = self.width - int(used.flip(0).long().argmax())
            if first > 0 or stop < self.width:
                margin = self._slice_columns(first, stop)
        if self.width - margin - int(self.lengths.max()) > COMPACT_SLACK:
            self._compact()

    def _compact(self) -> None:
        """Right-align each row's valid columns with one gather per layer (padding reads column 0, masked)."""
        new_width = int(self.lengths.max())
        cols = torch.arange(self.width, device=self.device)
        # valid columns in time order, after the -1s of the holes; the last new_width of them per row
        index = torch.where(self.valid, cols, -1).sort(dim=1, stable=True).values[:, self.width - new_width :]
        index = index.clamp_min(0)  # (B, W')
        for layer in self.cache.layers:
            b, h, _, d = layer.keys.shape
            gather = index[:, None, :, None].expand(b, h, new_width, d)
            layer.keys = layer.keys.gather(2, gather)
            layer.values = layer.values.gather(2, gather)
        self.valid = torch.arange(new_width, device=self.device)[None, :] >= (new_width - self.lengths)[:, None]
        self.width = new_width
        self.compactions += 1
