"""dtype="auto" on CUDA picks bf16 only where the GPU computes it natively (issue 30, item 4): compute
capability >= 8.0. A T4 (7.5) emulates bf16, which torch.cuda.is_bf16_supported() counts by default."""

from __future__ import annotations

import pytest
import torch

from engine.hardware import cuda_bf16_is_native, pick_dtype

CUDA = torch.device("cuda")


@pytest.fixture
def gpu(monkeypatch):
    """A fake CUDA build whose device reports the capability set on the returned dict."""
    state = {"capability": (7, 5)}
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: state["capability"])
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)  # emulation counts
    return state


@pytest.mark.parametrize(
    "capability, expected",
    [
        ((7, 5), torch.float16),
        ((7, 0), torch.float16),
        ((8, 0), torch.bfloat16),
        ((8, 6), torch.bfloat16),
        ((8, 9), torch.bfloat16),
        ((9, 0), torch.bfloat16),
        ((10, 0), torch.bfloat16),
    ],
    ids=["T4", "V100", "A100", "A10G", "L4", "H100", "B200"],
)
def test_auto_is_bf16_only_from_compute_capability_8(gpu, capability, expected):
    gpu["capability"] = capability
    assert pick_dtype("auto", CUDA) is expected


def test_an_explicit_dtype_is_kept_on_any_gpu(gpu):
    assert pick_dtype("bfloat16", CUDA) is torch.bfloat16  # asked for: emulated or not, the caller's choice
    assert pick_dtype("float32", CUDA) is torch.float32


def test_rocm_asks_torch_without_emulation(monkeypatch):
    asked = {}
    monkeypatch.setattr(torch.version, "hip", "6.2")
    monkeypatch.setattr(
        torch.cuda, "is_bf16_supported", lambda including_emulation=True: asked.setdefault("e", including_emulation) is False
    )
    assert cuda_bf16_is_native(CUDA) and asked["e"] is False
