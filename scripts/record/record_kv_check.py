"""Record the Predictor's KV check: this machine's passes at several contexts against the roofline's time for them.

Batch 1 and 8, 1 and 4 new tokens per row, over 256, 1,024 and 4,096 tokens of KV cache per row (the shapes of
`python -m engine passes --batch 1,8 --tokens 1,4 --context C --repeats 5`), every context timed once per round in
turn, the median of the rounds kept with their spread (engine/bench/kv_passes.py), and this machine's peaks from the
full probe (`python -m engine probe`). The Predictor page draws the recording (assets/predictor/kv_check.json),
labelled with the machine, dtype and date, predicted against measured with the ratio per pass
(engine/roofline/kv_check.py). A few minutes on a 2-core CPU; run it on a quiet machine:

    python scripts/record/record_kv_check.py [--rounds 3] [--repeats 5] [--note "a shared 2-core machine"]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from engine import load_pair
from engine.bench.kv_passes import BATCHES, CONTEXTS, TOKENS, measure_kv_passes
from engine.hardware import probe
from engine.roofline.kv_check import KV_RECORDING, kv_growth, kv_rows, read_kv_check


def int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def write(record: dict, out: Path) -> None:
    """Atomically, then read back through the page's reader (a file it refuses is not left as the recording)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(record, allow_nan=False, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    recording = read_kv_check(out)
    print(f"{out}: {recording.machine}, {recording.dtype}, {recording.date}; {recording.note}")
    print("context  batch  tokens/row  measured ms [low-high]  predicted ms  predicted/measured  KV share of bytes")
    for r in sorted(kv_rows(recording), key=lambda r: (r.context, r.batch, r.new_tokens)):
        print(
            f"{r.context:>7}  {r.batch:>5}  {r.new_tokens:>10}  {r.measured_ms:>8.2f} [{r.low_ms:.2f}-{r.high_ms:.2f}]"
            f"  {r.predicted_ms:>12.2f}  {r.ratio:>18.2f}  {r.kv_share:>17.0%}"
        )
    for g in kv_growth(kv_rows(recording)):
        print(
            f"batch {g.batch} x {g.new_tokens}: context {g.short} -> {g.long} added {g.measured_ms:.2f} ms measured, "
            f"{g.predicted_ms:.2f} ms predicted"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int_list, default=list(CONTEXTS), help="KV cache tokens per row, comma-separated")
    parser.add_argument("--batch", type=int_list, default=list(BATCHES))
    parser.add_argument("--tokens", type=int_list, default=list(TOKENS), help="new tokens per row")
    parser.add_argument("--repeats", type=int, default=5, help="passes per shape and round (their median)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds over the contexts (their median and spread)")
    parser.add_argument("--note", default="a shared 2-core machine", help="said beside the machine's name")
    parser.add_argument("--out", type=Path, default=KV_RECORDING)
    args = parser.parse_args()
    pair = load_pair()
    peaks = probe(pair.device, pair.dtype)  # the full probe, as `python -m engine probe`
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    record = measure_kv_passes(
        pair, peaks, args.contexts, args.batch, args.tokens, args.repeats, args.rounds, log=lambda line: print(line, flush=True)
    )
    load1 = os.getloadavg()[0]
    note = f"{args.note}; load average {load0:.1f} to {load1:.1f} on {os.cpu_count()} cores; {time.perf_counter() - t0:.0f} s"
    write(record | {"note": note}, args.out)


if __name__ == "__main__":
    main()
