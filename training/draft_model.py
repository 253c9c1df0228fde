"""The distilled draft model and its training: a small Llama sharing the target's vocabulary, trained on
the target's own responses (`python -m training.distill`, stage 4; the loop is training/pipeline.py's `fit`)."""

from __future__ import annotations

import math
import random

import torch

from .data import length_batches, sequence_of
from .pipeline import fit


def make_draft(target, hidden: int, layers: int, heads: int, kv_heads: int, intermediate: int, seed: int):
    """A small Llama sharing the target's vocabulary; its tied embedding is the target's, PCA-projected."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tcfg = target.config
    cfg = LlamaConfig(
        vocab_size=tcfg.vocab_size,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=hidden // heads,
        max_position_embeddings=tcfg.max_position_embeddings,
        rms_norm_eps=tcfg.rms_norm_eps,
        rope_parameters=getattr(tcfg, "rope_parameters", None) or {"rope_type": "default", "rope_theta": 100000.0},
        tie_word_embeddings=True,
        bos_token_id=tcfg.bos_token_id,
        eos_token_id=tcfg.eos_token_id,
        pad_token_id=tcfg.pad_token_id,
        hidden_act="silu",
    )
    torch.manual_seed(seed)
    draft = LlamaForCausalLM(cfg).float()
    with torch.no_grad():
        emb = target.get_input_embeddings().weight.detach().float()  # (V, H_target)
        k = min(hidden, emb.shape[1])
        # principal directions of the target's (tied) embedding: E ~= E P P^T with P (H_target, hidden),
        # the top eigenvectors of E^T E (cheaper than an SVD of the whole (V, H) matrix)
        evals, evecs = torch.linalg.eigh(emb.T.double() @ emb.double())  # ascending
        proj = evecs[:, evals.argsort(descending=True)[:k]].float()  # (H_target, k)
        weight = torch.zeros(emb.shape[0], hidden)
        weight[:, :k] = emb @ proj  # (V, k)
        if hidden > k:
            weight[:, k:] = torch.randn(emb.shape[0], hidden - k) * 0.02
        draft.get_input_embeddings().weight.copy_(weight)
    draft.tie_weights()
    return draft


def make_examples(rows: list[dict], max_len: int) -> list[dict]:
    examples = []
    for row in rows:
        ids, start = sequence_of(row, max_len)
        if len(ids) - start < 1:
            continue
        ex = {"ids": torch.tensor(ids, dtype=torch.long), "start": start}
        if "soft_ids" in row:
            n = len(ids) - start
            ex["soft_ids"] = torch.tensor(row["soft_ids"][:n], dtype=torch.long)
            ex["soft_logp"] = torch.tensor(row["soft_logp"][:n], dtype=torch.float32)
        examples.append(ex)
    return examples


def make_batches(examples: list[dict], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Length-bucketed batches of about `batch_tokens` padded tokens, in a seeded random order."""
    return length_batches({i: len(e["ids"]) for i, e in enumerate(examples)}, batch_tokens, rng)


def batch_loss(
    draft, examples: list[dict], idx: list[int], soft_weight: float, candidates: torch.Tensor | None = None
) -> tuple[torch.Tensor, int, int]:
    """Loss on response positions only: (1-w) * CE(greedy token) + w * soft CE(target top-k). Returns
    (loss, response tokens, top-1 agreements).

    candidates: sorted token ids the softmax runs over (None = the whole vocabulary). The output head is
    most of the cost on a CPU; restricting the training softmax to the tokens the target actually emits
    (plus random negatives, see `train`) makes a step several times cheaper (a frequency-ranked
    vocabulary, as in FR-Spec, used for training only: the shipped head keeps the full vocabulary)."""
    exs = [examples[i] for i in idx]
    width = max(len(e["ids"]) for e in exs)
    ids = torch.zeros(len(exs), width, dtype=torch.long)
    mask = torch.zeros(len(exs), width, dtype=torch.long)
    for r, e in enumerate(exs):
        ids[r, : len(e["ids"])] = e["ids"]
        mask[r, : len(e["ids"])] = 1
    hidden = draft.model(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, T, H)
    rows, cols, labels = [], [], []
    for r, e in enumerate(exs):
        n = len(e["ids"])
        rows.append(torch.full((n - e["start"],), r, dtype=torch.long))
        cols.append(torch.arange(e["start"] - 1, n - 1))
        labels.append(e["ids"][e["start"] :])
    rows, cols, labels = torch.cat(rows), torch.cat(cols), torch.cat(labels)
    h = hidden[rows, cols]  # (N, H)
    if candidates is None:
        logits = draft.lm_head(h).float()  # (N, vocab)
        to_local = None
    else:
        logits = (h @ draft.lm_head.weight[candidates].T).float()  # (N, C)
        to_local = torch.full((draft.lm_head.weight.shape[0],), -1, dtype=torch.long)
        to_local[candidates] = torch.arange(len(candidates))
        labels = to_local[labels]
        if bool((labels < 0).any()):
            raise ValueError("a label is missing from the candidate vocabulary")
    logp = torch.log_softmax(logits, dim=-1)
    hard = -logp.gather(1, labels[:, None]).squeeze(1).mean()
    loss = hard
    if soft_weight > 0 and "soft_ids" in exs[0]:
        soft_ids = torch.cat([e["soft_ids"] for e in exs])  # (N, k)
        soft_logp = torch.cat([e["soft_logp"] for e in exs])
        if to_local is not None:
            # top-k entries outside the candidate vocabulary (tokens the target never emitted) are dropped
            soft_ids = to_local[soft_ids]
            soft_logp = soft_logp.masked_fill(soft_ids < 0, float("-inf"))
            soft_ids = soft_ids.clamp_min(0)
        keep = torch.isfinite(soft_logp).any(-1)  # rows with at least one kept entry
        target_p = torch.softmax(soft_logp[keep], dim=-1)  # renormalised over the kept top-k
        soft = -(target_p * logp[keep].gather(1, soft_ids[keep])).sum(-1).mean()
        loss = (1 - soft_weight) * hard + soft_weight * soft
    agree = int((logits.argmax(-1) == labels).sum())
    return loss, int(labels.numel()), agree


@torch.no_grad()
def evaluate_top1(draft, examples: list[dict], batch_tokens: int) -> dict:
    """Teacher-forced agreement with the target's greedy tokens: a cheap estimate of alpha."""
    draft.eval()
    total = agree = 0
    loss_sum = 0.0
    for idx in make_batches(examples, batch_tokens, random.Random(0)):
        loss, n, a = batch_loss(draft, examples, idx, 0.0)
        total, agree, loss_sum = total + n, agree + a, loss_sum + float(loss) * n
    draft.train()
    return {"top1": agree / max(total, 1), "ce": loss_sum / max(total, 1), "tokens": total}


def _optimizer(draft, lr: float) -> torch.optim.AdamW:
    """AdamW with weight decay 0.01 on the matrices, none on norms and vectors."""
    decay, no_decay = [], []
    for name, p in draft.named_parameters():
        (no_decay if p.ndim < 2 or "norm" in name else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95))


def _warmup_cosine(lr: float, warmup: int):
    """lr_at(step, total): linear warm-up over `warmup` steps, then cosine decay to 10 % of lr at `total`."""

    def lr_at(step, total):
        if step < warmup:
            return lr * (step + 1) / warmup
        frac = (step - warmup) / max(1, total - warmup)
        return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))

    return lr_at


class _Candidates:
    """The tokens each step's training softmax runs over: every token the target emitted (its top-k
    alternatives are not added: see batch_loss) + `negatives` others drawn at random (seeded) each step;
    negatives -1: the whole vocabulary."""

    def __init__(self, examples: list[dict], vocab: int, negatives: int, seed: int, log):
        self.negatives, self.seen, self.size = negatives, None, vocab
        if negatives >= 0:
            self.gen = torch.Generator().manual_seed(seed)
            self.seen = torch.zeros(vocab, dtype=torch.bool)
            for e in examples:
                self.seen[e["ids"][e["start"] :]] = True
            self.unseen = (~self.seen).nonzero().squeeze(1)
            self.size = int(self.seen.sum()) + negatives
            log(f"train: softmax over {int(self.seen.sum())} emitted tokens + {negatives} random others per step")

    def prepare(self, idx: list[int]) -> tuple[list[int], torch.Tensor | None]:
        if self.seen is None:
            return idx, None
        extra = self.unseen[torch.randperm(len(self.unseen), generator=self.gen)[: self.negatives]]
        return idx, torch.cat([self.seen.nonzero().squeeze(1), extra]).sort().values


class _Progress:
    """A progress line every 25 steps (and at the last): loss, train top-1 since the last line, lr, time."""

    def __init__(self, lr_at, log):
        self.lr_at, self.log, self.tokens, self.agree = lr_at, log, 0, 0

    def __call__(self, step, total, loss, info, seconds):
        self.tokens, self.agree = self.tokens + info[0], self.agree + info[1]
        if step % 25 == 0 or step == total:
            self.log(
                f"train: step {step}/{total}  loss {loss.item():.3f}  train top1 {self.agree / self.tokens:.3f}  "
                f"lr {self.lr_at(step, total):.2e}  {seconds:.0f} s"
            )
            self.tokens = self.agree = 0


def train(
    draft,
    train_rows,
    heldout_rows,
    *,
    epochs: float,
    lr: float,
    batch_tokens: int,
    soft_weight: float,
    max_len: int,
    seed: int,
    warmup: int = 50,
    log=print,
    eval_every: int = 0,
    autocast: bool = True,
    negatives: int = 2048,
) -> dict:
    """AdamW, linear warmup then cosine decay to 10 %, fixed number of steps (seeded, reproducible).

    negatives: -1 trains with the full-vocabulary softmax; otherwise the softmax runs over every token the
    target emitted in the training data plus `negatives` other tokens
    drawn at random each step, which keeps tokens the target never emits from creeping up."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    examples = make_examples(train_rows, max_len)
    vocab = draft.lm_head.weight.shape[0]
    softmax = _Candidates(examples, vocab, negatives, seed, log)
    held = make_examples(heldout_rows, max_len)
    per_epoch = len(make_batches(examples, batch_tokens, random.Random(seed)))
    total_steps = max(1, int(round(epochs * per_epoch)))
    lr_at = _warmup_cosine(lr, warmup)
    progress = _Progress(lr_at, log)

    def step_loss(batch):
        loss, n, a = batch_loss(draft, examples, batch[0], soft_weight, batch[1])
        return loss, (n, a)

    def evaluate(step):
        ev = evaluate_top1(draft, held, batch_tokens)
        log(f"eval: step {step}  held-out top1 {ev['top1']:.3f}  ce {ev['ce']:.3f}")
        return ev["top1"], ev

    draft.train()
    run = fit(
        draft,
        _optimizer(draft, lr),
        lambda: make_batches(examples, batch_tokens, rng),
        step_loss,
        lr_at,
        total_steps,
        autocast=autocast,
        prepare=softmax.prepare,
        progress=progress,
        evaluate=evaluate if held else None,
        eval_every=eval_every,
        eval_last=True,
        log=log,
    )
    result = {
        "steps": total_steps,
        "steps_per_epoch": per_epoch,
        "seconds": run["seconds"],
        "softmax_tokens": softmax.size,
        "train_tokens": sum(len(e["ids"]) - e["start"] for e in examples),
        "history": run["history"],
    }
    best = run["best"]
    if best is not None and best[1] != total_steps:
        draft.load_state_dict(best[2])  # early stopping on held-out agreement (deterministic given the seed)
        log(f"train: keeping the step-{best[1]} weights (best held-out top1 {best[0]:.3f})")
    result["kept_step"] = best[1] if best is not None else total_steps
    if held:
        result["heldout"] = evaluate_top1(draft, held, batch_tokens)
    return result
