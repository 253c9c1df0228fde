"""EAGLE-style draft head: a one-layer drafter that reads the target's own hidden states.

EAGLE (Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty") drafts at
the feature level. The target's last hidden state f_i (after its final norm; the target's logits are
lm_head(f_i)) already summarises the whole context, so a single decoder layer is enough to guess the
next one:

    entry i = (f_i, token t_{i+1})  ->  fc([embed(t_{i+1}); f_i])  ->  1 Llama decoder layer  ->  norm  ->  g_i
    g_i ~ f_{i+1}, and lm_head(g_i) ~ the target's distribution of t_{i+2}

The head reuses the target's embedding and output head (not shipped: only fc, the layer and a norm,
~4.2 M parameters). With EAGLE-3's feature fusion (`--fuse-layers`), f_i is the outputs of some inner
target layers (standardised per dimension) plus the final feature, mapped back to H by one more linear
layer (`fuse`, +1 M parameters for two layers); the head's own guesses g feed back unfused. Drafting k
tokens: the first step reads true target features; later steps feed the head's own g back in
(feature-level autoregression). Training unrolls that loop (EAGLE-3's "training-time test"): at depth s
a query attends to true-feature keys up to s entries back and to the keys its own earlier draft steps
produced, exactly what it sees when drafting.

    python -m training.eagle --help
    python -m training.eagle --work-dir distill_work --out assets/eagle   # features, train, save, eval

The training data are the distillation's target-generated responses (`python -m training.distill`
stages prompts + generate, in the same --work-dir); the features come from one batched target pass.
`--device cuda` runs that pass and the training on a GPU (features and batches stay in CPU memory);
`scripts/investigate/gpu_eagle.py` runs generation, features and training there in one time-boxed process, which is
how the shipped head (run 14) was trained.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.formats import DRAFT_VOCAB_FILE as VOCAB_FILE
from engine.formats import EAGLE_CONFIG_FILE as CONFIG_FILE
from engine.formats import EAGLE_FORMAT as CONFIG_FORMAT
from engine.formats import EAGLE_WEIGHTS_FILE as WEIGHTS_FILE
from engine.formats import head_config, write_draft_vocab
from engine.model.eagle_head import EagleLoadError, fuse_features, load_head  # noqa: F401  (re-exported)
from engine.model.fastllama import rms_norm, rotate_half

from .data import TeeLog, length_batches, read_shards
from .features import concat_features, covers_prefix, extract_features  # noqa: F401  (re-exported)
from .prompts import heldout_eval_prompts

# 1. features: training/features.py (one teacher-forcing pass of the target over every prompt + response)
# --------------------------------------------------------------------------------------------------
# 2. the head
# --------------------------------------------------------------------------------------------------


class EagleHead(torch.nn.Module):
    """fc([embed(t); f]) -> one Llama decoder layer -> RMSNorm. Embedding and output head are the target's."""

    def __init__(self, config: dict):
        super().__init__()
        self.config = dict(config)
        h, i = config["hidden_size"], config["intermediate_size"]
        nh, nkv, hd = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
        self.fuse_layers = tuple(config.get("fuse_layers", ()))
        if self.fuse_layers:  # EAGLE-3: [low; mid; ...; final] target features -> one H-wide feature
            self.fuse = torch.nn.Linear(h * (len(self.fuse_layers) + 1), h, bias=False)
            # Inner layers' outputs are the raw residual stream: SmolLM2's layer 15 has RMS 80 with single
            # dimensions near 25,000 ("massive activations"). Each dimension is standardised with fixed
            # statistics of the training features (set by `set_fuse_stats`) before the linear map.
            n = h * len(self.fuse_layers)
            self.register_buffer("fuse_mean", torch.zeros(n))
            self.register_buffer("fuse_std", torch.ones(n))
        self.fc = torch.nn.Linear(2 * h, h, bias=True)
        self.input_layernorm = torch.nn.Parameter(torch.ones(h))
        self.q_proj = torch.nn.Linear(h, nh * hd, bias=False)
        self.k_proj = torch.nn.Linear(h, nkv * hd, bias=False)
        self.v_proj = torch.nn.Linear(h, nkv * hd, bias=False)
        self.o_proj = torch.nn.Linear(nh * hd, h, bias=False)
        self.post_attention_layernorm = torch.nn.Parameter(torch.ones(h))
        self.gate_proj = torch.nn.Linear(h, i, bias=False)
        self.up_proj = torch.nn.Linear(h, i, bias=False)
        self.down_proj = torch.nn.Linear(i, h, bias=False)
        self.norm = torch.nn.Parameter(torch.ones(h))
        dim = hd
        self.register_buffer(
            "inv_freq", 1.0 / (config["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)), persistent=False
        )

    def init_fuse(self) -> None:
        """fuse starts by passing the final feature through (the other layers' columns at zero), so a fused
        head starts as exactly the unfused head it was initialised from."""
        if self.fuse_layers:
            h = self.config["hidden_size"]
            with torch.no_grad():
                self.fuse.weight.zero_()
                self.fuse.weight[:, -h:] = torch.eye(h)

    @torch.no_grad()
    def set_fuse_stats(self, features: torch.Tensor, chunk: int = 65536) -> None:
        """Per-dimension mean and std of the inner layers' columns of (N, F) training features."""
        n = self.fuse_mean.numel()
        total, sq, count = torch.zeros(n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64), 0
        for i in range(0, features.shape[0], chunk):
            x = features[i : i + chunk, :n].double()
            total += x.sum(0)
            sq += x.pow(2).sum(0)
            count += x.shape[0]
        mean = total / count
        self.fuse_mean.copy_(mean.float())
        self.fuse_std.copy_((sq / count - mean.pow(2)).clamp_min(1e-6).sqrt().float())

    def fused(self, features: torch.Tensor) -> torch.Tensor:
        """Target features (…, F) -> (…, H); H-wide features (the head's own guesses) pass unchanged."""
        if self.fuse_layers:
            return fuse_features(features, self.fuse_mean, self.fuse_std, self.fuse.weight)
        return features

    @classmethod
    def from_target(cls, target, seed: int = 0, fuse_layers: tuple[int, ...] = ()) -> EagleHead:
        """Start as a pass-through: fc copies the feature f_p (plus a small random projection of the token
        embedding) and the layer's two residual branches start at zero (random q/k/v/gate/up, zero o/down),
        so at step 0 the head guesses lm_head(f_p / rms): the target's own previous prediction.
        Measured on this machine (30 steps, lr 3e-3): loss 13.6 and top-1 0.23, against 15.3 and 0.11 when
        the layer was a copy of the target's last layer."""
        torch.manual_seed(seed)
        head = cls(head_config(target.config, fuse_layers))
        head.init_fuse()
        with torch.no_grad():
            for name in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"):
                torch.nn.init.normal_(getattr(head, name).weight, std=0.02)
            head.o_proj.weight.zero_()
            head.down_proj.weight.zero_()
            h = head.config["hidden_size"]
            torch.nn.init.normal_(head.fc.weight, std=0.02)
            head.fc.weight[:, h:] += torch.eye(h)
            head.fc.bias.zero_()
        return head

    # The same arithmetic as engine/model/fastllama.py's _layer, unrolled over draft depths for training.
    def _rope(self, positions: torch.Tensor, dtype):
        freqs = positions[..., None].float() * self.inv_freq  # (B, T, hd/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype)[:, None], emb.sin().to(dtype)[:, None]  # (B, 1, T, hd)

    def _qkv(self, x, cos, sin):
        c = self.config
        b, t, _ = x.shape
        h = rms_norm(x, self.input_layernorm, c["rms_norm_eps"])
        q = self.q_proj(h).view(b, t, c["num_attention_heads"], c["head_dim"]).transpose(1, 2)
        k = self.k_proj(h).view(b, t, c["num_key_value_heads"], c["head_dim"]).transpose(1, 2)
        v = self.v_proj(h).view(b, t, c["num_key_value_heads"], c["head_dim"]).transpose(1, 2)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v

    def _rest(self, x, a):
        eps = self.config["rms_norm_eps"]
        b, t, _ = x.shape
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, t, -1))
        h = rms_norm(x, self.post_attention_layernorm, eps)
        x = x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))
        return rms_norm(x, self.norm, eps)

    def unrolled(self, token_embeds: torch.Tensor, features: torch.Tensor, positions: torch.Tensor, depths: int, noise: float = 0.0):
        """Training-time test. token_embeds (B, T, H) = embed(t_{p+1}), features (B, T, H) = f_p for entries p.

        With fuse_layers, features are (B, T, F) and are fused to H first. noise (EAGLE-1's augmentation,
        training mode only): uniform noise of up to `noise` x each feature's RMS is added to the fused
        target features, so the head learns not to lean on their exact values (its own guesses, fed back
        while drafting, are never exact).
        Returns [g^0, ..., g^{depths-1}], each (B, T, H): g^s[p] is the head's guess of f_{p+1} when entry p
        is its (s+1)-th draft step, i.e. its input feature is g^{s-1}[p-1] and it attends to the true
        entries up to p - s plus its own draft entries p-s+1..p (right padding needs no mask: causal)."""
        c = self.config
        groups = c["num_attention_heads"] // c["num_key_value_heads"]
        scale = c["head_dim"] ** -0.5
        cos, sin = self._rope(positions, features.dtype)
        t = features.shape[1]
        rows = torch.arange(t, device=features.device)
        outs, keys, values = [], [], []
        feat = self.fused(features)
        if noise and self.training:
            rms = feat.float().pow(2).mean(-1, keepdim=True).sqrt().to(feat.dtype)
            feat = feat + noise * rms * (2 * torch.rand_like(feat) - 1)
        for s in range(depths):
            x = self.fc(torch.cat([token_embeds, feat], dim=-1))
            q, k, v = self._qkv(x, cos, sin)
            k = k.repeat_interleave(groups, dim=1)  # (B, nh, T, hd)
            v = v.repeat_interleave(groups, dim=1)
            if s == 0:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
                k0, v0 = k, v
            else:
                keys.append(k)
                values.append(v)
                # true entries j <= p - s ...
                scores = (q @ k0.transpose(-1, -2)) * scale  # (B, nh, T, T)
                scores = scores.masked_fill(~(rows[None, :] <= rows[:, None] - s), float("-inf"))
                # ... and draft entries p-s+1..p: key t (depth t) at entry p-(s-t), one per query
                diag = [((q * _shift(kt, s - 1 - j)).sum(-1) * scale)[..., None] for j, kt in enumerate(keys)]
                weights = torch.softmax(torch.cat([scores] + diag, dim=-1).float(), dim=-1).to(q.dtype)
                a = weights[..., :t] @ v0
                for j, vt in enumerate(values):
                    a = a + weights[..., t + j : t + j + 1] * _shift(vt, s - 1 - j)
            g = self._rest(x, a)
            outs.append(g)
            feat = _shift(g, 1)
        return outs


def _shift(x: torch.Tensor, n: int) -> torch.Tensor:
    """Shift along the time axis (-2) by n to the right: out[..., p, :] = x[..., p - n, :] (zeros before)."""
    if n == 0:
        return x
    pad = torch.zeros_like(x[..., :n, :])
    return torch.cat([pad, x[..., :-n, :]], dim=-2)


# --------------------------------------------------------------------------------------------------
# 3. train
# --------------------------------------------------------------------------------------------------


class FeatureData:
    """Rows of (tokens, target features) from `extract_features`, batched by length."""

    def __init__(self, blob: dict):
        self.features, self.tokens = blob["features"], blob["tokens"].long()
        self.offsets, self.starts = blob["offsets"].tolist(), blob["starts"].tolist()

    def __len__(self) -> int:
        return len(self.starts)

    def length(self, i: int) -> int:
        return self.offsets[i + 1] - self.offsets[i]

    def batches(self, batch_tokens: int, rng: random.Random) -> list[list[int]]:
        rows = {i: self.length(i) for i in range(len(self)) if self.length(i) - self.starts[i] >= 1}
        return length_batches(rows, batch_tokens, rng)

    def batch(self, idx: list[int], embed: torch.Tensor) -> dict:
        """Entries p = 0..n-2 of each row: inputs (f_p, t_{p+1}); labels t_{p+2} and f_{p+1} (final layer)
        where t_{p+2} is a response token."""
        width = max(self.length(i) for i in idx) - 1
        h = embed.shape[1]  # the final feature is the last H columns (fused features put other layers first)
        feats = torch.zeros(len(idx), width, self.features.shape[1])
        toks = torch.zeros(len(idx), width, dtype=torch.long)
        rows, cols, labels, next_feats = [], [], [], []
        for r, i in enumerate(idx):
            a, n = self.offsets[i], self.length(i)
            feats[r, : n - 1] = self.features[a : a + n - 1].float()
            toks[r, : n - 1] = self.tokens[a + 1 : a + n]
            p = torch.arange(max(self.starts[i] - 2, 0), n - 2)
            rows.append(torch.full_like(p, r))
            cols.append(p)
            labels.append(self.tokens[a + p + 2])
            next_feats.append(self.features[a + p + 1, -h:].float())
        return {
            "embeds": F.embedding(toks, embed),
            "features": feats,
            "positions": torch.arange(width)[None].expand(len(idx), width),
            "rows": torch.cat(rows),
            "cols": torch.cat(cols),
            "labels": torch.cat(labels),
            "next_features": torch.cat(next_feats),
        }


def batch_loss(
    head,
    batch: dict,
    out_head: torch.Tensor,
    to_local: torch.Tensor,
    depths: int,
    hard_weight: float = 0.5,
    decay: float = 0.8,
    reg_weight: float = 0.0,
    noise: float = 0.0,
    hard_labels: str = "data",
) -> tuple[torch.Tensor, list[int], int]:
    """Sum over draft depths s of decay^s * [(1-w) soft CE against the target's distribution (its head over
    the true next feature) + w CE against its greedy token + reg_weight * smooth-L1(g, true next feature)]
    (EAGLE's feature regression: 576 numbers of supervision per position instead of one token), on the
    reduced vocabulary `out_head`; `noise`: see `EagleHead.unrolled`. `hard_labels` "data": the greedy token
    is the next token of the row (the data are the target's greedy responses); "argmax": the target's own
    argmax over `out_head` at that position (for sampled responses, whose next token is not the greedy
    one). Returns (loss, top-1 agreements per depth, positions)."""
    outs = head.unrolled(batch["embeds"], batch["features"], batch["positions"], depths, noise=noise)
    rows, cols = batch["rows"], batch["cols"]
    with torch.no_grad():
        target_p = torch.softmax((batch["next_features"] @ out_head.T).float(), dim=-1)  # (N, C)
    labels = target_p.argmax(-1) if hard_labels == "argmax" else to_local[batch["labels"]]
    known = labels >= 0
    loss, agree = 0.0, []
    for s, g in enumerate(outs):
        logp = torch.log_softmax((g[rows, cols] @ out_head.T).float(), dim=-1)  # (N, C)
        soft = -(target_p * logp).sum(-1).mean()
        hard = -logp[known].gather(1, labels[known][:, None]).mean()
        term = (1 - hard_weight) * soft + hard_weight * hard
        if reg_weight:
            term = term + reg_weight * F.smooth_l1_loss(g[rows, cols].float(), batch["next_features"])
        loss = loss + decay**s * term
        agree.append(int((logp.argmax(-1) == labels).sum()))
    return loss, agree, int(labels.numel())


def _to(batch: dict, device: torch.device) -> dict:
    """A batch (built on the CPU from CPU-held features) moved to the device the head trains on."""
    return batch if device.type == "cpu" else {k: v.to(device, non_blocking=True) for k, v in batch.items()}


@torch.no_grad()
def evaluate(head, data: FeatureData, embed, out_head, to_local, depths: int, batch_tokens: int) -> dict:
    """Teacher-forced top-1 agreement with the target's greedy token (the row's next token) at each draft
    depth. Runs on `out_head`'s device; `embed` stays on the CPU, where batches are built."""
    head.eval()
    agree, total = [0] * depths, 0
    for idx in data.batches(batch_tokens, random.Random(0)):
        _, a, n = batch_loss(head, _to(data.batch(idx, embed), out_head.device), out_head, to_local, depths)
        agree = [x + y for x, y in zip(agree, a)]
        total += n
    head.train()
    return {"top1": [a / max(total, 1) for a in agree], "positions": total}


def train(
    head,
    data: FeatureData,
    heldout: FeatureData,
    embed,
    out_head,
    to_local,
    *,
    epochs: float,
    lr: float,
    batch_tokens: int,
    depths: int,
    seed: int,
    warmup: int = 30,
    eval_every: int = 0,
    autocast: bool = True,
    max_minutes: float = 0.0,
    hard_weight: float = 0.5,
    reg_weight: float = 0.0,
    noise: float = 0.0,
    hard_labels: str = "data",
    log=print,
) -> dict:
    """AdamW with warm-up and cosine decay; keeps the weights with the best held-out depth-0 agreement.

    The head, `out_head` and `to_local` may sit on a GPU: batches are built on the CPU (where `embed` and the
    features stay) and moved there. `max_minutes`: after 20 steps the schedule is shortened so that it ends
    (decayed) within that time, estimated from those steps' pace; a hard stop at the time is kept too."""
    import math

    rng = random.Random(seed)
    torch.manual_seed(seed)
    per_epoch = len(data.batches(batch_tokens, random.Random(seed)))
    total_steps = max(1, int(per_epoch * epochs))
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=0.0, betas=(0.9, 0.95))
    lr_at = lambda step: lr * min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(step / total_steps, 1.0)))  # noqa: E731
    t0, step, best, best_state, history = time.perf_counter(), 0, -1.0, None, []
    seen = 0
    while step < total_steps:
        for idx in data.batches(batch_tokens, rng):
            if step >= total_steps or (max_minutes and time.perf_counter() - t0 > max_minutes * 60):
                total_steps = step
                break
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            batch = _to(data.batch(idx, embed), out_head.device)
            with torch.autocast(out_head.device.type, dtype=torch.bfloat16, enabled=autocast):
                loss, agree, n = batch_loss(
                    head,
                    batch,
                    out_head,
                    to_local,
                    depths,
                    hard_weight=hard_weight,
                    reg_weight=reg_weight,
                    noise=noise,
                    hard_labels=hard_labels,
                )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
            opt.step()
            step += 1
            seen += n
            if max_minutes and step == 20:  # fit the cosine schedule into the time left, at this pace
                pace = (time.perf_counter() - t0) / step
                fit = 20 + int((max_minutes * 60 - (time.perf_counter() - t0)) / pace * 0.95)
                if fit < total_steps:
                    log(
                        f"train: {pace:.2f} s/step: the schedule shrinks from {total_steps} to {fit} steps "
                        f"to end within {max_minutes:g} min"
                    )
                    total_steps = max(fit, step + 1)
            if step % 20 == 0:
                log(
                    f"train: step {step}/{total_steps} loss {float(loss.detach()):.3f} top1 "
                    f"{[round(a / max(n, 1), 3) for a in agree]} {time.perf_counter() - t0:.0f} s"
                )
            if eval_every and step % eval_every == 0:
                ev = evaluate(head, heldout, embed, out_head, to_local, depths, batch_tokens)
                history.append({"step": step, **ev})
                log(f"eval: step {step} held-out top1 {[round(x, 3) for x in ev['top1']]}")
                if ev["top1"][0] > best:
                    best, best_state = ev["top1"][0], {k: v.clone() for k, v in head.state_dict().items()}
    final = evaluate(head, heldout, embed, out_head, to_local, depths, batch_tokens)
    if best_state is not None and best > final["top1"][0]:
        head.load_state_dict(best_state)
        final = evaluate(head, heldout, embed, out_head, to_local, depths, batch_tokens)
    return {"steps": step, "seconds": time.perf_counter() - t0, "train_positions": seen, "heldout": final, "history": history}


# --------------------------------------------------------------------------------------------------
# 4. save (the runtime loads and runs a head: engine/drafters/eagle.py)
# --------------------------------------------------------------------------------------------------


def save_head(head: EagleHead, out: Path, vocab_ids: list[int], info: dict, dtype=torch.bfloat16) -> int:
    """Write config.json, model.safetensors (the head only: the target's embedding and head are reused)
    and draft_vocab.json (the reduced output vocabulary). Returns the bytes written."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(dtype).contiguous() for k, v in head.state_dict().items()}
    save_file(state, str(out / WEIGHTS_FILE), metadata={"format": CONFIG_FORMAT})
    (out / CONFIG_FILE).write_text(json.dumps({**head.config, **info}, indent=1))
    write_draft_vocab(out, vocab_ids)
    return sum(p.stat().st_size for p in out.iterdir() if p.is_file())


def frequent_tokens(rows: list[dict], n: int) -> list[int]:
    """The n most frequent tokens of the target's responses (FR-Spec's frequency-ranked vocabulary), sorted;
    n = 0: every emitted token. Run-3 head (8 held-out prompts, depth 2-4): alpha was the same with 4096,
    8192 and all 11,112 emitted tokens, and a draft step took 2.3 / 2.9 / 3.2 ms. Run-10 head (390 held-out
    prompts, depth 4): alpha 0.615 / 0.629 / 0.632 with 4096 / 8192 / all 18,876, but 8192 ran slower
    (1.39-1.55x against 1.50-1.70x on the 8 bench prompts), so 4096 stayed. Run-14 head (GPU-trained on 2.9x
    the data): alpha 0.641 with its 4096 tokens, 0.661 with 8192 (98.2% of the greedy tokens); 1.71-1.83x
    against 1.54-1.65x. 8192 is shipped (and the default): the only setting with alpha >= 0.65 and every
    bench cell >= 1.5x."""
    from collections import Counter

    counts = Counter(t for r in rows for t in r["output_ids"])
    ranked = [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return sorted(ranked[:n] if n > 0 else ranked)


def write_card(out: Path, config: dict, stats: dict, command: str) -> None:
    """<out>/README.md: what the head is, how it was trained, how well it drafts (from stats.json)."""
    ev = stats.get("engine_eval") or {}
    tr = stats.get("train") or {}
    top1 = ", ".join(f"{x:.3f}" for x in (tr.get("heldout") or {}).get("top1", []))
    pos = ", ".join(f"{p:.2f}" for p in ev.get("per_position_acceptance", []))
    lines = [
        "# SpecLab EAGLE head for SmolLM2-135M-Instruct",
        "",
        "A one-layer drafter that reads the target's own final hidden states (EAGLE, Li et al. 2024). It is not a",
        "standalone model: it borrows the target's embedding and output head and needs the target's features, so",
        'it only works inside SpecLab\'s engine (`drafter="eagle"`), never as a transformers `assistant_model`.',
        "",
        "## Architecture",
        f"- fc: [embed(token); feature] ({2 * config['hidden_size']}) -> {config['hidden_size']}, one Llama decoder "
        f"layer ({config['num_attention_heads']} heads, {config['num_key_value_heads']} KV heads, MLP "
        f"{config['intermediate_size']}), RMSNorm; {config.get('params', 0) / 1e6:.2f} M parameters in bfloat16.",
        *(
            [
                f"- EAGLE-3 feature fusion: the outputs of target layers {config['fuse_layers']} and the final feature "
                f"({config['hidden_size'] * (len(config['fuse_layers']) + 1)}) -> {config['hidden_size']} by one linear map, "
                "before fc; the head's own guesses feed back unfused."
            ]
            if config.get("fuse_layers")
            else []
        ),
        "- Output: the target's own head, cut to the tokens in `draft_vocab.json` (the tokens the target emits most",
        "  often in the training responses).",
        "",
        "## Training",
        f"- Data: the distillation's target-generated responses (`python -m training.distill`, {config.get('train_rows', '?')}",
        "  prompts) and one teacher-forcing pass of the target for their features"
        + (f" ({stats['features_train_seconds'] / 60:.0f} min)." if "features_train_seconds" in stats else "."),
        f"- Training-time test over {config.get('depths', '?')} draft depths (each depth sees its own earlier outputs,",
        "  as when drafting); loss per depth: soft CE against the target's distribution + CE on its greedy token"
        + (f" + {config['reg_weight']} x smooth-L1 feature regression." if config.get("reg_weight") else "."),
        f"- {config.get('epochs', '?')} epochs at lr {config.get('lr', '?')}, {config.get('train_minutes', 0):.0f} min on"
        f" 2 CPU cores, seed {config.get('seed', '?')}" + (f", continuing from `{config['init']}`." if config.get("init") else "."),
        f"- Held-out teacher-forced top-1 agreement by draft depth: [{top1}].",
        "",
        "## Held-out acceptance (SpecLab engine, greedy, depth "
        f"{ev.get('depth', '?')}, {ev.get('prompts', '?')} prompts on held-out topics, {ev.get('dtype', '?')})",
        f"- alpha = {ev.get('alpha', float('nan')):.3f}; per-position acceptance [{pos}].",
        "",
        "## Reproduce",
        "```",
        command,
        "```",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


# --------------------------------------------------------------------------------------------------
# 5. command line
# --------------------------------------------------------------------------------------------------

STAGES = ("features", "train", "eval", "all")


def _layer_list(text: str) -> tuple[int, ...]:
    try:
        layers = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated layer numbers, got {text!r}") from None
    if any(i < 0 for i in layers) or len(set(layers)) != len(layers):
        raise argparse.ArgumentTypeError(f"layers must be distinct and >= 0; got {text!r}")
    return layers


def _noise_level(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (a fraction of each feature's RMS); got {text!r}")
    return value


def features_file(feat_dir: Path, name: str, fuse_layers: tuple[int, ...]) -> Path:
    """features-{train,heldout}.safetensors, or features-…-fuse2-15.safetensors for fused features."""
    suffix = "-fuse" + "-".join(str(i) for i in fuse_layers) if fuse_layers else ""
    return feat_dir / f"features-{name}{suffix}.safetensors"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m training.eagle",
        description="Train an EAGLE head for the embedded target on the distillation data (python -m training.distill).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--stage", choices=STAGES, default="all", help="run one stage, or all of them")
    p.add_argument(
        "--work-dir",
        default="distill_work",
        help="the distillation work folder (its shards/ and heldout/ responses); features go to <work-dir>/eagle",
    )
    p.add_argument("--out", default="assets/eagle", help="where the head is written")
    p.add_argument("--target", default=None, help="target model folder (default: embedded SmolLM2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    p.add_argument(
        "--device",
        default="cpu",
        help="where the features pass and the training run: cpu, cuda, mps or auto (features and batches are kept on the CPU either way)",
    )
    p.add_argument("--max-len", type=int, default=256, help="truncate prompt+response to this many tokens")
    t = p.add_argument_group("training")
    t.add_argument("--epochs", type=float, default=2.0)
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--batch-tokens", type=int, default=2048, help="padded tokens per training batch")
    t.add_argument("--depths", type=int, default=3, help="draft steps unrolled in training (training-time test)")
    t.add_argument("--hard-weight", type=float, default=0.5, help="weight of CE on the greedy token vs soft CE")
    t.add_argument("--reg-weight", type=float, default=0.0, help="weight of the feature regression (smooth L1)")
    t.add_argument(
        "--hard-labels",
        choices=("data", "argmax"),
        default="data",
        help="the greedy token the hard CE aims at: the row's next token (data: greedy responses) or the "
        "target's own argmax there (argmax: for sampled responses)",
    )
    t.add_argument(
        "--feature-noise",
        type=_noise_level,
        default=0.0,
        help="EAGLE-1's augmentation: add uniform noise of up to this fraction of each target feature's "
        "RMS to the (fused) target features while training (0 = off)",
    )
    t.add_argument(
        "--init",
        default=None,
        help="continue from a saved head folder instead of the pass-through start "
        "(an unfused head can start a fused one: fuse starts as a pass-through)",
    )
    p.add_argument(
        "--fuse-layers",
        type=_layer_list,
        default=(),
        help="EAGLE-3 feature fusion: comma-separated target decoder layers (0-based) whose outputs join "
        "the final feature, e.g. 2,15 (features and training both use it; default: final only)",
    )
    t.add_argument(
        "--head-vocab",
        type=int,
        default=8192,
        help="the saved draft_vocab.json keeps the N most frequent emitted tokens (0 = all of them; "
        "training always uses all): a smaller output head makes every draft step cheaper",
    )
    t.add_argument(
        "--keep-init-vocab",
        action="store_true",
        help="with --init: save the --init head's draft_vocab.json instead of ranking the tokens of this "
        "run's data (when continuing on new data only, the earlier, larger data ranked them better)",
    )
    t.add_argument("--eval-every", type=int, default=0, help="teacher-forced held-out eval every N steps (0 = end)")
    t.add_argument("--max-minutes", type=float, default=0.0, help="stop training after this many minutes (0 = no cap)")
    t.add_argument("--no-autocast", action="store_true", help="train in float32 instead of bfloat16 autocast")
    from .distill import add_eval_options

    add_eval_options(p)
    return p.parse_args(argv)


def main(argv=None) -> int:
    from .pipeline import Stats as _Stats

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    work = Path(args.work_dir)
    feat_dir, out = work / "eagle", Path(args.out)
    feat_dir.mkdir(parents=True, exist_ok=True)
    log = TeeLog(feat_dir / "eagle.log")
    run = lambda stage: args.stage in (stage, "all")  # noqa: E731
    stats = _Stats(feat_dir / "stats.json")
    from engine.hardware import pick_device

    try:
        pick_device(None if args.device == "auto" else args.device)
    except (ValueError, RuntimeError) as exc:
        log(f"error: --device {args.device}: {exc}")
        log.close()
        return 2
    if not (work / "shards").exists():
        log(
            f"error: {work / 'shards'} not found: run `python -m training.distill --work-dir {work}` first (its "
            "prompts and generate stages write the target's responses)"
        )
        log.close()
        return 2
    train_rows, heldout_rows = read_shards(work / "shards"), read_shards(work / "heldout")
    ok = (not run("features") or _features_stage(args, feat_dir, train_rows, heldout_rows, stats, log)) and (
        not run("train") or _train_stage(args, feat_dir, train_rows, out, stats, log)
    )
    if not ok:
        log.close()
        return 2
    if run("eval"):
        from .distill import engine_eval

        prompts = json.loads((work / "prompts.json").read_text())
        eval_prompts = heldout_eval_prompts(prompts["heldout"], args.eval_prompts)
        ev = engine_eval(out, args.target, eval_prompts, args.eval_depth, args.eval_max_new_tokens, args.eval_batch, drafter="eagle")
        stats["engine_eval"] = ev
        stats.save()
        log(f"eval: alpha {ev['alpha']:.3f}  per-position {[round(x, 3) for x in ev['per_position_acceptance']]}")
        config = json.loads((out / CONFIG_FILE).read_text())
        write_card(out, config, stats, "python -m training.eagle " + " ".join(argv if argv is not None else sys.argv[1:]))
    log.close()
    return 0


def _features_stage(args, feat_dir: Path, train_rows: list, heldout_rows: list, stats, log) -> bool:
    """The target's hidden states for every row, extended where the data grew; False after a logged error."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from engine.model.pair import load_pair

    pair = load_pair(target=args.target, draft=None, eagle=None, device=None if args.device == "auto" else args.device)
    bad = [i for i in args.fuse_layers if i >= pair.target.config.num_hidden_layers]
    if bad:
        log(f"error: --fuse-layers {bad}: the target has layers 0..{pair.target.config.num_hidden_layers - 1}")
        return False
    # which target computed a features file: only its own files are extended instead of rebuilt
    made_by = {"target": str(args.target or "embedded"), "dtype": pair.dtype_name}
    for name, rows in (("heldout", heldout_rows), ("train", train_rows)):
        path = features_file(feat_dir, name, args.fuse_layers)
        old = None
        if path.exists():
            with safe_open(str(path), "pt") as f:
                same_target = (f.metadata() or {}) == made_by
            old = load_file(str(path)) if same_target else None
        if old is not None and covers_prefix(old, rows, args.max_len):  # the data grew: extract the new rows only
            done = len(old["starts"])
            if done == len(rows):
                log(f"features: {name}: {done} rows already extracted")
                continue
            log(f"features: {name}: {done} rows already extracted, adding {len(rows) - done}")
            new = extract_features(pair.target, rows[done:], args.max_len, log=log, fuse_layers=args.fuse_layers)
            stats[f"features_{name}_seconds"] = stats.get(f"features_{name}_seconds", 0.0) + new.pop("seconds")
            blob = concat_features(old, new)
            del old, new
        else:
            blob = extract_features(pair.target, rows, args.max_len, log=log, fuse_layers=args.fuse_layers)
            stats[f"features_{name}_seconds"] = blob.pop("seconds")
        save_file(blob, str(path), metadata=made_by)
        log(f"features: {name}: {len(rows)} rows, {blob['features'].shape[0]} positions")
        del blob
    stats["features_dtype"] = pair.dtype_name
    stats.save()
    return True


def _train_stage(args, feat_dir: Path, train_rows: list, out: Path, stats, log) -> bool:
    """Train (or continue, --init) the head on the saved features and save it; False after a logged error."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from engine.hardware import pick_device
    from engine.model.pair import embedded_model_dir

    if args.keep_init_vocab and not args.init:
        log("error: --keep-init-vocab needs --init (the head whose vocabulary to keep)")
        return False
    target = AutoModelForCausalLM.from_pretrained(args.target or embedded_model_dir(), dtype=torch.float32)
    embed = target.get_input_embeddings().weight.detach()
    vocab_ids = sorted({t for r in train_rows for t in r["output_ids"]})
    vocab = torch.tensor(vocab_ids)
    out_head = target.get_output_embeddings().weight.detach()[vocab].contiguous()
    to_local = torch.full((embed.shape[0],), -1, dtype=torch.long)
    to_local[vocab] = torch.arange(len(vocab))
    head = EagleHead.from_target(target, seed=args.seed, fuse_layers=args.fuse_layers)
    state = {}
    if args.init:
        init_config, state, _ = load_head(Path(args.init), target)
        if tuple(init_config.get("fuse_layers", ())) not in ((), tuple(args.fuse_layers)):
            log(f"error: --init {args.init} fuses layers {init_config['fuse_layers']}, not {list(args.fuse_layers)}")
            return False
        head.load_state_dict({k: v.float() for k, v in state.items()}, strict=not (args.fuse_layers and "fuse.weight" not in state))
        log(f"train: continuing from {args.init}")
    paths = [features_file(feat_dir, name, args.fuse_layers) for name in ("train", "heldout")]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        log(f"error: {missing[0]} not found: run `--stage features` with the same --fuse-layers first")
        return False
    data, heldout = (FeatureData(load_file(str(p))) for p in paths)
    if args.fuse_layers and not (args.init and "fuse.weight" in state):
        head.set_fuse_stats(data.features)
        log(
            f"train: standardising the fused layers' {head.fuse_mean.numel()} columns "
            f"(std from {float(head.fuse_std.min()):.3g} to {float(head.fuse_std.max()):.3g})"
        )
    log(f"train: {sum(p.numel() for p in head.parameters())} parameters, {len(data)} rows, {len(vocab_ids)}-token head")
    device = pick_device(None if args.device == "auto" else args.device)
    head, out_head, to_local = head.to(device), out_head.to(device), to_local.to(device)
    result = train(
        head,
        data,
        heldout,
        embed,
        out_head,
        to_local,
        epochs=args.epochs,
        lr=args.lr,
        batch_tokens=args.batch_tokens,
        depths=args.depths,
        seed=args.seed,
        eval_every=args.eval_every,
        autocast=not args.no_autocast,
        max_minutes=args.max_minutes,
        hard_weight=args.hard_weight,
        reg_weight=args.reg_weight,
        noise=args.feature_noise,
        hard_labels=args.hard_labels,
        log=log,
    )
    _save_trained(args, head.cpu(), result, len(data), train_rows, out, stats, log)
    return True


def _save_trained(args, head, result: dict, n_rows: int, train_rows: list, out: Path, stats, log) -> None:
    stats["train"] = result
    info = {
        "params": sum(p.numel() for p in head.parameters()),
        "train_rows": n_rows,
        "train_minutes": result["seconds"] / 60,
        "heldout_top1_by_depth": result["heldout"]["top1"],
        "seed": args.seed,
        "epochs": args.epochs,
        "lr": args.lr,
        "depths": args.depths,
        "reg_weight": args.reg_weight,
        "feature_noise": args.feature_noise,
        "init": args.init,
        "head_vocab": args.head_vocab,
    }
    if args.keep_init_vocab and args.init:
        keep = json.loads((Path(args.init) / VOCAB_FILE).read_text())["ids"]
        info["head_vocab"] = len(keep)
        info["vocab_from"] = args.init
    else:
        keep = frequent_tokens(train_rows, args.head_vocab)
    stats["bytes"] = save_head(head, out, keep, info)
    stats.save()
    log(
        f"train: {result['steps']} steps in {result['seconds']:.0f} s; held-out top-1 by depth "
        f"{[round(x, 3) for x in result['heldout']['top1']]}; wrote {out} ({stats['bytes'] / 1e6:.1f} MB)"
    )


if __name__ == "__main__":
    sys.exit(main())
