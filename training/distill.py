"""Distil a small draft model for the embedded target (SmolLM2-135M-Instruct), on a CPU, reproducibly.

Knowledge distillation on the target's own greedy outputs (sequence-level KD, Kim & Rush 2016; the
recipe of DistillSpec, Zhou et al. 2024, in its simplest form: the draft learns to predict exactly what
the target will emit, which is what speculative acceptance rewards):

    1. prompts   a varied, seeded prompt set: topics x task templates (explain, story, list, compare,
                 how-to, summarise, answer, email, ...). Whole topics are held out for evaluation.
    2. generate  the target's greedy responses, batched through `engine.generate` (ragged batch; several
                 times faster than batch 1), written in shards so a time cap can stop it cleanly.
    3. soft      (optional) one teacher-forcing forward of the target over each prompt+response keeps its
                 top-k next-token distribution at every response position (cheap next to generation).
    4. train     a small Llama (same tokenizer and vocabulary): tied embedding initialised from the target's
                 embedding projected to the draft width by PCA; loss on response tokens only:
                 (1 - w) * CE(target's greedy token) + w * soft CE(target's top-k distribution).
    5. save      safetensors + config.json + tokenizer files + README.md model card, loadable with
                 `load_pair(draft=dir)`; held-out acceptance is measured with the engine itself.

    python -m training.distill --help
    python -m training.distill --work-dir distill_work --out assets/draft           # the shipped draft
    python -m training.distill --stage eval --out assets/draft                     # re-measure a draft

Every stage is seeded (prompts, shuffles, init, batches). Generation is greedy; in bfloat16 the engine's
batched decoding is deterministic for a fixed batch composition on a given machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from .data import TeeLog, length_batches, read_shards, sequence_of  # noqa: F401  (re-exported)
from .prompts import build_prompts, heldout_eval_prompts  # noqa: F401  (re-exported)

# --------------------------------------------------------------------------------------------------
# 1. prompts
# --------------------------------------------------------------------------------------------------

# --------------------------------------------------------------------------------------------------
# 2. generate
# --------------------------------------------------------------------------------------------------


def generate_data(
    pair,
    rows: list[dict],
    shard_dir: Path,
    batch_size: int,
    max_new_tokens: int,
    time_cap_s: float | None = None,
    log=print,
    worker: tuple[int, int] = (0, 1),
    from_round: int = 1,
) -> dict:
    """Run the target greedily over `rows` in batches; append one JSON line per sequence to shards.

    Resumable: shards already written are skipped. Stops before starting a batch once `time_cap_s` is spent.
    `worker` (k, n): this process writes shards b with b % n == k, so n processes can share the work (on this
    2-core CPU two 1-thread processes made 170 tokens/s against 140 for one 2-thread process, batch 64).
    `from_round` N: skip the batches whose prompts all come from rounds before N (the shard numbers stay the
    same, so those rounds can still be generated later into the same folder).
    """
    from engine import DecodeConfig, generate

    shard_dir.mkdir(parents=True, exist_ok=True)
    cfg = DecodeConfig(mode="autoregressive", max_new_tokens=max_new_tokens, temperature=0.0, seed=0)
    t0 = time.perf_counter()
    n_batches = math.ceil(len(rows) / batch_size)
    tokens = 0
    for b in range(n_batches):
        if b % worker[1] != worker[0]:
            continue
        path = shard_dir / f"shard-{b:05d}.jsonl"
        batch = rows[b * batch_size : (b + 1) * batch_size]
        if all(r.get("round", 1) < from_round for r in batch):
            continue
        done = path.read_text().splitlines(keepends=True) if path.exists() else []
        if len(done) >= len(batch):
            continue
        batch = batch[len(done) :]  # the prompt list grew (--extended-prompts): finish the last shard
        elapsed = time.perf_counter() - t0
        if time_cap_s is not None and elapsed > time_cap_s:
            log(f"generate: time cap reached after {b} batches ({elapsed:.0f} s)")
            break
        trace = generate(pair, [r["prompt"] for r in batch], cfg)
        with open(path.with_suffix(".tmp"), "w") as f:
            f.writelines(done)
            for r, out in zip(batch, trace.output_ids):
                ids = pair.encode_prompt(r["prompt"])
                f.write(json.dumps({**r, "prompt_ids": ids, "output_ids": list(out)}) + "\n")
                tokens += len(out)
        os.replace(path.with_suffix(".tmp"), path)
        log(
            f"generate: batch {b + 1}/{n_batches}  {trace.summary['new_tokens']} tokens  "
            f"{trace.summary['tokens_per_s']:.1f} tok/s  total {tokens} new tokens in {time.perf_counter() - t0:.0f} s"
        )
    return {"seconds": time.perf_counter() - t0, "tokens": tokens}


# --------------------------------------------------------------------------------------------------
# 3. soft targets (optional)
# --------------------------------------------------------------------------------------------------


def keep_topk(row: dict, logits: torch.Tensor, topk: int) -> None:
    """row["soft_ids"] / row["soft_logp"]: the top-k of the target's (n_resp, vocab) next-token logits."""
    top = torch.log_softmax(logits.float(), dim=-1).topk(topk, dim=-1)
    row["soft_ids"] = top.indices.tolist()
    row["soft_logp"] = [[round(v, 4) for v in line] for line in top.values.tolist()]


@torch.no_grad()
def soft_targets(target, rows: list[dict], topk: int, max_len: int, batch_size: int = 16, log=print) -> list[dict]:
    """Teacher forcing: the target's top-k log-probabilities at every position that predicts a response token.

    Adds "soft_ids" (n_resp, k) and "soft_logp" (n_resp, k) lists to each row (position j predicts
    output token j). One batched forward per `batch_size` rows, right-padded.
    """
    t0 = time.perf_counter()
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]["prompt_ids"]) + len(rows[i]["output_ids"]))
    for b in range(0, len(order), batch_size):
        idx = order[b : b + batch_size]
        seqs = [sequence_of(rows[i], max_len) for i in idx]
        width = max(len(s) for s, _ in seqs)
        ids = torch.zeros(len(seqs), width, dtype=torch.long)
        mask = torch.zeros(len(seqs), width, dtype=torch.long)
        for r, (s, _) in enumerate(seqs):
            ids[r, : len(s)] = torch.tensor(s)
            mask[r, : len(s)] = 1
        hidden = target.model(input_ids=ids, attention_mask=mask).last_hidden_state  # (B, T, H)
        for r, (s, start) in enumerate(seqs):
            pos = torch.arange(start - 1, len(s) - 1)  # positions whose next token is a response token
            keep_topk(rows[idx[r]], target.lm_head(hidden[r, pos]), topk)
        if (b // batch_size) % 20 == 0:
            log(f"soft: {b + len(idx)}/{len(rows)} rows, {time.perf_counter() - t0:.0f} s")
    return rows


@torch.no_grad()
def soft_targets_from_features(
    path: Path, rows: list[dict], topk: int, lm_head: torch.Tensor, max_len: int, log=print, chunk_rows: int = 16
) -> list[dict]:
    """`soft_targets` without a new target pass: an EAGLE features file (`python -m training.eagle --stage
    features`, same rows and --max-len) already holds the target's final hidden states at every position,
    and lm_head of them is its next-token distribution. On the 2.2 M-token data the features pass took
    ~40 min; this takes the head's matmul only. Raises ValueError when the file holds other rows."""
    from safetensors import safe_open

    from .features import covers_prefix

    t0 = time.perf_counter()
    with safe_open(str(path), "pt") as f:
        offsets, starts, tokens = f.get_tensor("offsets").tolist(), f.get_tensor("starts").tolist(), f.get_tensor("tokens")
        if len(starts) != len(rows):
            raise ValueError(f"{path} holds features of {len(starts)} rows, the data has {len(rows)}")
        if not covers_prefix({"starts": starts, "tokens": tokens}, rows, max_len):
            raise ValueError(f"{path} was extracted from other tokens (or another --max-len) than these rows")
        features = f.get_slice("features")
        hidden = lm_head.shape[1]  # the final feature is the last H columns (EAGLE-3 fusion puts inner layers first)
        for b in range(0, len(rows), chunk_rows):
            end = min(b + chunk_rows, len(rows))
            block = features[offsets[b] : offsets[end]][:, -hidden:].to(lm_head.dtype)
            for i in range(b, end):
                a, n = offsets[i] - offsets[b], offsets[i + 1] - offsets[i]
                pos = torch.arange(a + starts[i] - 1, a + n - 1)  # positions whose next token is a response token
                keep_topk(rows[i], F.linear(block[pos], lm_head), topk)
            if (b // chunk_rows) % 100 == 0:
                log(f"soft: {end}/{len(rows)} rows from {path.name}, {time.perf_counter() - t0:.0f} s")
    return rows


def soft_matches(soft_rows: list[dict], rows: list[dict]) -> bool:
    """Whether a soft-targets file (rows with soft_ids) was made for exactly these rows."""
    return len(soft_rows) == len(rows) and all(
        a["prompt_ids"] == b["prompt_ids"] and a["output_ids"] == b["output_ids"] for a, b in zip(soft_rows, rows)
    )


# --------------------------------------------------------------------------------------------------
# 4. train
# --------------------------------------------------------------------------------------------------


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
    gen = torch.Generator().manual_seed(seed)
    examples = make_examples(train_rows, max_len)
    vocab = draft.lm_head.weight.shape[0]
    seen = None
    if negatives >= 0:
        seen = torch.zeros(vocab, dtype=torch.bool)
        for e in examples:  # the tokens the target emitted (its top-k alternatives are not added: see batch_loss)
            seen[e["ids"][e["start"] :]] = True
        unseen = (~seen).nonzero().squeeze(1)
        log(f"train: softmax over {int(seen.sum())} emitted tokens + {negatives} random others per step")
    held = make_examples(heldout_rows, max_len)
    per_epoch = len(make_batches(examples, batch_tokens, random.Random(seed)))
    total_steps = max(1, int(round(epochs * per_epoch)))
    decay, no_decay = [], []
    for name, p in draft.named_parameters():
        (no_decay if p.ndim < 2 or "norm" in name else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95))

    def lr_at(step):
        if step < warmup:
            return lr * (step + 1) / warmup
        frac = (step - warmup) / max(1, total_steps - warmup)
        return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))

    draft.train()
    t0 = time.perf_counter()
    step, history, best = 0, [], None  # best: (held-out top1, step, weights) when eval_every > 0
    tok_seen = agree_seen = 0
    while step < total_steps:
        for idx in make_batches(examples, batch_tokens, rng):
            if step >= total_steps:
                break
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            candidates = None
            if seen is not None:
                extra = unseen[torch.randperm(len(unseen), generator=gen)[:negatives]]
                candidates = torch.cat([seen.nonzero().squeeze(1), extra]).sort().values
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss, n, a = batch_loss(draft, examples, idx, soft_weight, candidates)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
            opt.step()
            step += 1
            tok_seen, agree_seen = tok_seen + n, agree_seen + a
            if step % 25 == 0 or step == total_steps:
                log(
                    f"train: step {step}/{total_steps}  loss {loss.item():.3f}  train top1 {agree_seen / tok_seen:.3f}  "
                    f"lr {lr_at(step):.2e}  {time.perf_counter() - t0:.0f} s"
                )
                tok_seen = agree_seen = 0
            if eval_every and held and (step % eval_every == 0 or step == total_steps):
                ev = evaluate_top1(draft, held, batch_tokens)
                history.append({"step": step, **ev})
                log(f"eval: step {step}  held-out top1 {ev['top1']:.3f}  ce {ev['ce']:.3f}")
                if best is None or ev["top1"] > best[0]:
                    best = (ev["top1"], step, {k: v.detach().clone() for k, v in draft.state_dict().items()})
    result = {
        "steps": total_steps,
        "steps_per_epoch": per_epoch,
        "seconds": time.perf_counter() - t0,
        "softmax_tokens": int(seen.sum()) + negatives if seen is not None else vocab,
        "train_tokens": sum(len(e["ids"]) - e["start"] for e in examples),
        "history": history,
    }
    if best is not None and best[1] != total_steps:
        draft.load_state_dict(best[2])  # early stopping on held-out agreement (deterministic given the seed)
        log(f"train: keeping the step-{best[1]} weights (best held-out top1 {best[0]:.3f})")
    result["kept_step"] = best[1] if best is not None else total_steps
    if held:
        result["heldout"] = evaluate_top1(draft, held, batch_tokens)
    return result


# --------------------------------------------------------------------------------------------------
# 5. save, evaluate with the engine, model card
# --------------------------------------------------------------------------------------------------

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja", "generation_config.json")


def write_draft_vocab(out: Path, rows: list[dict], also: list[int] = ()) -> int:
    """draft_vocab.json: every token the target emitted in the training responses (FR-Spec-style reduced
    draft vocabulary). The draft was trained to score only these (plus random negatives), so slicing its
    head to them at decode time costs almost no acceptance and most of the head's time. `also`: ids to keep
    as well (with --init, the vocabulary of the draft it continues from, which saw the earlier data).
    Returns the count."""
    from engine.formats import write_draft_vocab as write_vocab_file

    ids = {t for r in rows for t in r["output_ids"]} | set(also)
    return write_vocab_file(out, ids, note="token ids the target emitted in the distillation data; SpecLab's drafter scores only these")


def save_draft(draft, target_dir: Path, out: Path, dtype=torch.bfloat16) -> int:
    """safetensors (bfloat16 by default) + config.json + the target's tokenizer files. Returns bytes written."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.safetensors"):
        old.unlink()
    model = draft.to(dtype)
    model.config.dtype = str(dtype).replace("torch.", "")
    model.save_pretrained(out)
    draft.float()
    for name in TOKENIZER_FILES:
        if (target_dir / name).exists():
            shutil.copy(target_dir / name, out / name)
    return sum(p.stat().st_size for p in out.iterdir() if p.is_file())


def engine_eval(
    draft_dir: Path,
    target: str | None,
    prompts: list[str],
    depth: int,
    max_new_tokens: int,
    batch_size: int,
    dtype: str = "auto",
    drafter: str = "model",
) -> dict:
    """Held-out greedy acceptance measured by the engine itself (speculative decoding, fixed depth).
    drafter: "model" (draft_dir is a draft model) or "eagle" (draft_dir is an EAGLE head)."""
    from engine import DecodeConfig, generate, load_pair
    from engine.trace.records import acceptance_counts

    if drafter == "eagle":
        pair = load_pair(target=target, draft=None, eagle=str(draft_dir), dtype=dtype)
    else:
        pair = load_pair(target=target, draft=str(draft_dir), dtype=dtype, eagle=None)
    cfg = DecodeConfig(mode="speculative", depth=depth, drafter=drafter, temperature=0.0, max_new_tokens=max_new_tokens)
    steps = []
    for b in range(0, len(prompts), batch_size):
        steps += generate(pair, prompts[b : b + batch_size], cfg).steps
    c = acceptance_counts(steps)
    return {
        "depth": depth,
        "prompts": len(prompts),
        "dtype": pair.dtype_name,
        "alpha": c.accepted / max(1, c.accepted + c.rejections),
        "acceptance_rate": c.accepted / max(1, c.drafted),
        "mean_accepted": c.accepted / max(1, c.seq_steps),
        "per_position_acceptance": [h / max(1, t) for h, t in zip(c.pos_hits, c.pos_tries)],
    }


def write_card(out: Path, info: dict) -> None:
    """assets/draft/README.md: what the draft is, how it was made and how well it drafts."""
    ev = info.get("engine_eval") or {}
    pos = ", ".join(f"{p:.2f}" for p in ev.get("per_position_acceptance", []))
    arch = info["architecture"]
    soft_minutes = info.get("soft_minutes", 0.0)
    if not info["soft_topk"]:
        soft = "."
    elif info.get("soft_features"):
        soft = (
            f"; the target's top-{info['soft_topk']} distributions at every response position came from the "
            f"EAGLE head's features files (the target's final hidden states, `--soft-features`): its output "
            f"head over them took {soft_minutes:.0f} min."
        )
    else:
        soft = (
            f"; the target's top-{info['soft_topk']} distributions at every response position took one "
            f"teacher-forcing pass of {soft_minutes:.0f} min."
        )
    lines = [
        "---",
        "license: apache-2.0",
        "tags: [speculative-decoding, draft-model, distillation]",
        "---",
        "# SpecLab distilled draft for SmolLM2-135M-Instruct",
        "",
        "A small causal LM that proposes tokens for the embedded target (SmolLM2-135M-Instruct) in SpecLab's",
        "speculative decoding. It shares the target's tokenizer and vocabulary (49152 tokens) and was distilled",
        "from the target's own greedy responses on a 2-core CPU, by `training/distill.py`.",
        "",
        "## Architecture",
        f"- LlamaForCausalLM: hidden {arch['hidden']}, {arch['layers']} layers, {arch['heads']} heads "
        f"({arch['kv_heads']} KV heads), MLP {arch['intermediate']}, tied input/output embedding.",
        f"- Parameters: {info['params'] / 1e6:.1f} M ({info['embedding_params'] / 1e6:.1f} M of them the tied "
        "embedding); stored in bfloat16 safetensors "
        f"({info['bytes'] / 1e6:.1f} MB with tokenizer files).",
        "- Initialisation: the embedding is the target's tied embedding projected onto its top principal "
        "directions (PCA), so the draft's output head starts close to the target's."
        + (f" This run continued from the draft in `{info['init']}` (`--init`)." if info.get("init") else ""),
        "",
        "## Data and training",
        f"- Prompts: {info['prompts_train']} training prompts (topics x task templates: explain, story, poem, list, "
        "compare, how-to, email, summarise a paragraph, quiz, dialogue, ...); "
        f"{info['heldout_topics']} whole topics held out for evaluation.",
        f"- Target responses: greedy, up to {info['max_new_tokens']} new tokens, batch {info['gen_batch']} with "
        f"SpecLab's engine in {info['gen_dtype']}: {info['train_tokens']} response tokens, generated in "
        f"{info['gen_minutes']:.0f} min on this machine" + soft,
        f"- Loss on response tokens: {1 - info['soft_weight']:.2f} x CE(target's greedy token)"
        + (f" + {info['soft_weight']:.2f} x soft CE(target's top-{info['soft_topk']} distribution)" if info["soft_topk"] else "")
        + ".",
        f"- Training: AdamW, lr {info['lr']}, ~{info['batch_tokens']} tokens per batch, {info['epochs']} epochs "
        f"({info['steps']} steps), bfloat16 autocast, {info['train_minutes']:.0f} min on 2 CPU cores; seed {info['seed']}.",
        "",
        "## Held-out acceptance (SpecLab engine, greedy, depth "
        f"{ev.get('depth', '?')}, {ev.get('prompts', '?')} prompts on held-out topics, {ev.get('dtype', '?')})",
        f"- alpha (per-token acceptance) = {ev.get('alpha', float('nan')):.3f}; acceptance rate "
        f"{ev.get('acceptance_rate', float('nan')):.3f}; mean accepted per step {ev.get('mean_accepted', float('nan')):.2f}.",
        f"- Per-position acceptance: [{pos}].",
        f"- Teacher-forced top-1 agreement with the target on held-out responses: {info.get('heldout_top1', float('nan')):.3f}.",
        "",
        "## Reproduce",
        "```",
        info["command"],
        "```",
        "The generated data and checkpoints go to the work directory (gitignored). Timings are for a shared",
        "2-core AMD EPYC CPU; generation dominates.",
        "",
    ]
    if info.get("notes"):
        lines += ["## Notes", *[f"- {n}" for n in info["notes"]], ""]
    (out / "README.md").write_text("\n".join(lines))


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------

STAGES = ("prompts", "generate", "soft", "train", "eval", "all")


def _worker(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected K/N, e.g. 0/2; got {text!r}") from None
    if not 0 <= k < n:
        raise argparse.ArgumentTypeError(f"need 0 <= K < N; got {text!r}")
    return k, n


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m training.distill",
        description="Distil a draft model for the embedded target from the target's own greedy responses.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--stage", choices=STAGES, default="all", help="run one stage (each reads the previous stage's files in --work-dir) or all of them"
    )
    p.add_argument("--work-dir", default="distill_work", help="generated prompts, shards, checkpoints, logs")
    p.add_argument("--out", default="assets/draft", help="where the draft (HF folder) is written")
    p.add_argument("--target", default=None, help="target model folder or hub id (default: embedded SmolLM2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    g = p.add_argument_group("data")
    g.add_argument("--max-prompts", type=int, default=0, help="use only the first N (shuffled) training prompts; 0 = all")
    g.add_argument(
        "--extended-prompts",
        action="store_true",
        help="add the second round of prompts (MORE_TOPICS x all tasks, first-round topics x MORE_TASKS) "
        "after the first; rerun `--stage prompts` then `--stage generate` to extend existing shards",
    )
    g.add_argument(
        "--prompt-rounds",
        type=int,
        choices=(1, 2, 3, 4, 5, 6),
        default=1,
        help="rounds of prompts: 2 = --extended-prompts; 3 adds THIRD_TOPICS x every task after the "
        "second round, 4 adds FOURTH_TOPICS x every task after the third, 5 FIFTH_TOPICS after the "
        "fourth, 6 SIXTH_TOPICS after the fifth (rerun `--stage prompts`, then `--stage generate` extends existing shards)",
    )
    g.add_argument(
        "--gen-from-round",
        type=int,
        default=1,
        metavar="N",
        help="generate only the training prompts of round N and later (e.g. 5 with --prompt-rounds 5: "
        "new data to continue a shipped drafter on, without regenerating rounds 1-4)",
    )
    g.add_argument("--heldout-every", type=int, default=10, help="every N-th topic is held out")
    g.add_argument("--heldout-prompts", type=int, default=32, help="held-out prompts given target responses")
    g.add_argument("--gen-batch", type=int, default=64, help="generation batch size (ragged)")
    g.add_argument(
        "--gen-worker",
        type=_worker,
        default=(0, 1),
        metavar="K/N",
        help="generate only shards b with b %% N == K (run N processes, e.g. 0/2 and 1/2 with --threads 1; "
        "worker 0 also writes the held-out responses)",
    )
    g.add_argument("--max-new-tokens", type=int, default=160, help="target response length cap")
    g.add_argument(
        "--gen-minutes", type=float, default=38.0, help="stop starting new generation batches after this many minutes (0 = no cap)"
    )
    g.add_argument("--gen-dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    g.add_argument("--soft-topk", type=int, default=0, help="keep the target's top-k distribution (0 = hard labels only)")
    g.add_argument(
        "--soft-features",
        default=None,
        metavar="PATH",
        help="take the soft targets from EAGLE features files of these rows (`python -m training.eagle "
        "--stage features`) instead of a new target pass; {split} in PATH stands for train / heldout, "
        "e.g. distill_work/eagle/features-{split}-fuse2-15.safetensors",
    )
    m = p.add_argument_group("draft architecture")
    m.add_argument("--hidden", type=int, default=256)
    m.add_argument("--layers", type=int, default=4)
    m.add_argument("--heads", type=int, default=4)
    m.add_argument("--kv-heads", type=int, default=4)
    m.add_argument("--intermediate", type=int, default=1024)
    t = p.add_argument_group("training")
    t.add_argument("--epochs", type=float, default=3.0)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--batch-tokens", type=int, default=4096, help="padded tokens per training batch")
    t.add_argument("--max-len", type=int, default=256, help="truncate prompt+response to this many tokens")
    t.add_argument("--soft-weight", type=float, default=0.5, help="weight of the soft loss when --soft-topk > 0")
    t.add_argument("--warmup", type=int, default=50)
    t.add_argument(
        "--negatives",
        type=int,
        default=2048,
        help="training softmax over the tokens the target emitted + this many random others per step "
        "(-1 = full vocabulary; the saved head always has the full vocabulary)",
    )
    t.add_argument(
        "--eval-every", type=int, default=0, help="teacher-forced held-out eval every N steps; the best weights are kept (0 = end only)"
    )
    t.add_argument("--no-autocast", action="store_true", help="train in float32 instead of bfloat16 autocast")
    t.add_argument(
        "--init",
        default=None,
        metavar="DIR",
        help="continue from a saved draft folder (its architecture replaces the options above, and its "
        "draft_vocab.json joins the new one) instead of a fresh PCA-initialised draft",
    )
    add_eval_options(p)
    return p.parse_args(argv)


def add_eval_options(p: argparse.ArgumentParser) -> None:
    """The engine evaluation on held-out prompts (shared with `python -m training.eagle`)."""
    e = p.add_argument_group("evaluation")
    e.add_argument("--eval-prompts", type=int, default=24, help="held-out prompts decoded by the engine")
    e.add_argument("--eval-depth", type=int, default=4)
    e.add_argument("--eval-max-new-tokens", type=int, default=96)
    e.add_argument("--eval-batch", type=int, default=8)


def train_settings(args: argparse.Namespace) -> dict:
    """How a draft is trained, as its model card reports it (the train stage keeps these in stats.json)."""
    return {
        "lr": args.lr,
        "epochs": args.epochs,
        "batch_tokens": args.batch_tokens,
        "soft_weight": args.soft_weight if args.soft_topk else 0.0,
        "soft_topk": args.soft_topk,
        "seed": args.seed,
        "init": args.init,
        "soft_features": args.soft_features,
        "command": command_line(args),
    }


def command_line(args: argparse.Namespace) -> str:
    defaults = vars(parse_args([]))
    parts = ["python -m training.distill"]
    for key, value in vars(args).items():
        if key == "stage" or value == defaults[key]:
            continue
        flag = "--" + key.replace("_", "-")
        parts.append(flag if value is True else f"{flag} {value}")
    return " ".join(parts)


class _Stats(dict):
    """The run's stats.json: what each stage measured, kept across separate --stage calls."""

    def __init__(self, path: Path):
        super().__init__(json.loads(path.read_text()) if path.exists() else {})
        self.path = path

    def save(self) -> None:
        self.path.write_text(json.dumps(self, indent=1))


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    work, out = Path(args.work_dir), Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    log = TeeLog(work / "distill.log")
    stats = _Stats(work / "stats.json")
    run = lambda stage: args.stage in (stage, "all")  # noqa: E731
    prompts = _prompts_stage(args, work, run, log)
    train_prompts = prompts["train"][: args.max_prompts or None]
    heldout_prompts = prompts["heldout"][: args.heldout_prompts]

    from engine.model.pair import embedded_model_dir

    target_dir = Path(args.target) if args.target else embedded_model_dir()
    if run("generate"):
        _generate_stage(args, train_prompts, heldout_prompts, work, stats, log)
    train_rows, heldout_rows = read_shards(work / "shards"), read_shards(work / "heldout")
    log(
        f"data: {len(train_rows)} train sequences ({sum(len(r['output_ids']) for r in train_rows)} response tokens), "
        f"{len(heldout_rows)} held-out"
    )
    if args.soft_topk > 0:
        rows = _soft_stage(args, train_rows, heldout_rows, work, run, stats, log)
        if rows is None:
            log.close()
            return 2
        train_rows, heldout_rows = rows
    if run("train") and not _train_stage(args, train_rows, heldout_rows, target_dir, out, stats, log):
        log.close()
        return 2
    if run("eval"):
        _eval_stage(args, prompts, train_rows, out, stats, log)
    log.close()
    return 0


def _prompts_stage(args, work: Path, run, log) -> dict:
    prompts_path = work / "prompts.json"
    if run("prompts") or not prompts_path.exists():
        prompts = build_prompts(seed=args.seed, heldout_every=args.heldout_every, extended=args.extended_prompts, rounds=args.prompt_rounds)
        prompts_path.write_text(json.dumps(prompts, indent=1))
        log(
            f"prompts: {len(prompts['train'])} train, {len(prompts['heldout'])} held-out ({len(prompts['heldout_topics'])} held-out topics)"
        )
    return json.loads(prompts_path.read_text())


def _generate_stage(args, train_prompts: list, heldout_prompts: list, work: Path, stats: _Stats, log) -> None:
    from engine.model.pair import load_pair

    pair = load_pair(target=args.target, draft=None, dtype=args.gen_dtype)
    cap = args.gen_minutes * 60 if args.gen_minutes > 0 else None
    g = generate_data(
        pair,
        train_prompts,
        work / "shards",
        args.gen_batch,
        args.max_new_tokens,
        cap,
        log,
        worker=args.gen_worker,
        from_round=args.gen_from_round,
    )
    h = generate_data(
        pair, heldout_prompts if args.gen_worker[0] == 0 else [], work / "heldout", args.gen_batch, args.max_new_tokens, None, log
    )
    if stats.path.exists():  # re-read: other --gen-worker processes may have added their time meanwhile
        stats.update(json.loads(stats.path.read_text()))
    stats["gen_seconds"] = stats.get("gen_seconds", 0.0) + g["seconds"] + h["seconds"]
    stats["gen_dtype"] = pair.dtype_name
    stats.save()


def _soft_stage(args, train_rows: list, heldout_rows: list, work: Path, run, stats: _Stats, log) -> tuple[list, list] | None:
    """The rows with the target's top-k soft targets (cached in the work folder); None after a logged error."""
    soft_path = work / f"soft-top{args.soft_topk}.jsonl"
    soft_rows = None
    if soft_path.exists() and not run("soft"):
        with open(soft_path) as f:
            soft_rows = [json.loads(line) for line in f]
        if not soft_matches(soft_rows, train_rows + heldout_rows):
            log(f"soft: {soft_path} was made for other data ({len(soft_rows)} rows); recomputing")
            soft_rows = None
    if soft_rows is None:
        from engine.model.pair import load_pair

        pair = load_pair(target=args.target, draft=None, dtype=args.gen_dtype)
        t0 = time.perf_counter()
        if args.soft_features:
            from safetensors import SafetensorError

            lm_head = pair.target.get_output_embeddings().weight.detach()
            for rows, name in ((train_rows, "train"), (heldout_rows, "heldout")):
                path = Path(args.soft_features.replace("{split}", name))
                try:
                    soft_targets_from_features(path, rows, args.soft_topk, lm_head, args.max_len, log=log)
                except (OSError, ValueError, SafetensorError) as exc:
                    log(f"error: --soft-features {path}: {exc}")
                    return None
        else:
            soft_targets(pair.target, train_rows + heldout_rows, args.soft_topk, args.max_len, log=log)
        stats["soft_seconds"] = time.perf_counter() - t0
        stats.save()
        with open(soft_path, "w") as f:
            for r in train_rows + heldout_rows:
                f.write(json.dumps(r) + "\n")
        soft_rows = train_rows + heldout_rows
    return soft_rows[: len(train_rows)], soft_rows[len(train_rows) :]


def _train_stage(args, train_rows: list, heldout_rows: list, target_dir: Path, out: Path, stats: _Stats, log) -> bool:
    """Train (or continue, --init) the draft and save it; False after a logged error."""
    from transformers import AutoModelForCausalLM

    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32)
    if args.init:
        try:
            draft = AutoModelForCausalLM.from_pretrained(args.init, dtype=torch.float32)
        except (OSError, ValueError) as exc:
            log(f"error: --init {args.init}: not a draft model folder ({exc})")
            return False
        if draft.config.vocab_size != target.config.vocab_size:
            log(f"error: --init {args.init} has vocab_size {draft.config.vocab_size}, the target {target.config.vocab_size}")
            return False
        c = draft.config
        args.hidden, args.layers, args.heads = c.hidden_size, c.num_hidden_layers, c.num_attention_heads
        args.kv_heads, args.intermediate = c.num_key_value_heads, c.intermediate_size
        log(f"train: continuing from {args.init}")
    else:
        draft = make_draft(target, args.hidden, args.layers, args.heads, args.kv_heads, args.intermediate, args.seed)
    del target
    result = train(
        draft,
        train_rows,
        heldout_rows,
        epochs=args.epochs,
        lr=args.lr,
        batch_tokens=args.batch_tokens,
        soft_weight=args.soft_weight if args.soft_topk else 0.0,
        max_len=args.max_len,
        seed=args.seed,
        warmup=args.warmup,
        log=log,
        eval_every=args.eval_every,
        autocast=not args.no_autocast,
        negatives=args.negatives,
    )
    stats["train"] = result
    # how this draft was trained, for the card an `--stage eval` run writes later with its own arguments
    stats["train_args"] = train_settings(args)
    stats["params"] = sum(p.numel() for p in draft.parameters())
    stats["embedding_params"] = draft.get_input_embeddings().weight.numel()
    stats["bytes"] = save_draft(draft, target_dir, out)
    init_vocab = []
    if args.init and (Path(args.init) / "draft_vocab.json").exists():
        init_vocab = json.loads((Path(args.init) / "draft_vocab.json").read_text())["ids"]
    stats["draft_vocab"] = write_draft_vocab(out, train_rows, init_vocab)
    stats.save()
    log(
        f"train: {result['steps']} steps in {result['seconds']:.0f} s; held-out top1 "
        f"{result.get('heldout', {}).get('top1', float('nan')):.3f}; wrote {out} ({stats['bytes'] / 1e6:.1f} MB)"
    )
    return True


def _eval_stage(args, prompts: dict, train_rows: list, out: Path, stats: _Stats, log) -> None:
    """Measure the saved draft in the engine and write its card."""
    eval_prompts = heldout_eval_prompts(prompts["heldout"], args.eval_prompts)
    ev = engine_eval(out, args.target, eval_prompts, args.eval_depth, args.eval_max_new_tokens, args.eval_batch)
    stats["engine_eval"] = ev
    stats.save()
    log(f"eval: alpha {ev['alpha']:.3f}  per-position {[round(x, 3) for x in ev['per_position_acceptance']]}")
    tr = stats.get("train", {})
    saved = json.loads((out / "config.json").read_text())
    info = {
        "architecture": {
            "hidden": saved["hidden_size"],
            "layers": saved["num_hidden_layers"],
            "heads": saved["num_attention_heads"],
            "kv_heads": saved["num_key_value_heads"],
            "intermediate": saved["intermediate_size"],
        },  # the saved draft's (--init may differ)
        "params": stats.get("params", 0),
        "embedding_params": stats.get("embedding_params", 0),
        "bytes": sum(p.stat().st_size for p in out.iterdir() if p.is_file()),
        "prompts_train": len(train_rows),
        "heldout_topics": len(prompts["heldout_topics"]),
        "max_new_tokens": args.max_new_tokens,
        "gen_batch": args.gen_batch,
        "gen_dtype": stats.get("gen_dtype", "?"),
        "train_tokens": tr.get("train_tokens", 0),
        "gen_minutes": stats.get("gen_seconds", 0.0) / 60,
        "soft_minutes": stats.get("soft_seconds", 0.0) / 60,
        "steps": tr.get("steps", 0),
        "train_minutes": tr.get("seconds", 0.0) / 60,
        "engine_eval": ev,
        "heldout_top1": tr.get("heldout", {}).get("top1", float("nan")),
    }
    # the training run's own settings (an eval-only call's arguments are not how the draft was trained)
    info |= stats.get("train_args") or train_settings(args)
    write_card(out, info)
    log(f"eval: wrote {out / 'README.md'}")


if __name__ == "__main__":
    sys.exit(main())
