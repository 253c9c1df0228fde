"""Shared fixtures: tiny random Llama-style models (built from a config, no downloads) and the real
embedded target in float32 (exactness is tested in float32: bf16 rounds differently across pass shapes).
Every test starts with goodput's warm-start store empty (engine/decoding/warmstart.py), so no test's choices
depend on which tests ran before it."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from engine.decoding import warmstart
from engine.model import backend
from engine.model.pair import Loaded, ModelPair, embedded_model_dir, load_pair

os.environ.setdefault("SPECLAB_PRELOAD", "0")  # no app test (AppTest, a browser's server) loads the model in the background
# unless it asks to: tests/app/test_run_lock.py checks the preload itself

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea, the wind and the salt on the rocks.",
    "Hi",
]


def no_kernels_reason() -> str:
    """The skip reason of a test of the native kernels (they need gcc and AVX-512): why they are off here, and what
    runs instead, which the fallback test checks on every machine."""
    return (
        f"native kernels unavailable ({backend.why_not_native()}): this machine runs the fused pass (backend 'fused': "
        "torch ops only, torch's argmax, log-sum-exp and top-k included), which "
        "tests/engine/test_fastpass.py::test_the_fallback_without_the_kernels_equals_transformers checks"
    )


@pytest.fixture(autouse=True)
def cold_goodput(tmp_path_factory, monkeypatch):
    """Each test's goodput runs start from the priors, as in a fresh process on a fresh machine: the store is empty
    and its files go to a folder of the test's own (never the machine's $SPECLAB_DATA)."""
    folder = tmp_path_factory.mktemp("goodput")
    monkeypatch.setattr(warmstart, "state_dir", lambda: folder)
    warmstart.forget()
    yield
    warmstart.forget()


def chi2_pvalue(samples: torch.Tensor, p: torch.Tensor) -> float:
    """Chi-square goodness of fit of integer samples to the distribution p."""
    observed = np.bincount(samples.numpy(), minlength=p.numel())
    expected = p.double().numpy() / p.double().sum().item() * observed.sum()
    return chisquare(observed, expected).pvalue


def hf_greedy(pair, prompt: str, max_new_tokens: int) -> list[int]:
    """Reference: transformers' own greedy generate() on the same chat-templated prompt."""
    ids = torch.tensor([pair.encode_prompt(prompt)])
    eos = sorted(pair.eos_ids) or None
    with torch.inference_mode():
        out = pair.target.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=max_new_tokens,
            eos_token_id=eos,
            pad_token_id=eos[0] if eos else 0,
        )
    return out[0, ids.shape[1] :].tolist()


@pytest.fixture(scope="session")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_model_dir())


def tiny_llama(vocab_size: int, layers: int = 2, hidden: int = 64, seed: int = 0, attn: str = "sdpa"):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        initializer_range=0.2,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        attn_implementation=attn,
    )
    # Untied, wide-init weights: a random model whose greedy continuation depends on the context
    # (tied small-init models just repeat their last input token, which would make exactness tests vacuous).
    return LlamaForCausalLM(cfg).eval()


def noisy_copy(model, noise: float, seed: int = 3):
    """A draft that agrees with the target often but not always: its weights plus relative Gaussian noise."""
    import copy

    draft = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * noise * p.std())
    return draft


def tiny_pair(tokenizer, draft_same_as_target: bool = False, with_draft: bool = True, draft_noise: float | None = None) -> ModelPair:
    target = tiny_llama(len(tokenizer), layers=2, seed=0)
    draft = None
    if draft_noise is not None:
        draft = noisy_copy(target, draft_noise)
    elif with_draft:
        draft = target if draft_same_as_target else tiny_llama(len(tokenizer), layers=1, seed=1)
    return ModelPair(
        target=target,
        tokenizer=tokenizer,
        device=torch.device("cpu"),
        dtype=torch.float32,
        target_name="tiny-llama",
        eos_ids=frozenset(),
        loaded={"draft": Loaded(draft, "tiny-draft")} if draft is not None else {},
    )


def tiny_eagle_pair(tokenizer, folder, fuse_layers: tuple[int, ...] = (), name: str = "tiny eagle") -> ModelPair:
    """`tiny_pair` (a noisy draft) with an untrained, seeded EAGLE head over every third token, saved in `folder` and
    loaded as the engine loads one; with `fuse_layers` it also fuses those target layers' outputs (EAGLE-3), its
    fusion matrix nudged off the identity so the fused features matter."""
    from engine.model.eagle_head import EagleRunner, load_head
    from training import eagle_card, eagle_head

    pair = tiny_pair(tokenizer, draft_noise=0.01)
    head = eagle_head.EagleHead.from_target(pair.target, seed=0, fuse_layers=fuse_layers)
    if fuse_layers:
        with torch.no_grad():
            head.fuse.weight.add_(torch.randn(head.fuse.weight.shape, generator=torch.Generator().manual_seed(1)) * 0.05)
    eagle_card.save_head(head, folder, list(range(0, len(tokenizer), 3)), {"note": "test"}, dtype=torch.float32)
    config, state, vocab = load_head(folder, pair.target)
    return replace(pair, loaded=pair.loaded | {"eagle": Loaded(EagleRunner(config, state, vocab, pair.target), name)})


@pytest.fixture(scope="session")
def tiny(tokenizer):
    """Tiny target + a noisy copy as draft: it accepts some drafts and rejects others (alpha ~0.3)."""
    return tiny_pair(tokenizer, draft_noise=0.01)


@pytest.fixture(scope="session")
def embedded_f32():
    return load_pair(dtype="float32")


@pytest.fixture
def lesson_constant(monkeypatch):
    """set(name, value): a lesson's constant (rounds, tokens, batches), set in the lesson module that defines it for
    one test, so a live run of lessons 4-7 stays small."""
    from app.lessons import l4_turn_it_off, l5_adaptive, l6_by_load, l7_width

    def set_(name: str, value) -> None:
        home = next(m for m in (l4_turn_it_off, l5_adaptive, l6_by_load, l7_width) if name in vars(m) and not callable(vars(m)[name]))
        monkeypatch.setattr(home, name, value)

    return set_


@pytest.fixture(scope="session", autouse=True)
def own_contexts(tmp_path_factory):
    """Lesson 8's long contexts, kept on disk (app/lessons/kit/runs.py, `contexts_dir`), go to the session's own folder,
    never the machine's."""
    from app.lessons.kit import runs

    patch = pytest.MonkeyPatch()
    patch.setattr(runs, "contexts_dir", lambda: tmp_path_factory.mktemp("contexts"))
    yield
    patch.undo()
