"""A warm shared prefix: the keys and values a shared prefill computed for its prefix (engine/model/kvcache.py,
`RaggedCache.prefill_shared`), kept for the next run over the same prefix, so a page that decodes one document again
and again (the app's warm-up and interleaved rounds, a class rerunning a lesson) prefills it once. The caller owns it
and hands it to a run (`generate(..., prefix_cache=...)`): the app keeps one per model pair and uses it only inside
its run lock, so one run at a time reads or writes it; the engine keeps nothing between runs itself (a caller may
give a store a tier on disk: engine/model/prefix_disk.py). Each model's
cache files its prefix under its own key: the model (or the EAGLE head), the backend (static buffers: with their
dtype; a dynamic cache: the forward that fills it), the prefix's token ids and, for a head fed with the target's
features, a digest of those features. A hit copies the stored keys and values into the first row instead of running
the prefix's pass; the same pass on the same inputs computes the same values, so a warm run's output is the cold
run's.

Whole prompts too (`WarmPrompts`): a run whose rows are exactly a batch the store has seen (the same prompts, in the
same order, the same features, the same outputs asked for) takes that prefill's keys, values, row bookkeeping and
outputs instead of running it, as a serving engine's prefix cache serves a repeated prompt: interleaved rounds that
decode the same prompts again and again, timing decoding alone, pay each batch's prompt pass once. Nothing is counted for a hit
(nothing ran), and the trace's meta says how many prefills were read warm. Only a store made with `prompts=True`
keeps them: a page that shows the prompt's pass must run it.

Memory is bounded: at most MAX_ENTRIES entries and MAX_BYTES bytes (the least recently used go first), each at most
MAX_TOKENS tokens (a batch's rows times its width). For the embedded SmolLM2-135M target a 4,096-token prefix holds
30 layers x 2 x 3 kv heads x 64 x 4,096 values, 94 MB in bfloat16 (189 MB in float32), plus its final hidden states
(4.7 MB); the EAGLE head's one layer adds 3 MB.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch

MAX_ENTRIES = 16  # a target and a drafter over a few prompt batches, and a document's prefix
MAX_TOKENS = 8192  # a longer prefix (or a batch of more rows x width) is prefilled every time, never stored
MAX_BYTES = 1 << 30  # the stored tensors' bytes, at most


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

    def tensors(self) -> list[torch.Tensor]:
        return [t for t in (*self.keys, *self.values, self.hidden) if t is not None]


@dataclass(frozen=True)
class WarmPrompts:
    """One batch of whole prompts' prefill: per layer keys and values (B, kv_heads, W, head_dim), each row's length
    (B,) and real columns (B, W), and what the prefill returned (logits, hidden states or a runner's states)."""

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]
    lengths: torch.Tensor
    valid: torch.Tensor
    out: object

    @property
    def tokens(self) -> int:
        return int(self.valid.numel())

    def tensors(self) -> list[torch.Tensor]:
        return [*self.keys, *self.values, self.lengths, self.valid, *tensors_of(self.out)]


def tensors_of(out) -> list[torch.Tensor]:
    """The tensors in a pass's output (a tensor, or tuples and lists of them, or None)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in tensors_of(item)]
    return []


def cloned(out):
    """A copy of a pass's output whose tensors the next run may change freely."""
    if isinstance(out, torch.Tensor):
        return out.clone()
    if isinstance(out, (tuple, list)):
        return type(out)(cloned(item) for item in out)
    return out


def digest(features: torch.Tensor | None) -> str:
    """A short digest of the features a head's prefix was fed (empty without any)."""
    if features is None:
        return ""
    raw = features.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


class PrefixCache:
    """The warm prefixes, least recently used first out (see the module docstring); `hits` and `misses` count lookups."""

    def __init__(
        self, max_entries: int = MAX_ENTRIES, max_tokens: int = MAX_TOKENS, max_bytes: int = MAX_BYTES, prompts: bool = False, disk=None
    ):
        """prompts: keep whole prompt batches too (`WarmPrompts`), for a caller that times decoding alone; a page that
        shows the prompt's pass (time to first token, the whole run) keeps shared prefixes only. disk: a tier on disk
        under this one (engine/model/prefix_disk.py, DiskPrefixes): shared prefixes filed here are written there too,
        and a miss here is looked for there, so a later process reads a long context back instead of prefilling it."""
        self.max_entries, self.max_tokens, self.max_bytes, self.prompts = max_entries, max_tokens, max_bytes, prompts
        self.disk = disk
        self._entries: OrderedDict[tuple, WarmPrefix] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: tuple) -> WarmPrefix | WarmPrompts | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry
        entry = self.disk.load(key) if self.disk is not None else None
        with self._lock:
            if entry is None:
                self.misses += 1
                return None
            self.hits += 1
        self._keep(key, entry)  # in memory from now on; already on disk
        return entry

    def put(self, key: tuple, entry: WarmPrefix | WarmPrompts) -> None:
        """Keep `entry` (copies of the run's tensors) under `key`; one longer than max_tokens or larger than max_bytes
        is not kept, and the least recently used go until the store is within both of its bounds."""
        if entry.tokens > self.max_tokens or nbytes([entry]) > self.max_bytes:
            return
        self._keep(key, entry)
        if self.disk is not None and isinstance(entry, WarmPrefix):
            self.disk.save(key, entry)

    def _keep(self, key: tuple, entry: WarmPrefix | WarmPrompts) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries or nbytes(self._entries.values()) > self.max_bytes:
                self._entries.popitem(last=False)

    def shared_only(self) -> PrefixesOnly:
        """This store's shared prefixes alone (`PrefixesOnly`)."""
        return PrefixesOnly(self)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    @property
    def nbytes(self) -> int:
        """Bytes the stored tensors hold."""
        with self._lock:
            return nbytes(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)


def nbytes(entries) -> int:
    """Bytes the entries' tensors hold."""
    return sum(t.numel() * t.element_size() for e in entries for t in e.tensors())


class PrefixesOnly:
    """A store's shared prefixes and nothing else: the same entries, read and filed through it, but no whole prompt
    batch is read or kept, for a caller whose rows are copies of one prompt (engine/decoding/context_passes.py: a batch
    of B such rows would be an entry B times the prefix's, and the prefix alone serves every batch)."""

    prompts = False

    def __init__(self, store: PrefixCache):
        self.store = store

    def get(self, key: tuple) -> WarmPrefix | WarmPrompts | None:
        return self.store.get(key)

    def put(self, key: tuple, entry: WarmPrefix | WarmPrompts) -> None:
        self.store.put(key, entry)
