"""Record the task bench on Spec-Bench (or another prompt file) for the Benchmarks page: every task × plain decoding and
each contender × every batch, interleaved rounds, decode-only speedups judged by the one rule, τ per cell; labelled
with the machine (the probe's device name), dtype, date, settings, the prompts chosen and the seconds it took.

    python scripts/record/record_tasks.py [--per-task 2] [--batches 1,4,16] [--tokens 32] [--rounds 3]
        [--contenders ngram,eagle,model,tree,goodput] [--prompts-file assets/spec_bench/question.jsonl]
        [--out assets/spec_bench/recording.json] [--dtype auto|bfloat16|float32]

Run it on a quiet machine: every other process slows the timings (each row keeps the cores other work used).
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path

from engine import load_pair
from engine.bench import task_records
from engine.bench.prompt_files import SPEC_BENCH, PromptFileError, read_prompts, select, tasks
from engine.bench.tasks import CONTENDERS, format_tasks, run_tasks
from engine.hardware import probe

ROOT = Path(__file__).resolve().parents[2]


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"{what} takes comma-separated whole numbers, not {text!r}") from None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts-file", default=str(SPEC_BENCH), help="JSONL prompts (Spec-Bench's format or {'prompt': ...})")
    ap.add_argument("--per-task", type=int, default=2, help="prompts per task, spread evenly over the task")
    ap.add_argument("--batches", default="1,4,16", help="comma-separated batch sizes")
    ap.add_argument("--tokens", type=int, default=32, help="new tokens per row")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per cell")
    ap.add_argument("--contenders", default=",".join(CONTENDERS), help="comma-separated: " + ", ".join(CONTENDERS))
    ap.add_argument("--out", default=str(ROOT / "assets" / "spec_bench" / "recording.json"))
    ap.add_argument("--note", default="a shared 2-core machine", help="said beside the machine's name")
    ap.add_argument(
        "--dtype",
        default="auto",
        choices=("auto", "bfloat16", "float32"),
        help="the models' dtype (float32: greedy speculation writes plain decoding's text exactly, so every cell compares equal work)",
    )
    a = ap.parse_args()
    try:
        prompts = select(read_prompts(a.prompts_file), per_task=a.per_task)
    except PromptFileError as exc:
        raise SystemExit(str(exc)) from None
    keys = [k for k in a.contenders.split(",") if k]
    unknown = [k for k in keys if k not in CONTENDERS]
    if unknown:
        raise SystemExit(f"unknown contender(s) {', '.join(unknown)}: choose from {', '.join(CONTENDERS)}")
    pair = load_pair(dtype=a.dtype)
    hw = probe(pair.device, pair.dtype, quick=True)
    print(f"{len(prompts)} prompts ({a.per_task} per task) on {hw.device_name}, {pair.dtype_name}", flush=True)
    t0 = time.monotonic()
    rows = run_tasks(pair, prompts, _ints(a.batches, "--batches"), keys, a.tokens, a.rounds, log=lambda s: print(s, flush=True))
    seconds = time.monotonic() - t0
    settings = {
        "per_task": a.per_task,
        "batches": _ints(a.batches, "--batches"),
        "max_new_tokens": a.tokens,
        "rounds": a.rounds,
        "contenders": keys,
        "file": Path(a.prompts_file).name,
        "note": a.note,
    }
    chosen = {t: [p.qid for p in prompts if p.task == t] for t in tasks(prompts)}
    record = task_records.make(
        rows,
        machine=hw.device_name,
        dtype=pair.dtype_name,
        seconds=seconds,
        settings=settings,
        prompts=chosen,
        date=dt.date.today().isoformat(),
    )
    task_records.save(record, a.out)
    print(format_tasks(record["rows"]))
    print(f"wrote {a.out} ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
