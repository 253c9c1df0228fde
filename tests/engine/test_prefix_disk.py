"""Warm prefixes kept on disk (engine/model/prefix_disk.py): a context filed by one store is read back by a fresh
store over the same folder (a restarted server) with the very keys and values a cold prefill computes; a model that
was never named, or whose weights differ, is never served another's file; a torn or foreign file is passed over and
prefilled again; the folder stays within its bound, oldest first."""

from __future__ import annotations

import os

import pytest
import torch

from engine.config import DecodeConfig
from engine.model.prefix_cache import PrefixCache
from engine.model.prefix_disk import DiskPrefixes, model_name, weights_fingerprint
from engine.model.static_cache import make_cache

ROW = list(range(200, 264))  # a 64-token context


def named_store(pair, folder, **kw) -> PrefixCache:
    disk = DiskPrefixes(folder, pair.device, **kw)
    disk.name(pair.target, model_name("tiny target", pair.target))
    return PrefixCache(disk=disk)


def over(pair, row, store=None):
    """Two rows over `row` as a shared prefix (engine/decoding/context_passes.py builds its caches so), and the next
    pass's logits."""
    cache = make_cache(pair.target, pair.device, pair.target_costs, DecodeConfig(max_new_tokens=2))
    cache.warm = None if store is None else store.shared_only()
    with torch.inference_mode():
        cache.prefill([row] * 2, pad_id=0, shared=len(row) - 1)
        logits = cache.forward(torch.tensor([[7], [9]]))
    return cache, logits


def test_a_restarted_store_reads_the_context_back_with_the_cold_prefills_values(tiny, tmp_path):
    first = named_store(tiny, tmp_path)
    over(tiny, ROW, first)
    assert first.disk.writes == 1 and len(list(tmp_path.glob("*.safetensors"))) == 1
    later = named_store(tiny, tmp_path)  # a new process: nothing in memory, the same folder
    warm, warm_logits = over(tiny, ROW, later)
    cold, cold_logits = over(tiny, ROW)
    assert later.disk.reads == 1 and later.hits == 1 and warm.warm_hits == 1 and cold.warm_hits == 0
    for (wk, wv), (ck, cv) in zip(warm.first_columns(len(ROW)), cold.first_columns(len(ROW))):
        assert torch.equal(wk, ck) and torch.equal(wv, cv)
    assert torch.equal(warm_logits, cold_logits)
    over(tiny, ROW, later)  # now from memory: the file is not read again
    assert later.disk.reads == 1 and later.hits == 2


def test_an_unnamed_model_stays_in_memory_and_other_weights_never_read_its_file(tiny, tmp_path):
    plain = PrefixCache(disk=DiskPrefixes(tmp_path))
    over(tiny, ROW, plain)
    assert len(plain) == 1 and not list(tmp_path.glob("*.safetensors"))
    over(tiny, ROW, named_store(tiny, tmp_path))
    p = next(tiny.target.parameters())
    saved, before = p.detach().clone(), weights_fingerprint(tiny.target)
    try:
        with torch.no_grad():
            p.add_(1.0)  # other weights in the same model object
        changed = named_store(tiny, tmp_path)
        assert weights_fingerprint(tiny.target) != before
        over(tiny, ROW, changed)
    finally:
        with torch.no_grad():
            p.copy_(saved)
    assert changed.disk.reads == 0 and changed.misses == 1  # another model's context is prefilled, not read


def test_a_torn_or_foreign_file_is_passed_over_and_prefilled_again(tiny, tmp_path):
    over(tiny, ROW, named_store(tiny, tmp_path))
    (path,) = tmp_path.glob("*.safetensors")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # torn
    later = named_store(tiny, tmp_path)
    _, logits = over(tiny, ROW, later)
    assert later.disk.errors == 1 and later.disk.reads == 0 and later.disk.writes == 1  # prefilled and filed again
    assert torch.equal(logits, over(tiny, ROW)[1])
    other_row = list(range(300, 364))
    over(tiny, other_row, later)
    a, b = sorted(tmp_path.glob("*.safetensors"))
    a_bytes = a.read_bytes()
    a.write_bytes(b.read_bytes())  # another key's whole file under this key's name
    b.write_bytes(a_bytes)
    swapped = named_store(tiny, tmp_path)
    over(tiny, ROW, swapped)
    assert swapped.disk.errors == 1 and swapped.disk.reads == 0


def test_the_folder_keeps_within_its_bound_the_least_recently_used_going_first(tiny, tmp_path):
    store = named_store(tiny, tmp_path)
    over(tiny, ROW, store)
    (one,) = tmp_path.glob("*.safetensors")
    size = one.stat().st_size
    store = named_store(tiny, tmp_path, max_bytes=int(2.5 * size))
    os.utime(one, (1, 1))  # long unused
    over(tiny, list(range(300, 364)), store)
    over(tiny, list(range(400, 464)), store)
    files = list(tmp_path.glob("*.safetensors"))
    assert len(files) == 2 and one not in files


@pytest.mark.parametrize("folder", ["file", "missing/deeper"])
def test_a_folder_that_cannot_be_written_leaves_the_context_in_memory(tiny, tmp_path, folder):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    store = named_store(tiny, blocker if folder == "file" else tmp_path / folder)
    _, logits = over(tiny, ROW, store)
    assert len(store) == 1 and (store.disk.errors == 1) == (folder == "file")
    assert torch.equal(logits, over(tiny, ROW)[1])


def test_a_write_that_died_leaves_no_file_for_ever(tiny, tmp_path):
    """A process killed mid-write leaves its temporary file; the next trim removes it once it is an hour old (a live
    write's is younger), and a reader never takes it for a prefix."""
    dead, live = tmp_path / ".abc.safetensors.1.tmp", tmp_path / ".def.safetensors.2.tmp"
    for p in (dead, live):
        p.write_bytes(b"half a file")
    os.utime(dead, (1, 1))
    store = named_store(tiny, tmp_path)
    over(tiny, ROW, store)
    assert not dead.exists() and live.exists() and store.disk.errors == 0
