"""Which forward pass runs a model, and what each pass costs.

`RaggedCache` (engine/model/kvcache.py) owns the cache state and hands every pass to one of these:
- `LeanForward`: SpecLab's gpt-fast-style Llama pass (engine/model/passes.py, `Pass.over_cache`) over the model's
  own weights, for plain Llama models (every backend but "transformers": engine/model/backend.py), and over a
  model of SpecLab's own that is not a transformers model (the EAGLE head's runner, engine/model/eagle_head.py);
- `TransformersForward`: the model's own `forward` (any architecture transformers supports).
Both take the same arguments: tokens (B, n), their positions (B, n), the boolean attention mask over
cache + new columns (None when nothing is padded) and the transformers `DynamicCache` to append to.

`CostCounter` adds up the modelled FLOPs and bytes of the passes (engine/costs.py) until the decode loop
takes them for its `Step`.
"""

from __future__ import annotations

import torch

from engine.costs import ModelCosts
from engine.hardware import configure_attention
from engine.model.backend import Backend, lean_default
from engine.model.fastllama import LeanLlama, supports
from engine.model.passes import Pass


class LeanForward:
    """The lean pass over the dynamic cache, its `Pass` built at the first call (a static cache builds none of these:
    its own `Pass` runs over its buffers, engine/model/static_cache.py)."""

    def __init__(self, model: torch.nn.Module, backend: Backend, runner=None):
        self.lean = LeanLlama(model) if runner is None else None
        self.config = model.config if runner is None else runner.config
        self.runner, self.backend = runner, backend
        self.passes: Pass | None = None

    def __call__(self, input_ids, positions, mask, cache, logits_to_keep=0, return_hidden=False, features=None):
        if self.passes is None:
            lean = self.lean if self.runner is None else self.runner.lean
            self.passes = Pass(lean, self.backend, runner=self.runner)
        return self.passes.over_cache(input_ids, positions, mask, cache, logits_to_keep, return_hidden, features)


class TransformersForward:
    lean = None

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.config = model.config

    def __call__(self, input_ids, positions, mask, cache, logits_to_keep=0, return_hidden=False, features=None):
        if return_hidden:
            raise ValueError("final hidden states need the lean forward (engine/model/fastllama.py)")
        if mask is not None and mask.dim() == 3:
            raise ValueError("tree attention (a per-token mask) needs the lean forward (engine/model/fastllama.py)")
        out = self.model(
            input_ids=input_ids,
            attention_mask=None if mask is None else mask.long(),
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=logits_to_keep,
        )
        return out.logits


def make_forward(model: torch.nn.Module | None, device: torch.device, runner=None, backend: Backend | None = None):
    """The forward for a model (or runner) on `device`: lean where it applies (and the run's `backend` is not
    "transformers"; None: unless the environment asks for it, engine/model/backend.py), else transformers'."""
    configure_attention(device)  # no cuDNN attention plans per cache length on a GPU (engine/hardware.py)
    lean = backend if backend is not None else Backend("torch", torch.device(device))  # the lean pass's backend
    if runner is not None:
        return LeanForward(None, lean, runner=runner)
    if (lean_default() if backend is None else backend.lean) and supports(model):
        return LeanForward(model, lean)
    return TransformersForward(model)


class CostCounter:
    """Modelled FLOPs and bytes of a model's passes since the last `take` (engine/costs.py)."""

    def __init__(self, costs: ModelCosts):
        self.costs = costs
        self.flops = 0.0
        self.bytes = 0.0

    def prefill(self, lengths: list[int], logits_to_keep: int) -> None:
        """A left-padded prefill: count each row's real prompt tokens, not the padding."""
        for length in lengths:
            self.flops += self.costs.forward_flops(1, length, 0, min(logits_to_keep or length, length))
        mean = float(torch.tensor(lengths, dtype=torch.float32).mean())  # as the step counts use it (float32)
        self.bytes += self.costs.forward_bytes(len(lengths), mean, 0)

    def step(self, batch: int, n_new: int, past: float, logits_to_keep: int) -> None:
        """`batch` rows of `n_new` tokens each over a cache of `past` tokens (the mean row length)."""
        self.flops += self.costs.forward_flops(batch, n_new, past, logits_to_keep or n_new)
        self.bytes += self.costs.forward_bytes(batch, n_new, past)

    def take(self) -> tuple[float, float]:
        counts = (self.flops, self.bytes)
        self.flops = self.bytes = 0.0
        return counts
