"""Do later runs in one Playground session read slower than a fresh session's first run? And why?

    PYTHONPATH=$PWD .venv/bin/python scripts/investigate/session_drift.py [--rounds 4] [--tokens 32] [--batch 2]

Drives the real Playground page headless (Streamlit's AppTest: the same script, session state and
script-runner threads as a server; no browser) with the embedded pair. Each round does, interleaved,
one run in a FRESH session and one more run in a single LONG-LIVED session, so both see the same
machine. For every run it prints the lanes' tokens/s (from the traces), the other processes' CPU
load during each lane (engine/loadmeter.py), and the suspects of issue 21:
- threads: the process's thread count (a sampler or pool thread that never stops would grow it),
  and torch's intra-op thread count as the script thread sees it;
- memory: RSS, objects the garbage collector tracks, session_state size, gen-2 collections and the
  time spent collecting during the run (gc.callbacks);
- autograd: whether grad mode is on in the script thread (the engine decodes under inference_mode).
The medians of the two kinds of session are compared at the end.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import threading
import time
from pathlib import Path

import psutil
import torch
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
GC = {"collections": 0, "seconds": 0.0, "_t": 0.0}


def _gc_callback(phase, info):
    if info.get("generation") != 2:
        return
    if phase == "start":
        GC["_t"] = time.perf_counter()
    else:
        GC["collections"] += 1
        GC["seconds"] += time.perf_counter() - GC["_t"]


def _script_thread_view() -> tuple[int, bool]:
    """torch threads and grad mode as a fresh thread sees them (Streamlit runs each script run in a new thread)."""
    out = {}

    def look():
        out["threads"], out["grad"] = torch.get_num_threads(), torch.is_grad_enabled()

    t = threading.Thread(target=look)
    t.start()
    t.join()
    return out["threads"], out["grad"]


def _open(tokens: int, batch: int) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=600)
    at.query_params.update({"tokens": str(tokens), "batch": str(batch), "depth": "3"})
    return at.run()


def _run(at: AppTest, kind: str, index: int) -> dict:
    proc = psutil.Process()
    GC.update(collections=0, seconds=0.0)
    at.button(key="run").click().run()
    if at.exception or at.error:
        raise SystemExit(f"run failed: {[e.value for e in at.exception] + [e.value for e in at.error]}")
    result = at.session_state["result"]
    ar, spec = result["ar"].summary, result["spec"].summary
    torch_threads, grad = _script_thread_view()
    row = {
        "kind": kind,
        "run": index,
        "ar_tps": ar["tokens_per_s"],
        "spec_tps": spec["tokens_per_s"],
        "ar_other": ar["other_cpu_s"] / ar["wall_s"],
        "spec_other": spec["other_cpu_s"] / spec["wall_s"],
        "threads": proc.num_threads(),
        "torch_threads": torch_threads,
        "grad": grad,
        "rss_mb": proc.memory_info().rss / 2**20,
        "gc_objects": len(gc.get_objects()),
        "gc2": GC["collections"],
        "gc2_ms": GC["seconds"] * 1000,
    }
    print(
        f"{kind:<6} run {index}: AR {row['ar_tps']:6.1f} tok/s (others {row['ar_other']:.2f} cores), "
        f"spec {row['spec_tps']:6.1f} tok/s (others {row['spec_other']:.2f}); threads {row['threads']}, "
        f"torch threads {torch_threads}, grad {grad}, RSS {row['rss_mb']:.0f} MB, gc objects {row['gc_objects']:,}, "
        f"gen-2 collections {row['gc2']} ({row['gc2_ms']:.0f} ms)",
        flush=True,
    )
    return row


def parse_args(doc: str) -> argparse.Namespace:
    """The drift scripts' options (this one and scripts/investigate/browser_drift.py)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    return ap.parse_args()


def print_medians(rows: list[dict]) -> None:
    """Median tokens/s of each lane and the median speedup, for fresh sessions and the long-lived one."""
    for kind in ("fresh", "same"):
        mine = [r for r in rows if r["kind"] == kind]
        print(
            f"median {kind:<5}: AR {statistics.median(r['ar_tps'] for r in mine):6.1f} tok/s, spec "
            f"{statistics.median(r['spec_tps'] for r in mine):6.1f} tok/s, speedup "
            f"{statistics.median(r['spec_tps'] / r['ar_tps'] for r in mine):.2f}x over {len(mine)} runs"
        )


def main() -> None:
    args = parse_args(__doc__)
    gc.callbacks.append(_gc_callback)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads in the main thread; "
        f"{psutil.cpu_count()} CPUs; load average {psutil.getloadavg()[0]:.1f}",
        flush=True,
    )
    long_lived = _open(args.tokens, args.batch)
    _run(long_lived, "warmup", 0)  # loads and warms the pair (cached for the process, as on a server)
    rows = []
    for i in range(1, args.rounds + 1):
        rows.append(_run(_open(args.tokens, args.batch), "fresh", i))
        rows.append(_run(long_lived, "same", i))
    print_medians(rows)


if __name__ == "__main__":
    main()
