"""The memory estimate a GPU check refuses a model pair by (engine/model/vram.py; issue 30, item 4)."""

from __future__ import annotations

import pytest
import torch

from engine.model import vram

# Qwen2.5-7B-Instruct's config.json (huggingface.co/Qwen/Qwen2.5-7B-Instruct): 7.62B parameters per its model card
QWEN_7B = {
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "tie_word_embeddings": False,
}


def tiny_config(kind: str, tie: bool) -> dict:
    common = dict(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2)
    if kind == "qwen2":
        from transformers import Qwen2Config

        return Qwen2Config(**common, tie_word_embeddings=tie).to_dict()
    from transformers import LlamaConfig

    return LlamaConfig(**common, tie_word_embeddings=tie).to_dict()


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
@pytest.mark.parametrize("tie", [False, True])
def test_parameter_count_matches_the_real_model(kind, tie):
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = tiny_config(kind, tie)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg))
    assert vram.params_from_config(cfg) == sum(p.numel() for p in model.parameters())


def test_qwen_7b_parameters_and_a_16_gib_gpu_refusal():
    assert abs(vram.params_from_config(QWEN_7B) - 7.62e9) / 7.62e9 < 0.01
    need = vram.estimate([QWEN_7B], torch.float16, tokens=1024)
    assert 14 * vram.GIB < need.weights < 14.5 * vram.GIB
    text = vram.refusal("Qwen pair", need, int(14.5 * vram.GIB), torch.float16, 1024)
    assert text.startswith("The model pair 'Qwen pair' needs about ") and "14.5 GiB free" in text and "\n" not in text
    assert f"{need.total / vram.GIB:.1f} GiB of GPU memory" in text and "float16" in text
    assert vram.refusal("Qwen pair", need, 40 * vram.GIB, torch.float16, 1024) is None  # fits an A100 40 GB
    assert vram.refusal("Qwen pair", need, None, torch.float16, 1024) is None  # no GPU: nothing to check


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_the_gpu_backends_prepared_copy_is_counted(kind):
    """On a GPU the lean layer's backends keep q/k/v and gate/up concatenated beside the weights (engine/model/prepared.py):
    the estimate counts exactly those matrices of the real model; a Qwen2 (biases: transformers' forward) has none."""
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = tiny_config(kind, False)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg))
    copied = sum(
        m.weight.numel()
        for layer in model.model.layers
        for m in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj, layer.mlp.gate_proj, layer.mlp.up_proj)
    )
    assert vram.prepared_params(cfg) == (copied if kind == "llama" else 0)
    need = vram.estimate([cfg], torch.bfloat16, tokens=10)
    assert need.prepared == vram.prepared_params(cfg) * 2
    assert need.total == need.weights + need.prepared + need.kv_cache + need.activations + vram.OVERHEAD_BYTES
    llama3 = {"rope_type": "llama3", "factor": 8.0}
    assert vram.prepared_params(dict(cfg, rope_parameters=llama3)) == vram.prepared_params(dict(cfg, rope_scaling=llama3)) == 0


def test_kv_cache_and_activations_grow_with_context_and_batch():
    small = vram.estimate([QWEN_7B], torch.bfloat16, tokens=100)
    big = vram.estimate([QWEN_7B], torch.bfloat16, tokens=1000, batch=4)
    assert big.weights == small.weights and big.kv_cache == 40 * small.kv_cache
    assert small.kv_cache == 2 * 28 * 4 * 128 * 100 * 2  # keys and values, layers, KV heads, head dim, tokens, bytes
    assert big.activations > small.activations


def test_bad_config_and_bad_sizes_say_so():
    with pytest.raises(ValueError, match="config.json lacks a size field"):
        vram.params_from_config({"hidden_size": 8})
    with pytest.raises(ValueError, match="tokens and batch must be >= 1"):
        vram.estimate([QWEN_7B], torch.float16, tokens=0)


def test_free_bytes_reads_mem_get_info_and_is_none_without_cuda(monkeypatch):
    assert vram.free_bytes("cpu") is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (3 * vram.GIB, 16 * vram.GIB))
    assert vram.free_bytes("cuda") == 3 * vram.GIB
