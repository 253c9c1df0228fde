"""Hub presets: refused in one line when they cannot fit the GPU, downloaded outside the run lock with
progress, then loaded inside it (app/common/hub_fetch.py, app/resources.get_pair; issue 30, item 4)."""

from __future__ import annotations

import time

import pytest
import torch

pytest.importorskip("streamlit")
from app.common import hub_fetch, resources  # noqa: E402
from engine.model import vram  # noqa: E402
from tests.engine.test_vram import QWEN_7B  # noqa: E402

QWEN_05B = QWEN_7B | {
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
}


@pytest.fixture
def gpu_with(monkeypatch):
    """A stand-in CUDA device with `free` GiB free (torch.cuda.mem_get_info, is_available)."""

    def make(free_gib: float):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (int(free_gib * vram.GIB), 16 * vram.GIB))
        monkeypatch.setattr(hub_fetch, "pick_device", lambda device=None: torch.device("cuda"))
        monkeypatch.setattr(hub_fetch, "pick_dtype", lambda dtype, device: torch.float16)

    return make


def configs(repo: str) -> dict:
    return {"Qwen/Qwen2.5-7B-Instruct": QWEN_7B, "Qwen/Qwen2.5-0.5B-Instruct": QWEN_05B}[repo]


def test_the_7b_pair_is_refused_on_a_16_gb_gpu_in_one_line(gpu_with):
    gpu_with(14.6)  # a T4's free memory
    preset = resources.PRESETS["qwen2.5-7b"]
    text = hub_fetch.vram_refusal(preset, "auto", config=configs)
    assert text is not None and "\n" not in text
    assert f"'{preset.label}'" in text and "14.6 GiB free" in text
    need = vram.estimate([QWEN_7B, QWEN_05B], torch.float16, hub_fetch.PLAN_TOKENS)
    assert f"needs about {need.total / vram.GIB:.1f} GiB" in text and need.total > 15 * vram.GIB


def test_the_7b_pair_fits_a_40_gb_gpu_and_nothing_is_checked_without_cuda(gpu_with, monkeypatch):
    preset = resources.PRESETS["qwen2.5-7b"]
    monkeypatch.setattr(hub_fetch, "pick_device", lambda device=None: torch.device("cpu"))
    assert hub_fetch.vram_refusal(preset, "auto", config=configs) is None  # a CPU server: no GPU to check
    gpu_with(39.0)
    assert hub_fetch.vram_refusal(preset, "auto", config=configs) is None


def test_hub_repos_of_each_preset():
    assert hub_fetch.hub_repos(resources.PRESETS["embedded"]) == []
    assert hub_fetch.hub_repos(resources.PRESETS["qwen2.5-7b"]) == ["Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"]


@pytest.fixture
def fresh_pair_slot():
    key = ("smollm2-1.7b", "float16")
    store = resources._store()
    store["pairs"].pop(key, None)
    yield key
    store["pairs"].pop(key, None)


def test_download_happens_outside_the_run_lock_then_the_load_inside_it(monkeypatch, fresh_pair_slot):
    lock = resources.run_lock()
    events, reports = [], []

    def fake_download(repo, allow_patterns, tqdm_class):
        assert not lock._lock.locked(), "the download must not hold the run lock"
        events.append(("download", repo))
        bar = tqdm_class(total=1000, unit="B", desc="Downloading bytes")
        for _ in range(4):
            bar.update(250)
            time.sleep(0.2)  # long enough for the page thread to report
        assert "*.safetensors" in allow_patterns

    def fake_load(target, draft, dtype):
        assert lock._lock.locked(), "the load from the local cache runs in a model turn"
        events.append(("load", target))
        return "pair"

    monkeypatch.setattr(hub_fetch, "vram_refusal", lambda preset, dtype: None)
    monkeypatch.setattr("huggingface_hub.snapshot_download", fake_download)
    monkeypatch.setattr(resources, "load_pair", fake_load)
    monkeypatch.setattr(resources, "warm_up", lambda pair: None)
    pair = resources.get_pair(*fresh_pair_slot, on_progress=lambda repo, done, total: reports.append((repo, done, total)))
    assert pair == "pair"
    assert events == [
        ("download", "HuggingFaceTB/SmolLM2-1.7B-Instruct"),
        ("download", "HuggingFaceTB/SmolLM2-135M-Instruct"),
        ("load", "HuggingFaceTB/SmolLM2-1.7B-Instruct"),
    ]
    assert reports and all(total == 1000 and 0 <= done <= 1000 for _, done, total in reports)
    assert not lock._lock.locked()
    events.clear()
    assert resources.get_pair(*fresh_pair_slot) == "pair" and events == []  # loaded: neither checked nor downloaded again


def test_a_refused_pair_is_neither_downloaded_nor_loaded(monkeypatch, fresh_pair_slot):
    def never(*args, **kwargs):
        raise AssertionError("must not be called")

    monkeypatch.setattr(hub_fetch, "vram_refusal", lambda preset, dtype: "The model pair 'x' needs about 20.0 GiB")
    monkeypatch.setattr("huggingface_hub.snapshot_download", never)
    monkeypatch.setattr(resources, "load_pair", never)
    with pytest.raises(hub_fetch.VramRefusal, match="needs about 20.0 GiB"):
        resources.get_pair(*fresh_pair_slot)


def test_a_failed_download_is_one_clear_error(monkeypatch):
    def broken(repo, allow_patterns, tqdm_class):
        raise OSError("connection reset")

    with pytest.raises(hub_fetch.ModelLoadError, match=r"could not download 'Qwen/Qwen2.5-7B-Instruct' .*OSError: connection reset"):
        hub_fetch.fetch(resources.PRESETS["qwen2.5-7b"], downloader=broken, poll_s=0.01)
