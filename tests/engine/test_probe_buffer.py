"""The bandwidth probe reads from memory, not from a cache that holds its buffer (engine/hardware.py): the buffer is
at least twice the last-level cache that sysfs reports."""

from __future__ import annotations

from engine.hardware import last_level_cache, probe_bytes


def _cache(root, sizes):
    for i, size in enumerate(sizes):
        (root / f"index{i}").mkdir()
        (root / f"index{i}" / "size").write_text(size + "\n")
    return root


def test_the_largest_cache_is_read_in_any_unit(tmp_path):
    assert last_level_cache(_cache(tmp_path, ["48K", "2048K", "300M"])) == 300 << 20
    other = tmp_path / "other"
    other.mkdir()
    assert last_level_cache(_cache(other, ["32K", "1048576", "32768K"])) == 32 << 20


def test_an_unreadable_cache_counts_as_none(tmp_path):
    assert last_level_cache(tmp_path / "missing") == 0
    assert last_level_cache(_cache(tmp_path, ["big", ""])) == 0


def test_the_buffer_outgrows_the_cache_within_bounds():
    assert probe_bytes(True, 0) == 64 << 20 and probe_bytes(False, 0) == 256 << 20
    assert probe_bytes(True, 32 << 20) == 64 << 20  # a 32 MiB L3: the usual buffers are already twice it
    assert probe_bytes(True, 300 << 20) == probe_bytes(False, 300 << 20) == 600 << 20
    assert probe_bytes(False, 4 << 30) == 2 << 30
