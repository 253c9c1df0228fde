"""EAGLE training features: one teacher-forcing pass of the target over every prompt + response.

The target's final hidden states (after its final norm) at every position, optionally with some inner
layers' outputs first (EAGLE-3 fusion), kept in CPU memory and saved as safetensors by training/eagle.py.
Also the soft-target source for training/distill.py's `--soft-features`.
"""

from __future__ import annotations

import time

import torch

from .data import sequence_of


@torch.no_grad()
def extract_features(target, rows: list[dict], max_len: int, batch_size: int = 16, log=print, fuse_layers: tuple[int, ...] = ()) -> dict:
    """The target's final hidden states (post-norm) at every position of every row; with `fuse_layers`
    (EAGLE-3), the outputs of those decoder layers come first: [layer a; layer b; ...; final], (N, F).

    Returns {"features": (N, F) in the target's dtype (F = H * (len(fuse_layers) + 1)), "tokens": (N,) int32, "offsets": (R + 1,) int64,
    "starts": (R,) int64 (index of the first response token in each row)}."""
    t0 = time.perf_counter()
    seqs = [sequence_of(r, max_len) for r in rows]
    offsets = [0]
    for s, _ in seqs:
        offsets.append(offsets[-1] + len(s))
    hidden_size = target.config.hidden_size * (len(fuse_layers) + 1)
    dtype = next(target.parameters()).dtype
    features = torch.empty(offsets[-1], hidden_size, dtype=dtype)
    order = sorted(range(len(rows)), key=lambda i: len(seqs[i][0]))
    captured: dict[int, torch.Tensor] = {}

    def hook(index):
        def keep(module, args, output):
            captured[index] = output[0] if isinstance(output, tuple) else output

        return keep

    hooks = [target.model.layers[i].register_forward_hook(hook(i)) for i in fuse_layers]
    device = next(target.parameters()).device  # the pass runs where the target is; features stay on the CPU
    for b in range(0, len(order), batch_size):
        idx = order[b : b + batch_size]
        width = max(len(seqs[i][0]) for i in idx)
        ids = torch.zeros(len(idx), width, dtype=torch.long)
        mask = torch.zeros(len(idx), width, dtype=torch.long)
        for r, i in enumerate(idx):
            ids[r, : len(seqs[i][0])] = torch.tensor(seqs[i][0])
            mask[r, : len(seqs[i][0])] = 1
        hidden = target.model(input_ids=ids.to(device), attention_mask=mask.to(device)).last_hidden_state  # (B, T, H)
        if fuse_layers:
            hidden = torch.cat([captured[i] for i in fuse_layers] + [hidden], dim=-1)  # (B, T, F)
        hidden = hidden.cpu()  # one copy per batch (a no-op on the CPU)
        for r, i in enumerate(idx):
            features[offsets[i] : offsets[i + 1]] = hidden[r, : len(seqs[i][0])]
        if (b // batch_size) % 25 == 0:
            log(f"features: {b + len(idx)}/{len(rows)} rows, {time.perf_counter() - t0:.0f} s")
    for h in hooks:
        h.remove()
    tokens = torch.tensor([t for s, _ in seqs for t in s], dtype=torch.int32)
    return {
        "features": features,
        "tokens": tokens,
        "offsets": torch.tensor(offsets, dtype=torch.int64),
        "starts": torch.tensor([st for _, st in seqs], dtype=torch.int64),
        "seconds": time.perf_counter() - t0,
    }


def covers_prefix(blob: dict, rows: list[dict], max_len: int) -> bool:
    """Whether `blob` (extract_features' output) holds exactly the features of rows[:len(blob rows)]:
    same row count or fewer, and the same tokens."""
    n = len(blob["starts"])
    if n > len(rows):
        return False
    tokens = [t for r in rows[:n] for t in sequence_of(r, max_len)[0]]
    return len(tokens) == len(blob["tokens"]) and torch.equal(torch.tensor(tokens, dtype=torch.int32), blob["tokens"])


def concat_features(a: dict, b: dict) -> dict:
    """Rows of `a` then rows of `b`, as one extract_features blob."""
    return {
        "features": torch.cat([a["features"], b["features"]]),
        "tokens": torch.cat([a["tokens"], b["tokens"]]),
        "offsets": torch.cat([a["offsets"], b["offsets"][1:] + a["offsets"][-1]]),
        "starts": torch.cat([a["starts"], b["starts"]]),
    }
