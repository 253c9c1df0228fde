"""How long the worst trace pair Replay accepts holds the server: parse, validate and draw, stage by stage.

    PYTHONPATH=$PWD .venv/bin/python scripts/investigate/bench_replay.py [--mb 64] [--repeats 3] [--shapes depth,plain,wide]

The loader's caps (engine/trace/: MAX_FILE_BYTES, MAX_STEPS, MAX_SEQUENCES, MAX_DEPTH) bound what an
upload can be. This script writes, for each shape, the largest trace the caps allow (grown until the
next step would pass the file-size cap), in the loader's own schema, and times what Replay does with
a pair of them (app/replay/replay.py -> app/common/results.py), with the same functions the page calls:

- `depth`: one sequence, every step drafting MAX_DEPTH tokens (the most token records per byte);
- `plain`: one sequence, plain steps (the most steps, up to MAX_STEPS);
- `wide`: MAX_SEQUENCES sequences per step (the widest batch).

Stages: parse + validate (Trace.from_json_bytes, both files), token records (both lanes), the race view
HTML, both lanes' token HTML, the summary metrics, and the six figures serialised as the browser gets
them (plotly to_json). It prints the median of `--repeats` per stage and the total, in wall seconds and
in this process's CPU seconds (time.process_time: close to what the stage costs on an idle core when the
machine is shared), with the bytes each view sends. These are synthetic traces: the point is the time, not the numbers inside them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from app.common.results import Peaks
from app.views import charts, depth_policy, metrics, race, tokens
from engine.options import MAX_DEPTH
from engine.trace.file import Trace
from engine.trace.loader import MAX_FILE_BYTES, MAX_SEQUENCES, MAX_STEPS
from engine.trace.records import SCHEMA

STEP_MS = 20.0


def _draft(i: int, accepted: bool) -> dict:
    return {"id": 1000 + i, "text": f" w{i % 97}", "draft_prob": 0.5, "target_prob": 0.4, "accepted": accepted}


def _seq_step(seq: int, depth: int, accepted: int, first_id: int) -> dict:
    drafted = [_draft(first_id + j, j < accepted) for j in range(depth)]
    kind = "plain" if not depth else "bonus" if accepted == depth else "correction"
    return {
        "seq": seq,
        "drafted": drafted,
        "num_accepted": accepted,
        "next_id": 7,
        "next_text": " x",
        "next_prob": 0.9,
        "next_kind": kind,
        "emitted": [1000 + first_id + j for j in range(accepted)] + [7],
        "finished": False,
    }


def _step(index: int, depth: int, seqs: list[dict]) -> dict:
    t0 = index * STEP_MS / 1000
    return {
        "index": index,
        "kind": "prefill" if index == 0 else "decode",
        "depth": depth,
        "batch": len(seqs),
        "tokens_per_pass": len(seqs) * (depth + 1),
        "t_start_s": t0,
        "t_end_s": t0 + STEP_MS / 1000,
        "draft_ms": 5.0 if depth else 0.0,
        "verify_ms": 14.0,
        "overhead_ms": 1.0,
        "target_flops": 1e9,
        "draft_flops": 1e8 if depth else 0.0,
        "target_bytes": 2.7e8,
        "draft_bytes": 1e8 if depth else 0.0,
        "flops_wasted": 0.0,
        "util_pct": 50.0,
        "policy_ms": 0.0,
        "seqs": seqs,
    }


def worst_trace(shape: str, speculative: bool, max_bytes: int) -> bytes:
    """The largest trace of this shape under the caps, as the bytes an upload would carry."""
    n_seqs = MAX_SEQUENCES if shape == "wide" else 1
    depth = MAX_DEPTH if speculative and shape != "plain" else (2 if speculative else 0)
    accepted = depth // 2
    one = json.dumps(_step(1, depth, [_seq_step(s, depth, accepted, 0) for s in range(n_seqs)]))
    head = 4096 + n_seqs * 200  # config, sequences, summary, meta
    n_steps = min(MAX_STEPS, max(2, (max_bytes - head) // (len(one) + 2)))
    steps = [_step(0, 0, [_seq_step(s, 0, 0, 0) for s in range(n_seqs)])]
    steps += [_step(i, depth, [_seq_step(s, depth, accepted, i) for s in range(n_seqs)]) for i in range(1, n_steps)]
    outputs = [[] for _ in range(n_seqs)]
    for st in steps:
        for sq in st["seqs"]:
            outputs[sq["seq"]].extend(sq["emitted"])
    trace = {
        "schema": SCHEMA,
        "config": {
            "mode": "speculative" if speculative else "autoregressive",
            "depth": depth,
            "drafter": "model",
            "max_new_tokens": 1_000_000,
        },
        "meta": {
            "device": "cpu",
            "device_name": "bench",
            "dtype": "float32",
            "draft_name": "bench draft",
            "util_source": "psutil",
            "probe": {"peak_bandwidth": 2e10, "peak_flops": 1e12, "dtype": "float32", "device_name": "bench"},
        },
        "sequences": [{"prompt": "p", "prompt_tokens": 3, "output_ids": o, "text": ""} for o in outputs],
        "steps": steps,
        "summary": {"new_tokens": sum(map(len, outputs)), "wall_s": steps[-1]["t_end_s"], "device": "cpu", "dtype": "float32"},
    }
    raw = json.dumps(trace).encode()
    while len(raw) > max_bytes:  # trim to the cap
        trace["steps"] = trace["steps"][: int(len(trace["steps"]) * max_bytes / len(raw) * 0.99)]
        outputs = [[] for _ in range(n_seqs)]
        for st in trace["steps"]:
            for sq in st["seqs"]:
                outputs[sq["seq"]].extend(sq["emitted"])
        for seq, o in zip(trace["sequences"], outputs):
            seq["output_ids"] = o
        trace["summary"]["new_tokens"] = sum(map(len, outputs))
        trace["summary"]["wall_s"] = trace["steps"][-1]["t_end_s"]
        raw = json.dumps(trace).encode()
    return raw


class _Clock:
    """Wall and process CPU seconds since the last lap (CPU time barely depends on what else the machine runs)."""

    def __init__(self):
        self.t, self.c = time.perf_counter(), time.process_time()

    def lap(self) -> tuple[float, float]:
        t, c = time.perf_counter(), time.process_time()
        out = (t - self.t, c - self.c)
        self.t, self.c = t, c
        return out


def draw(ar_raw: bytes, spec_raw: bytes) -> dict[str, tuple[float, float, int]]:
    """What Replay does with an uploaded pair; stage -> (wall s, CPU s, bytes sent to the browser)."""
    out = {}
    clock = _Clock()
    ar, spec = Trace.from_json_bytes(ar_raw), Trace.from_json_bytes(spec_raw)
    out["parse + validate"] = (*clock.lap(), 0)
    n = len(ar.sequences)
    ar_recs, spec_recs = tokens.token_records(ar.steps, n), tokens.token_records(spec.steps, n)
    out["token records"] = (*clock.lap(), 0)
    html = race.race_html(ar_recs, spec_recs, ar.summary["wall_s"], spec.summary["wall_s"])
    out["race view"] = (*clock.lap(), len(html))
    m = metrics.compare(ar, spec)
    lanes = tokens.lane_html(ar_recs, m["first_differences"], speculative=False) + tokens.lane_html(spec_recs, m["first_differences"])
    out["metrics + token view"] = (*clock.lap(), len(lanes))
    peaks = Peaks.from_meta(spec)
    figures = [
        charts.latency_figure(ar, spec),
        charts.tokens_per_pass_figure(ar, spec),
        charts.utilization_figure(ar, spec, peaks.peak_bandwidth, peaks.peak_flops, "psutil"),
        charts.acceptance_figure(spec),
        depth_policy.depth_figure(spec),
    ]
    sent = sum(len(f.to_json()) for f in figures) + len(depth_policy.depth_summary(spec))
    out["figures"] = (*clock.lap(), sent)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=MAX_FILE_BYTES / 2**20, help="file size of each trace (MiB)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shapes", default="depth,plain,wide")
    args = ap.parse_args()
    max_bytes = min(int(args.mb * 2**20), MAX_FILE_BYTES)
    for shape in args.shapes.split(","):
        ar_raw, spec_raw = worst_trace(shape, False, max_bytes), worst_trace(shape, True, max_bytes)
        probe = Trace.from_json_bytes(spec_raw)
        records = sum(len(s.drafted) + 1 for st in probe.steps for s in st.seqs)
        print(
            f"\n== shape {shape}: AR {len(ar_raw) / 2**20:.1f} MiB, spec {len(spec_raw) / 2**20:.1f} MiB, "
            f"{len(probe.steps):,} spec steps, {len(probe.sequences):,} sequences, ~{records:,} spec token records"
        )
        del probe
        runs = [draw(ar_raw, spec_raw) for _ in range(args.repeats)]
        for stage in runs[0]:
            wall = statistics.median(r[stage][0] for r in runs)
            cpu = statistics.median(r[stage][1] for r in runs)
            sent = runs[0][stage][2]
            print(f"{stage:<22} {wall:7.2f} s wall {cpu:7.2f} s CPU" + (f"   {sent / 2**20:6.2f} MiB to the browser" if sent else ""))
        walls = [sum(v[0] for v in r.values()) for r in runs]
        cpus = [sum(v[1] for v in r.values()) for r in runs]
        print(
            f"{'total':<22} {statistics.median(walls):7.2f} s wall {statistics.median(cpus):7.2f} s CPU   (median of "
            f"{args.repeats}; wall: " + ", ".join(f"{x:.2f}" for x in walls) + ")",
            flush=True,
        )


if __name__ == "__main__":
    main()
