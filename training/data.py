"""Shared data helpers of the offline training tools: response shards, sequences, length batches, logs."""

from __future__ import annotations

import json
import random
from pathlib import Path


def read_shards(shard_dir: Path) -> list[dict]:
    rows = []
    for path in sorted(shard_dir.glob("shard-*.jsonl")):
        with open(path) as f:
            rows.extend(json.loads(line) for line in f if line.strip())
    return rows


def sequence_of(row: dict, max_len: int) -> tuple[list[int], int]:
    """prompt + response token ids (truncated to max_len) and the index of the first response token."""
    ids = (list(row["prompt_ids"]) + list(row["output_ids"]))[:max_len]
    return ids, len(row["prompt_ids"])


def length_batches(lengths: dict[int, int], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Batches of the keys of `lengths` (index -> length), similar lengths together, about `batch_tokens`
    padded tokens each, shuffled with `rng`."""
    order = sorted(lengths, key=lambda i: (lengths[i], rng.random()))
    batches, cur, cur_max = [], [], 0
    for i in order:
        n = lengths[i]
        if cur and max(cur_max, n) * (len(cur) + 1) > batch_tokens:
            batches.append(cur)
            cur, cur_max = [], 0
        cur.append(i)
        cur_max = max(cur_max, n)
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


class TeeLog:
    """Print a line and append it to a log file (the training CLIs' progress log)."""

    def __init__(self, path: Path):
        self.file = open(path, "a")

    def __call__(self, msg: str) -> None:
        print(msg, flush=True)
        self.file.write(msg + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()
