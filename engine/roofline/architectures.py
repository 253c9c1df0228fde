"""Real model architectures by size, as the roofline predictor prices them: weight bytes, KV bytes, FLOPs.

Each entry is a published checkpoint's shape (its config.json: layers, hidden size, heads, KV heads, head
dimension, MLP width, vocabulary, tied embeddings). `Architecture.costs(dtype)` turns it into the engine's
own `ModelCosts` (engine/costs.py), so a predicted pass counts FLOPs and bytes exactly as SpecLab counts a
measured one; for the embedded SmolLM2-135M shape the two are equal (tests/engine/test_predictor.py checks
this against `ModelCosts.from_model` of the real architecture).

Simplifications, stated: every MLP is gated (three matrices: Llama's SwiGLU, Gemma-2's GeGLU); norms are
counted as weights to stream but do no matmul FLOPs; Gemma-2's sliding-window layers (window 4096 on every
other layer) are priced as full attention, an upper bound on its KV reads above 4096 tokens of context;
Qwen2.5's q/k/v biases are counted as weights.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.costs import ModelCosts
from engine.roofline.gpus import DTYPE_BYTES


@dataclass(frozen=True)
class Architecture:
    key: str  # the size as the page names it ("8B")
    name: str  # the checkpoint whose config this is
    source: str  # where that config is published
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool  # input embedding and output head share one matrix
    qkv_bias: bool = False
    shape_names: tuple[str, ...] = ()  # names SpecLab's GPU scripts use for this shape (scripts/record/gpu_bench.py SHAPES)
    note: str = ""

    # --- parameter counts -------------------------------------------------------------------------
    @property
    def layer_linear_params(self) -> int:
        """Weights inside one decoder layer's matmuls: q, k, v, o projections and the gated MLP."""
        q_out, kv_out = self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = self.hidden * q_out + 2 * self.hidden * kv_out + q_out * self.hidden
        return attention + 3 * self.hidden * self.intermediate

    @property
    def head_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def linear_params(self) -> int:
        """Every matmul weight, the output head included (what the 2·params·tokens rule multiplies)."""
        return self.layers * self.layer_linear_params + self.head_params

    @property
    def small_params(self) -> int:
        """Norm weights (two per layer and a final one) and q/k/v biases: streamed, but no matmul FLOPs."""
        bias = self.layers * (self.heads + 2 * self.kv_heads) * self.head_dim if self.qkv_bias else 0
        return (2 * self.layers + 1) * self.hidden + bias

    @property
    def parameters(self) -> int:
        """All parameters of the checkpoint (an untied input embedding included)."""
        return self.linear_params + self.small_params + (0 if self.tied else self.vocab * self.hidden)

    def costs(self, dtype: str = "bfloat16") -> ModelCosts:
        """The engine's cost model for this shape with weights and KV cache in `dtype`.

        Weight bytes follow `ModelCosts.from_model`: every parameter streamed once per forward, except an
        untied input embedding, of which a pass only gathers its tokens' rows."""
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPE_BYTES)}; got {dtype!r}")
        elem = DTYPE_BYTES[dtype]
        return ModelCosts(
            linear_params=self.linear_params,
            head_params=self.head_params,
            weight_bytes=(self.linear_params + self.small_params) * elem,
            n_layers=self.layers,
            n_heads=self.heads,
            n_kv_heads=self.kv_heads,
            head_dim=self.head_dim,
            elem_bytes=elem,
            vocab_rows=self.vocab,
            resident_bytes=self.parameters * elem,
        )

    def kv_bytes(self, context: int, dtype: str = "bfloat16") -> int:
        """KV-cache bytes of one sequence holding `context` tokens."""
        return self.costs(dtype).kv_bytes_per_token * int(context)


HF = "https://huggingface.co/{}/blob/main/config.json"
ARCHITECTURES: dict[str, Architecture] = {
    a.key: a
    for a in (
        Architecture(
            "135M",
            "SmolLM2-135M",
            HF.format("HuggingFaceTB/SmolLM2-135M-Instruct"),
            layers=30,
            hidden=576,
            intermediate=1536,
            heads=9,
            kv_heads=3,
            head_dim=64,
            vocab=49152,
            tied=True,
            shape_names=("smollm2-135m",),
            note="SpecLab's embedded target.",
        ),
        Architecture(
            "1.7B",
            "SmolLM2-1.7B",
            HF.format("HuggingFaceTB/SmolLM2-1.7B-Instruct"),
            layers=24,
            hidden=2048,
            intermediate=8192,
            heads=32,
            kv_heads=32,
            head_dim=64,
            vocab=49152,
            tied=True,
            shape_names=("smollm2-1.7b",),
        ),
        Architecture(
            "7B",
            "Qwen2.5-7B",
            HF.format("Qwen/Qwen2.5-7B-Instruct"),
            layers=28,
            hidden=3584,
            intermediate=18944,
            heads=28,
            kv_heads=4,
            head_dim=128,
            vocab=152064,
            tied=False,
            qkv_bias=True,
            shape_names=("qwen2.5-7b",),
            note="Recorded on an H200 by scripts/investigate/gpu_graphs.py.",
        ),
        Architecture(
            "8B",
            "Llama-3.1-8B",
            HF.format("meta-llama/Llama-3.1-8B-Instruct"),
            layers=32,
            hidden=4096,
            intermediate=14336,
            heads=32,
            kv_heads=8,
            head_dim=128,
            vocab=128256,
            tied=False,
        ),
        Architecture(
            "27B",
            "Gemma-2-27B",
            HF.format("google/gemma-2-27b-it"),
            layers=46,
            hidden=4608,
            intermediate=36864,
            heads=32,
            kv_heads=16,
            head_dim=128,
            vocab=256000,
            tied=True,
            note="Sliding-window layers priced as full attention (an upper bound above 4096 tokens).",
        ),
        Architecture(
            "70B",
            "Llama-3.1-70B",
            HF.format("meta-llama/Llama-3.1-70B-Instruct"),
            layers=80,
            hidden=8192,
            intermediate=28672,
            heads=64,
            kv_heads=8,
            head_dim=128,
            vocab=128256,
            tied=False,
        ),
    )
}


def architecture(key: str) -> Architecture:
    """The architecture called `key` ("8B", case-insensitive) or by a GPU script's shape name ("qwen2.5-7b")."""
    for entry in ARCHITECTURES.values():
        if str(key).lower() in (entry.key.lower(), *entry.shape_names):
            return entry
    raise ValueError(f"unknown model size {key!r}; choose from {', '.join(ARCHITECTURES)}")
