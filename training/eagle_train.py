"""Training an EAGLE head: the target's features batched by length (`FeatureData`), the loss over unrolled
draft depths (`batch_loss`), the teacher-forced held-out agreement (`evaluate`) and the training run
(`train`, over training/pipeline.py's `fit`)."""

from __future__ import annotations

import math
import random
import time

import torch
import torch.nn.functional as F

from .data import length_batches
from .pipeline import fit


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


def _keep_best(head, best: tuple | None, heldout_eval) -> dict:
    """The held-out evaluation of the final weights, or of the best evaluated ones if they did better."""
    final = heldout_eval()
    if best is not None and best[0] > final["top1"][0]:
        head.load_state_dict(best[2])
        final = heldout_eval()
    return final


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
    t0 = time.perf_counter()
    rng = random.Random(seed)
    torch.manual_seed(seed)
    per_epoch = len(data.batches(batch_tokens, random.Random(seed)))
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=0.0, betas=(0.9, 0.95))
    lr_at = lambda step, total: lr * min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(step / total, 1.0)))  # noqa: E731
    positions = [0]  # training positions seen

    options = {"hard_weight": hard_weight, "reg_weight": reg_weight, "noise": noise, "hard_labels": hard_labels}

    def step_loss(batch):
        loss, agree, n = batch_loss(head, batch, out_head, to_local, depths, **options)
        return loss, (agree, n)

    def progress(step, total, loss, info, seconds):
        agree, n = info
        positions[0] += n
        if step % 20 == 0:
            top1 = [round(a / max(n, 1), 3) for a in agree]
            log(f"train: step {step}/{total} loss {float(loss.detach()):.3f} top1 {top1} {seconds:.0f} s")

    def evaluate_at(step):
        ev = evaluate(head, heldout, embed, out_head, to_local, depths, batch_tokens)
        log(f"eval: step {step} held-out top1 {[round(x, 3) for x in ev['top1']]}")
        return ev["top1"][0], ev

    run = fit(
        head,
        opt,
        lambda: data.batches(batch_tokens, rng),
        step_loss,
        lr_at,
        max(1, int(per_epoch * epochs)),
        device_type=out_head.device.type,
        autocast=autocast,
        max_minutes=max_minutes,
        prepare=lambda idx: _to(data.batch(idx, embed), out_head.device),
        progress=progress,
        evaluate=evaluate_at,
        eval_every=eval_every,
        log=log,
    )
    final = _keep_best(head, run["best"], lambda: evaluate(head, heldout, embed, out_head, to_local, depths, batch_tokens))
    return {
        "steps": run["steps"],
        "seconds": time.perf_counter() - t0,
        "train_positions": positions[0],
        "heldout": final,
        "history": run["history"],
    }
