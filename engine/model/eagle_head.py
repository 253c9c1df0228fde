"""The EAGLE head at inference: loading a saved head and running it (the drafter is engine/drafters/eagle.py).

EAGLE (Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty") drafts at
the feature level. The target's last hidden state f_i (after its final norm) already summarises the
context, so one decoder layer is enough to guess the next one:

    entry i = (f_i, token t_{i+1})  ->  fc([embed(t_{i+1}); f_i])  ->  1 Llama decoder layer  ->  norm  ->  g_i
    g_i ~ f_{i+1}, and lm_head(g_i) ~ the target's distribution of t_{i+2}

The head reuses the target's embedding and output head. With EAGLE-3's feature fusion, f_i is the outputs
of some inner target layers (standardised per dimension) plus the final feature, mapped back to H by one
linear layer. Training (features, the unrolled "training-time test", saving) is offline code:
training/eagle.py. The folder format is engine/formats.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.costs import ModelCosts
from engine.formats import DRAFT_VOCAB_FILE, EAGLE_CONFIG_FILE, EAGLE_FORMAT, EAGLE_WEIGHTS_FILE, head_config, head_weight_shapes
from engine.model.fastllama import LeanLlama
from engine.model.layer import linear


def fuse_features(features: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, weight: torch.Tensor, linear=F.linear) -> torch.Tensor:
    """EAGLE-3 fusion, shared by training and inference: (…, F) target features = [inner layers; final]
    -> standardise the inner layers' columns -> one linear map to (…, H). H-wide features (the head's
    own guesses, fed back while drafting) pass unchanged. `linear(x, weight)`: F.linear, or the runner's."""
    h = weight.shape[0]
    if features.shape[-1] == h:
        return features
    inner = (features[..., :-h] - mean) / std
    return linear(torch.cat([inner, features[..., -h:]], dim=-1), weight)


class EagleLoadError(RuntimeError):
    """An EAGLE head folder that is missing, corrupt or made for another target."""


def load_head(folder: Path, target) -> tuple[dict, dict, torch.Tensor]:
    """(config, state dict, vocabulary ids) of a saved head, checked against `target`."""
    from safetensors.torch import load_file

    folder = Path(folder)
    try:
        config = json.loads((folder / EAGLE_CONFIG_FILE).read_text())
        state = load_file(str(folder / EAGLE_WEIGHTS_FILE))
        vocab = json.loads((folder / DRAFT_VOCAB_FILE).read_text())["ids"]
    except FileNotFoundError as exc:
        raise EagleLoadError(f"EAGLE head {folder}: {Path(exc.filename).name} is missing") from None
    except Exception as exc:  # corrupt json / safetensors
        raise EagleLoadError(f"EAGLE head {folder}: cannot be read ({type(exc).__name__}: {exc})") from None
    if config.get("format") != EAGLE_FORMAT:
        raise EagleLoadError(f"EAGLE head {folder}: config format {config.get('format')!r}, expected {EAGLE_FORMAT!r}")
    expected = head_config(target.config)
    for key in ("hidden_size", "vocab_size"):
        if config.get(key) != expected[key]:
            raise EagleLoadError(f"EAGLE head {folder} was trained for {key}={config.get(key)}, this target has {expected[key]}")
    fuse = config.get("fuse_layers", [])
    layers = target.config.num_hidden_layers
    if not isinstance(fuse, list) or not all(isinstance(i, int) and 0 <= i < layers for i in fuse):
        raise EagleLoadError(f"EAGLE head {folder}: fuse_layers must list target layers in 0..{layers - 1}; got {fuse!r}")
    expected_shapes = head_weight_shapes(config)
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    if shapes != expected_shapes:
        missing = sorted(set(expected_shapes) - set(shapes))
        extra = sorted(set(shapes) - set(expected_shapes))
        wrong = sorted(k for k in set(shapes) & set(expected_shapes) if shapes[k] != expected_shapes[k])
        detail = "; ".join(
            f"{what}: {', '.join(keys)}" for what, keys in (("missing", missing), ("unexpected", extra), ("wrong shape", wrong)) if keys
        )
        raise EagleLoadError(f"EAGLE head {folder}: weights do not match its config ({detail})")
    vocab_size = expected["vocab_size"]
    if not vocab or not all(isinstance(i, int) and 0 <= i < vocab_size for i in vocab):
        raise EagleLoadError(f"EAGLE head {folder}: {DRAFT_VOCAB_FILE} must list token ids in 0..{vocab_size - 1}")
    return config, state, torch.tensor(sorted(set(vocab)), dtype=torch.long)


class EagleRunner:
    """The head at inference: one decoder layer (a body-only LeanLlama, run by engine/model/passes.py's `Pass`) over
    fc([embed(t); f]). Holds the head's weights in the target's dtype and references to the target's embedding and
    (reduced) output head; its matrices in a backend's form live with its PreparedWeights (engine/model/prepared.py),
    so nothing here changes after loading. `RaggedCache(runner=...)` drives it like any other model
    (engine/model/forward.py)."""

    def __init__(self, config: dict, state: dict, vocab: torch.Tensor, target):
        from transformers import LlamaConfig

        ref = target.get_input_embeddings().weight
        dtype, device = ref.dtype, ref.device
        w = {k: v.to(device=device, dtype=dtype) for k, v in state.items()}
        self.head_config = config
        self.config = LlamaConfig(  # one layer: what DynamicCache needs to hold this head's keys/values
            hidden_size=config["hidden_size"],
            num_hidden_layers=1,
            num_attention_heads=config["num_attention_heads"],
            num_key_value_heads=config["num_key_value_heads"],
            head_dim=config["head_dim"],
            intermediate_size=config["intermediate_size"],
            vocab_size=config["vocab_size"],
        )
        layer = tuple(
            w[name]
            for name in (
                "input_layernorm",
                "q_proj.weight",
                "k_proj.weight",
                "v_proj.weight",
                "o_proj.weight",
                "post_attention_layernorm",
                "gate_proj.weight",
                "up_proj.weight",
                "down_proj.weight",
            )
        )
        self.lean = LeanLlama.from_layers(  # its `body` runs our single decoder layer
            [layer],
            n_heads=config["num_attention_heads"],
            n_kv=config["num_key_value_heads"],
            head_dim=config["head_dim"],
            eps=config["rms_norm_eps"],
            rope_theta=config["rope_theta"],
        )
        self.fc_weight, self.fc_bias, self.norm = w["fc.weight"], w["fc.bias"], w["norm"]
        # EAGLE-3 fusion: the verify pass hands over these target layers' outputs plus the final feature
        self.feature_layers = tuple(config.get("fuse_layers", ()))
        self.fuse_weight = w.get("fuse.weight")
        if self.fuse_weight is not None:
            self.fuse_mean, self.fuse_std = w["fuse_mean"], w["fuse_std"]
        self.embed = ref
        self.vocab = vocab.to(device)
        self.head = target.get_output_embeddings().weight[self.vocab].contiguous()  # (C, H): reduced output head
        self.params = sum(v.numel() for v in state.values())

    def matrices(self, weights, backend) -> tuple:
        """(fusion, fc, reduced output head) as the run's `backend` reads them (fusion None without EAGLE-3 fusion), from
        the head's PreparedWeights `weights` (engine/model/prepared.py): what `inputs` and `project` multiply by. A
        pass asks once per run (engine/model/passes.py's `Pass`), as it asks for its layers."""
        fuse = weights.matrix(self.fuse_weight, backend) if self.fuse_weight is not None else None
        return fuse, weights.matrix(self.fc_weight, backend), weights.matrix(self.head, backend)

    def inputs(self, input_ids: torch.Tensor, features: torch.Tensor, backend, matrices: tuple | None = None) -> torch.Tensor:
        """fc([embed(t); f]) (B, n, H): the decoder layer's input, its products as the run's `backend` reads them
        (`matrices`: this backend's, as `matrices` returns them; None: asked for here)."""
        fuse, fc, _ = matrices or self.matrices(self.lean.prepared(), backend)
        if features.dtype != self.embed.dtype:
            features = features.to(self.embed.dtype)
        if fuse is not None:  # target features (B, n, F) -> (B, n, H); the head's own guesses (B, n, H) pass unchanged
            features = fuse_features(features, self.fuse_mean, self.fuse_std, self.fuse_weight, lambda x, w: linear(x, fuse))
        return linear(torch.cat([torch.embedding(self.embed, input_ids), features], dim=-1), fc, self.fc_bias)  # F.embedding's op

    def project(self, g: torch.Tensor, backend, matrices: tuple | None = None) -> torch.Tensor:
        """Logits (…, C) over the reduced vocabulary from guessed features g (…, H), as the run's `backend` reads them
        (`matrices`: as `inputs` takes them)."""
        return linear(g, (matrices or self.matrices(self.lean.prepared(), backend))[2])

    def costs(self):
        """FLOP/byte accounting (engine/costs.py) of one head step: fc + one layer + the reduced head."""
        c = self.head_config
        layer = sum(t.numel() for t in self.lean.layers[0][1:5] + self.lean.layers[0][6:])
        head = self.head.numel()
        linear = self.fc_weight.numel() + layer + head + (self.fuse_weight.numel() if self.fuse_weight is not None else 0)
        return ModelCosts(
            linear_params=linear,
            head_params=head,
            weight_bytes=(self.params + head) * self.embed.element_size(),
            n_layers=1,
            n_heads=c["num_attention_heads"],
            n_kv_heads=c["num_key_value_heads"],
            head_dim=c["head_dim"],
            elem_bytes=self.embed.element_size(),
            vocab_rows=int(self.vocab.numel()),
        )
