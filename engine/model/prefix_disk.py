"""Warm prefixes kept on disk: a long context's keys and values, filed once and read back by a later process, as
serving engines keep a prefix cache on disk (LMCache, SGLang's hierarchical cache) so a restart does not prefill a
long document again. A 4,096-token context over the embedded SmolLM2-135M target is 94 MB of keys and values: far
quicker to read back than to prefill again on a CPU (docs/journal.md, "lesson 8's long context kept on disk").

`DiskPrefixes` is a tier under one PrefixCache (engine/model/prefix_cache.py, `disk=`): a miss in memory looks here,
and a shared prefix filed in memory is written here too (whole prompt batches are not: they are cheap to prefill
and many). The in-memory key names the model by `id()`, which a later process does not share, so a model is filed
only under a name its owner gives it (`name`): what it is, its dtype and a fingerprint of its weights
(`model_name`). One safetensors file per prefix (no pickle), named by a digest of the whole key and holding the key's
full digest, so a file is read only for the key it was written for; a file that does not read, or whose key or
shapes do not match, is passed over (and counted in `errors`), never trusted. At most `max_bytes` on disk, the
oldest files (by last use) removed first. Writes go to a temporary file renamed into place, so a reader never sees
half a file.
"""

from __future__ import annotations

import hashlib
import os
import time
import weakref
from pathlib import Path

import torch

from engine.model.prefix_cache import WarmPrefix

FORMAT = "speclab.prefix/1"
MAX_DISK_BYTES = 512 << 20  # a few long contexts of the embedded pair (94 MB each at 4,096 tokens in bfloat16)
SAMPLE = 4096  # values sampled from each weight tensor for its fingerprint


def weights_fingerprint(model: torch.nn.Module) -> str:
    """A short digest of a model's weights: each tensor's name, shape, dtype and SAMPLE values spread over it. Two
    models that differ in their weights differ here unless they agree at every sampled value of every tensor."""
    h = hashlib.blake2b(digest_size=16)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            flat = t.detach().reshape(-1)
            step = max(1, flat.numel() // SAMPLE)
            h.update(f"{name} {tuple(t.shape)} {t.dtype}".encode())
            h.update(flat[::step][:SAMPLE].contiguous().cpu().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def model_name(label: str, model: torch.nn.Module, *more: str) -> str:
    """The name a model's prefixes are filed under: `label` (what it is, its dtype, the pass that fills its cache),
    `more` and its weights' fingerprint."""
    return " | ".join((label, *more, weights_fingerprint(model)))


class DiskPrefixes:
    """Shared prefixes as files in `folder` (see the module docstring); `reads`, `writes` and `errors` count them."""

    def __init__(self, folder: str | os.PathLike, device: torch.device | str = "cpu", max_bytes: int = MAX_DISK_BYTES):
        """device: where a read prefix's tensors go (the cache's device)."""
        self.folder, self.device, self.max_bytes = Path(folder), torch.device(device), max_bytes
        self._names: dict[int, tuple[weakref.ref, str]] = {}
        self.reads = self.writes = self.errors = 0

    def name(self, model: torch.nn.Module, name: str) -> None:
        """File `model`'s prefixes under `name` (`model_name`); a model never named is kept in memory only."""
        self._names[id(model)] = (weakref.ref(model), name)

    def _path(self, key: tuple) -> tuple[Path, str] | None:
        held = self._names.get(key[0])
        if held is None or held[0]() is None:  # never named, or gone and its id perhaps another model's now
            return None
        full = hashlib.blake2b(repr((held[1], *key[1:])).encode(), digest_size=32).hexdigest()
        return self.folder / f"{full[:32]}.safetensors", full

    def load(self, key: tuple) -> WarmPrefix | None:
        """The prefix filed under `key`, or None (not named, not on disk, or a file that does not hold this key)."""
        from safetensors import safe_open

        found = self._path(key)
        if found is None or not found[0].is_file():
            return None
        path, full = found
        try:
            with safe_open(str(path), framework="pt", device=str(self.device)) as f:
                meta = f.metadata() or {}
                if meta.get("format") != FORMAT or meta.get("key") != full:
                    raise ValueError("another key's file")
                layers = int(meta["layers"])
                keys = tuple(f.get_tensor(f"k{i}") for i in range(layers))
                values = tuple(f.get_tensor(f"v{i}") for i in range(layers))
                hidden = f.get_tensor("hidden") if "hidden" in f.keys() else None
            tokens = keys[0].shape[2] if keys else -1  # the key's own match is its digest's: here, one prefix's tensors
            if not keys or any(t.dim() != 4 or t.shape[0] != 1 or t.shape[2] != tokens for t in (*keys, *values)):
                raise ValueError("tensors that are not one row's prefix")
        except Exception:  # a torn, foreign or corrupt file: prefill instead, as if it were not there
            self.errors += 1
            return None
        try:
            os.utime(path)  # its last use: the oldest go first
        except OSError:  # a read-only folder: read, never trimmed
            pass
        self.reads += 1
        return WarmPrefix(keys, values, hidden)

    def save(self, key: tuple, entry: WarmPrefix) -> None:
        """File `entry` under `key` where its model is named and it fits within `max_bytes`; then trim the folder.
        A write that fails (a full or read-only disk) leaves the prefix in memory only."""
        from safetensors.torch import save_file

        found = self._path(key)
        size = sum(t.numel() * t.element_size() for t in entry.tensors())
        if found is None or size > self.max_bytes:
            return
        path, full = found
        tensors = {f"k{i}": t.contiguous() for i, t in enumerate(entry.keys)} | {
            f"v{i}": t.contiguous() for i, t in enumerate(entry.values)
        }
        if entry.hidden is not None:
            tensors["hidden"] = entry.hidden.contiguous()
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            save_file(
                {k: v.cpu() for k, v in tensors.items()}, str(tmp), metadata={"format": FORMAT, "key": full, "layers": str(len(entry.keys))}
            )
            os.replace(tmp, path)
        except Exception:  # a full or read-only disk, a folder that is a file: safetensors' error or the OS's
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
            self.errors += 1
            return
        self.writes += 1
        self.trim()

    def trim(self) -> None:
        """Remove the least recently used files until the folder holds at most `max_bytes`, and the temporary files
        of writes that died an hour or more ago."""
        try:
            for p in self.folder.glob(".*.tmp"):
                if time.time() - p.stat().st_mtime > 3600:
                    p.unlink(missing_ok=True)
            files = sorted(self.folder.glob("*.safetensors"), key=lambda p: p.stat().st_mtime)
            total = sum(p.stat().st_size for p in files)
            for p in files:
                if total <= self.max_bytes:
                    break
                total -= p.stat().st_size
                p.unlink(missing_ok=True)
        except OSError:  # another process trimming the same folder
            pass
