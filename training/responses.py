"""What the target says, as training data: its greedy responses to the prompt set (`generate_data`, the
distillation's stage 2, written in resumable shards) and, optionally, its top-k next-token distributions
over them (`soft_targets`, stage 3; `soft_targets_from_features` reads them off EAGLE features instead)."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from .data import sequence_of


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
