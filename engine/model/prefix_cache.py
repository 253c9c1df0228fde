"""A warm shared prefix: the keys and values a shared prefill computed for its prefix (engine/model/kvcache.py,
`RaggedCache.prefill_shared`), kept for the next run over the same prefix, so a page that decodes one document again
and again (the app's warm-up and interleaved rounds, a class rerunning a lesson) prefills it once. The caller owns it
and hands it to a run (`generate(..., prefix_cache=...)`): the app keeps one per model pair and uses it only inside
its run lock, so one run at a time reads or writes it; the engine keeps nothing between runs itself. Each model's
cache files its prefix under its own key: the model (or the EAGLE head), the backend (static buffers: with their
dtype; a dynamic cache: the forward that fills it), the prefix's token ids and, for a head fed with the target's
features, a digest of those features. A hit copies the stored keys and values into the first row instead of running
the prefix's pass; the same pass on the same inputs computes the same values, so a warm run's output is the cold
run's.

Memory is bounded: at most MAX_ENTRIES prefixes (the least recently used go first), each at most MAX_TOKENS tokens.
For the embedded SmolLM2-135M target a 4,096-token prefix holds 30 layers x 2 x 3 kv heads x 64 x 4,096 values,
94 MB in bfloat16 (189 MB in float32), plus its final hidden states (4.7 MB); the EAGLE head's one layer adds 3 MB.
MAX_ENTRIES x MAX_TOKENS bounds the store under 1.6 GB in float32 at the embedded model's size.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch

MAX_ENTRIES = 4  # a target, a draft model and an EAGLE head over one document, and one spare
MAX_TOKENS = 8192  # a longer prefix is prefilled every time, never stored


@dataclass(frozen=True)
class WarmPrefix:
    """One prefix's entries: per layer keys and values (1, kv_heads, P, head_dim), and the pass's hidden states
    (1, P, F) where the run asked for them (else None)."""

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]
    hidden: torch.Tensor | None

    @property
    def tokens(self) -> int:
        return int(self.keys[0].shape[2])


def digest(features: torch.Tensor | None) -> str:
    """A short digest of the features a head's prefix was fed (empty without any)."""
    if features is None:
        return ""
    raw = features.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


class PrefixCache:
    """The warm prefixes, least recently used first out (see the module docstring); `hits` and `misses` count lookups."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_tokens: int = MAX_TOKENS):
        self.max_entries, self.max_tokens = max_entries, max_tokens
        self._entries: OrderedDict[tuple, WarmPrefix] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: tuple) -> WarmPrefix | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry

    def put(self, key: tuple, entry: WarmPrefix) -> None:
        """Keep `entry` (copies of the run's tensors) under `key`; one longer than max_tokens is not kept."""
        if entry.tokens > self.max_tokens:
            return
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    @property
    def nbytes(self) -> int:
        """Bytes the stored tensors hold."""
        with self._lock:
            tensors = [t for e in self._entries.values() for t in (*e.keys, *e.values, e.hidden) if t is not None]
        return sum(t.numel() * t.element_size() for t in tensors)

    def __len__(self) -> int:
        return len(self._entries)
