"""Prepared weights (engine/model/prepared.py): made once per model beside it, never by rebinding transformers'
parameters; at most one extra copy of a matrix per backend; made again when the model's weights change; the
drafters' caches run on the backend the decode loop chose once."""

from __future__ import annotations

import gc
import weakref
from dataclasses import replace

import pytest
import torch
from conftest import PROMPTS, hf_greedy, tiny_pair

from engine import DecodeConfig, generate
from engine.model import cpukernels, static_cache
from engine.model.backend import Backend
from engine.model.eagle_head import EagleRunner, load_head
from engine.model.pair import Loaded, ModelPair
from engine.model.prepared import lookup

BACKENDS = ("transformers", "torch", "fused") + (("native",) if cpukernels.available() else ())
FIELDS = ("target", "tokenizer", "device", "target_name", "eos_ids", "loaded")


def _pair(tokenizer, dtype=torch.float32) -> ModelPair:
    pair = tiny_pair(tokenizer, draft_noise=0.01)
    pair.target.to(dtype)
    pair.weights("draft").to(dtype)
    return ModelPair(**{f: getattr(pair, f) for f in FIELDS}, dtype=dtype)


def _matrices(model) -> list[tuple[str, torch.nn.Parameter]]:
    """Every projection matrix of the model's decoder layers, by name."""
    return [(name, p) for name, p in model.named_parameters() if name.endswith("proj.weight")]


def _run(pair, name: str, **kw) -> list[list[int]]:
    cfg = DecodeConfig(max_new_tokens=12, backend=name, **({"depth": 3, "drafter": "model"} | kw))
    return generate(pair, PROMPTS[:2], cfg).output_ids


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_transformers_weights_stay_as_loaded_after_every_backend(tokenizer, dtype):
    """After speculative runs on every backend, each q/k/v/o and gate/up/down parameter of target and draft is the
    tensor it was at load: the same storage (not a view of a concatenation), the same values; no attribute was
    added to the model; and transformers' forward (the oracle) gives the logits it gave before."""
    pair = _pair(tokenizer, dtype)
    models = (pair.target, pair.weights("draft"))
    before = [[(name, p.data_ptr(), p.detach().clone()) for name, p in _matrices(m)] for m in models]
    attributes = [set(vars(m)) for m in models]
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.inference_mode():
        logits = pair.target(ids).logits
    for name in BACKENDS:
        _run(pair, name)
    for model, kept, attrs in zip(models, before, attributes):
        for (name, p), (_, ptr, value) in zip(_matrices(model), kept):
            assert p.data_ptr() == ptr and p._base is None and torch.equal(p.detach(), value), name
        assert set(vars(model)) == attrs
        assert not [k for m in model.modules() for k in vars(m) if k.startswith("_speclab")]
    with torch.inference_mode():
        assert torch.equal(pair.target(ids).logits, logits)


def _layer_bytes(model, rows: int = 1) -> dict[str, int]:
    """Bytes of one copy of each kind of the model's layer matrices, N rounded up to `rows` (the native layout: 16)."""
    out = {"qkv_gu": 0, "all": 0}
    for name, p in _matrices(model):
        n = -(-p.shape[0] // rows) * rows
        size = n * p.shape[1] * p.element_size()
        out["all"] += size
        out["qkv_gu"] += size if name.split(".")[-2] in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj") else 0
    return out


@pytest.mark.parametrize("name", [b for b in BACKENDS if b != "transformers"])
def test_each_backend_prepares_at_most_one_extra_copy(tokenizer, name):
    """bfloat16 on the CPU: a backend's runs make one form of each model's matrices, once, holding at most one copy:
    "torch" the concatenated qkv and gate-up matrices, "fused" all four prepacked for oneDNN plus the head, "native"
    all four and the head in the kernels' layout (no oneDNN copy, no concatenation kept beside it)."""
    pair = _pair(tokenizer, torch.bfloat16)
    _run(pair, name)
    expected = {"torch": "concat", "fused": "onednn" if torch.backends.mkldnn.is_available() else "concat", "native": "native"}[name]
    for model in (pair.target, pair.weights("draft")):
        weights = lookup(model)
        made = list(weights.forms)
        backend = Backend(name, torch.device("cpu"))
        layers = weights.layers(backend)
        _run(pair, name)  # a second run reuses them
        assert made == [expected] and lookup(model) is weights and weights.layers(backend) is layers is weights.forms[expected]
        sizes = weights.copies()
        one_copy = _layer_bytes(model, 16 if expected == "native" else 1)
        assert sizes[expected] == one_copy["qkv_gu" if expected == "concat" else "all"], sizes
        heads = [k for k in sizes if k.endswith(" head")]
        assert heads == ([] if expected == "concat" else [expected + " head"])
        for head in heads:  # one copy of the head the pass scores with (the draft's: its reduced FR-Spec head)
            assert sizes[head] <= -(-pair.target.lm_head.weight.shape[0] // 16) * 16 * model.config.hidden_size * 2


@pytest.mark.skipif("native" not in BACKENDS, reason="the native kernels are unavailable")
def test_native_matrices_lie_in_one_block_in_pass_order(tokenizer):
    """The native form's matrices are cut from one block (cpukernels.weight_memory): layer after layer, qkv, o,
    gate-up, down, each at the page after the one before; the head in a block of its own. Not a tensor each, whose
    placement depended on what the process had freed before (docs/engine.md, "Prepared weights")."""
    pair = _pair(tokenizer, torch.bfloat16)
    _run(pair, "native")
    for model in (pair.target, pair.weights("draft")):
        weights = lookup(model)
        matrices = [w for layer in weights.layers(Backend("native", torch.device("cpu"))) for w in (layer[1], layer[2], layer[4], layer[5])]
        start = matrices[0].data.data_ptr()
        assert start % cpukernels.HUGE_PAGE == 0
        for w in matrices:
            assert isinstance(w, cpukernels.Packed) and w.data.data_ptr() == start
            start += cpukernels.packed_bytes(w.n, w.k, w.dtype)
        ((_, head),) = weights.heads.values()
        assert head.data.data_ptr() % cpukernels.HUGE_PAGE == 0


def test_weights_changed_in_place_are_prepared_again(tokenizer):
    """The registry's entry is keyed by the model and stamped with its tensors' versions: after an in-place update
    of a q_proj weight, the next run reads the new values (float32 greedy = transformers' generate() again)."""
    pair = _pair(tokenizer)
    plain = {"mode": "autoregressive", "max_new_tokens": 20}
    for name in BACKENDS[1:]:
        assert generate(pair, [PROMPTS[1]], DecodeConfig(backend=name, **plain)).output_ids[0] == hf_greedy(pair, PROMPTS[1], 20)
    old = lookup(pair.target)
    with torch.no_grad():
        pair.target.model.layers[0].self_attn.q_proj.weight.mul_(3.0)
        pair.target.model.layers[1].mlp.up_proj.weight.add_(0.05)
    ref = hf_greedy(pair, PROMPTS[1], 20)
    for name in BACKENDS[1:]:
        got = generate(pair, [PROMPTS[1]], DecodeConfig(backend=name, **plain)).output_ids[0]
        assert got == ref[: len(got)] and len(got) > 0, name
    assert lookup(pair.target) is not old


def test_the_registry_does_not_keep_a_model_alive(tokenizer):
    pair = _pair(tokenizer)
    _run(pair, BACKENDS[-1])
    assert lookup(pair.target) is not None
    gone = weakref.ref(pair.target)
    del pair
    gc.collect()
    assert gone() is None


def test_drafters_take_the_backend_the_decode_loop_chose(tokenizer, tmp_path, monkeypatch):
    """The decode loop chooses the run's backend once (engine/model/backend.py) and hands it to the drafter: neither
    the draft model's cache nor the EAGLE head's chooses again (make_cache's own choice fails here if asked)."""
    from training import eagle_card, eagle_head

    pair = _pair(tokenizer)
    head = eagle_head.EagleHead.from_target(pair.target, seed=0)
    eagle_card.save_head(head, tmp_path, list(range(0, len(tokenizer), 3)), {"note": "test"}, dtype=torch.float32)
    config, state, vocab = load_head(tmp_path, pair.target)
    pair = replace(pair, loaded=pair.loaded | {"eagle": Loaded(EagleRunner(config, state, vocab, pair.target), "tiny eagle")})
    ref = {d: generate(pair, PROMPTS[:2], DecodeConfig(depth=3, drafter=d, max_new_tokens=12)).output_ids for d in ("model", "eagle")}

    def chosen_again(*args, **kwargs):
        raise AssertionError("make_cache chose a backend again")

    monkeypatch.setattr(static_cache, "choose_backend", chosen_again)
    for drafter in ("model", "eagle"):
        got = generate(pair, PROMPTS[:2], DecodeConfig(depth=3, drafter=drafter, max_new_tokens=12))
        assert got.output_ids == ref[drafter]
