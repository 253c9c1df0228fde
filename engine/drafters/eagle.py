"""The EAGLE head at inference: loading a saved head, running it, and drafting with it.

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

from ..config import ConfigError
from ..costs import ModelCosts
from ..fastllama import LeanLlama, rms_norm
from ..formats import DRAFT_VOCAB_FILE, EAGLE_CONFIG_FILE, EAGLE_FORMAT, EAGLE_WEIGHTS_FILE, head_config, head_weight_shapes
from ..static_cache import make_cache
from .base import ConfidenceGate, Draft, Verified, choose_tokens
from .tree import grow_tree


def fuse_features(features: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """EAGLE-3 fusion, shared by training and inference: (…, F) target features = [inner layers; final]
    -> standardise the inner layers' columns -> one linear map to (…, H). H-wide features (the head's
    own guesses, fed back while drafting) pass unchanged."""
    h = weight.shape[0]
    if features.shape[-1] == h:
        return features
    inner = (features[..., :-h] - mean) / std
    return F.linear(torch.cat([inner, features[..., -h:]], dim=-1), weight)



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
            raise EagleLoadError(
                f"EAGLE head {folder} was trained for {key}={config.get(key)}, this target has {expected[key]}"
            )
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
        detail = "; ".join(f"{what}: {', '.join(keys)}" for what, keys in
                           (("missing", missing), ("unexpected", extra), ("wrong shape", wrong)) if keys)
        raise EagleLoadError(f"EAGLE head {folder}: weights do not match its config ({detail})")
    vocab_size = expected["vocab_size"]
    if not vocab or not all(isinstance(i, int) and 0 <= i < vocab_size for i in vocab):
        raise EagleLoadError(f"EAGLE head {folder}: {DRAFT_VOCAB_FILE} must list token ids in 0..{vocab_size - 1}")
    return config, state, torch.tensor(sorted(set(vocab)), dtype=torch.long)


class EagleRunner:
    """The head at inference: the lean forward's decoder layer (engine/fastllama.py) over
    fc([embed(t); f]). Holds the head's weights in the target's dtype and references to the target's
    embedding and (reduced) output head. `RaggedCache(runner=...)` drives it like any other model (engine/forward.py)."""

    def __init__(self, config: dict, state: dict, vocab: torch.Tensor, target):
        from transformers import LlamaConfig

        ref = target.get_input_embeddings().weight
        dtype, device = ref.dtype, ref.device
        w = {k: v.to(device=device, dtype=dtype) for k, v in state.items()}
        self.head_config = config
        self.config = LlamaConfig(  # one layer: what DynamicCache needs to hold this head's keys/values
            hidden_size=config["hidden_size"], num_hidden_layers=1, num_attention_heads=config["num_attention_heads"],
            num_key_value_heads=config["num_key_value_heads"], head_dim=config["head_dim"],
            intermediate_size=config["intermediate_size"], vocab_size=config["vocab_size"],
        )
        layer = tuple(w[name] for name in (
            "input_layernorm", "q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
            "post_attention_layernorm", "gate_proj.weight", "up_proj.weight", "down_proj.weight"))
        self.lean = LeanLlama.from_layers(  # its `body` runs our single decoder layer
            [layer], n_heads=config["num_attention_heads"], n_kv=config["num_key_value_heads"],
            head_dim=config["head_dim"], eps=config["rms_norm_eps"], rope_theta=config["rope_theta"],
        )  # fmt: skip
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

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor | None, cache,
                features: torch.Tensor) -> torch.Tensor:
        """Entries (B, n): tokens t_{p+1} and features (B, n, H) f_p. Returns g (B, n, H), the guessed next
        features; `self.head` @ g scores the next token over the reduced vocabulary."""
        x = self.lean.body(self.inputs(input_ids, features), positions, valid, cache)
        return rms_norm(x, self.norm, self.lean.eps)

    def inputs(self, input_ids: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """fc([embed(t); f]) (B, n, H): the decoder layer's input (also the static-buffer pass's, engine/static_cache.py)."""
        features = features.to(self.embed.dtype)
        if self.fuse_weight is not None:  # target features (B, n, F) -> (B, n, H)
            features = fuse_features(features, self.fuse_mean, self.fuse_std, self.fuse_weight)
        return F.linear(torch.cat([F.embedding(input_ids, self.embed), features], dim=-1), self.fc_weight, self.fc_bias)

    def costs(self):
        """FLOP/byte accounting (engine/costs.py) of one head step: fc + one layer + the reduced head."""
        c = self.head_config
        layer = sum(t.numel() for t in self.lean.layers[0][1:5] + self.lean.layers[0][6:])
        head = self.head.numel()
        linear = self.fc_weight.numel() + layer + head + (self.fuse_weight.numel() if self.fuse_weight is not None else 0)
        return ModelCosts(
            linear_params=linear, head_params=head, weight_bytes=(self.params + head) * self.embed.element_size(),
            n_layers=1, n_heads=c["num_attention_heads"], n_kv_heads=c["num_key_value_heads"], head_dim=c["head_dim"],
            elem_bytes=self.embed.element_size(), vocab_rows=int(self.vocab.numel()),
        )


class EagleDrafter:
    """EAGLE (Li et al. 2024): one decoder layer that drafts from the target's own final hidden states.

    Its cache holds entries i = (f_i, t_{i+1}) for every token but the last, like the target's cache.
    The target's features arrive with each verify pass and wait in `pending` until the next `propose`
    feeds them (with the tokens they preceded) in one forward; each further draft step feeds the head's
    own output g back in. After verification the draft entries are dropped and the verified features of
    the accepted tokens (plus the correction/bonus position) become the new `pending` (training/eagle.py trains it)."""

    kind = "eagle"

    @classmethod
    def available(cls, pair) -> bool:
        return pair.eagle is not None

    @classmethod
    def label(cls, pair, cfg=None) -> str:
        return pair.eagle_name or "EAGLE head"

    @classmethod
    def params(cls, pair) -> int:
        return pair.eagle.params if pair.eagle is not None else 0  # its own weights: it borrows the target's embedding and head

    @classmethod
    def build(cls, pair, cfg, pad_id: int) -> EagleDrafter:
        if pair.eagle is None:
            raise ConfigError("drafter='eagle' needs an EAGLE head for this target, but none is loaded: "
                              "use drafter='model' or 'ngram'")
        return cls(pair.eagle, pair.device, pair.eagle_costs, pad_id, cfg=cfg)

    def __init__(self, runner, device: torch.device, costs, pad_id: int, cfg=None):
        self.runner = runner
        self.cache = make_cache(None, device, costs, cfg, runner=runner)  # static buffers / CUDA graphs per cfg
        self.pad_id = pad_id
        self.vocab = runner.vocab  # (C,) token ids the head scores
        self.vocab_size = runner.config.vocab_size
        self.pending: torch.Tensor | None = None  # (B, P, H) target features not yet in the cache
        self.pending_valid: torch.Tensor | None = None  # (B, P) bool: ragged rows leave holes
        self.drafted = 0
        # the target hands over its final features, and for a head with EAGLE-3 fusion some earlier layers' too
        self.target_features = runner.feature_layers or True

    def prefill(self, sequences: list[list[int]], hidden: torch.Tensor) -> None:
        """hidden (B, W, H): the target's features over the left-padded prompts (as its prefill padded them).
        Entries 0..L-2 pair f_i with t_{i+1}; f_{L-1} waits for the target's first token."""
        self.cache.prefill([s[1:] for s in sequences], self.pad_id, logits_to_keep=1, features=hidden[:, :-1])
        self.pending = hidden[:, -1:]
        self.pending_valid = torch.ones(hidden.shape[0], 1, dtype=torch.bool, device=hidden.device)

    def propose(self, sequences: list[list[int]], depth: int, cfg, generator) -> Draft:
        device = self.cache.device
        batch, width = self.pending_valid.shape
        counts = self.pending_valid.sum(1).tolist()
        # the tokens that follow each pending feature: each row's last `count` tokens, in its valid columns
        tokens = torch.full((batch, width), self.pad_id, dtype=torch.long)
        valid_cpu = self.pending_valid.cpu()
        for r, (seq, n) in enumerate(zip(sequences, counts)):
            tokens[r, valid_cpu[r]] = torch.tensor(seq[-n:], dtype=torch.long)
        ragged = not bool(valid_cpu.all())
        g = self.cache.forward(tokens.to(device), logits_to_keep=1, features=self.pending,
                               new_valid=self.pending_valid if ragged else None)  # (B, P, H)
        last = width - 1 - self.pending_valid.flip(1).long().argmax(1)  # (B,) each row's last real column
        feature = g[torch.arange(batch, device=device), last]  # (B, H)
        fed = width
        if cfg.tree:
            return self.propose_tree(feature, depth, cfg, fed)
        gate = ConfidenceGate(batch, cfg.confidence_threshold, device)
        for i in range(depth):
            logits = torch.nn.functional.linear(feature, self.runner.head)  # (B, C): over the reduced vocabulary
            token = gate.add(*choose_tokens(logits, cfg.temperature, cfg.top_p, generator, self.vocab, self.vocab_size))
            if gate.done or i == depth - 1:
                break
            feature = self.cache.forward(token[:, None], logits_to_keep=1, features=feature[:, None])[:, -1]
            fed += 1
        self.pending = self.pending_valid = None
        self.drafted = gate.width - 1  # draft entries now in the cache, dropped again in `commit`
        return gate.draft(forwards=gate.width, fed_tokens=fed)

    def propose_tree(self, feature: torch.Tensor, depth: int, cfg, fed: int) -> Draft:
        """EAGLE-2's dynamic tree (engine/drafters/tree.py) from the root's guessed feature (B, H): each
        frontier node is a head entry (its token, its parent's guessed feature g); its children are scored
        from its own g. The tree entries are dropped again in `commit`, like a chain's."""
        k = cfg.tree_topk

        def feed(tokens, positions, attend, parent_g):
            g = self.cache.forward_tree(tokens, positions, attend, features=parent_g)  # (B, k, H)
            return F.linear(g, self.runner.head), g  # logits (B, k, C) over the reduced vocabulary

        root_g = feature[:, None].expand(feature.shape[0], k, feature.shape[-1])  # (B, k, H)
        tree = grow_tree(self.cache, F.linear(feature, self.runner.head), depth, cfg, self.vocab, feed, root_g)
        self.pending = self.pending_valid = None
        self.drafted = k * (depth - 1)  # tree entries now in the cache, dropped again in `commit`
        return Draft(ids=tree.tokens, q_x=tree.q, probs=None, valid=torch.ones_like(tree.tokens, dtype=torch.bool),
                     forwards=depth, fed_tokens=fed + self.drafted, tree=tree)

    def commit(self, verified: Verified) -> None:
        """verified.hidden (B, k+1, H): the target pass's features. After a plain step its one feature joins
        the pending ones. After verification the draft entries are dropped, and row r's first a_r + 1
        verified features (its accepted tokens and the one before them) become pending."""
        hidden = verified.hidden
        if verified.draft is None:
            self.pending = torch.cat([self.pending, hidden], dim=1)
            self.pending_valid = torch.cat([self.pending_valid, torch.ones_like(self.pending_valid[:, :1])], dim=1)
            return
        self.cache.keep(self.cache.lengths - self.drafted)
        self.drafted = 0
        self.pending = hidden
        self.pending_valid = torch.arange(hidden.shape[1], device=hidden.device)[None, :] <= verified.num_accepted[:, None]

    def select(self, rows: torch.Tensor) -> None:
        self.cache.select(rows)
        if self.pending is not None:
            self.pending, self.pending_valid = self.pending[rows], self.pending_valid[rows]
        # columns that are holes in every remaining row could be trimmed; `propose` copes with them

    def take_counts(self) -> tuple[float, float]:
        return self.cache.take_counts()

    def token_flops(self, context: int) -> float:
        return self.cache.costs.token_flops(context)
