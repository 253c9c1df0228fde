"""Record llama-server plain against speculative (the shipped distilled draft at K = 2 and 3) over concurrencies on
this machine, interleaved, and ship it for the "Serving engines" page (assets/serving/) — issue 44.

    python scripts/serving/record_serving.py [--concurrency 1,2,4,8] [--rounds 3] [--prompts 8] [--max-new-tokens 64]

It starts three llama-servers on 127.0.0.1 (scripts/serving/llama_server.sh: plain, K = 2, K = 3; each with -np 8
slots, continuous batching), runs `engine.serving.sweep` for each K against the one plain server, stops them, and
writes assets/serving/llama-server.json. With --fixtures it also keeps one real /metrics page and one real streamed
response under tests/data/serving/ (the parsers' tests read them). Timed runs take /work/bench.lock when it exists.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import json
import os
import platform
import subprocess
import urllib.request
from pathlib import Path

import torch

from engine.bench.prompts import batch_prompts
from engine.formats import cache_dir
from engine.hardware import device_name
from engine.serving import record, sweep

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "serving" / "llama_server.sh"
OUT = ROOT / "assets" / "serving" / "llama-server.json"
FIXTURES = ROOT / "tests" / "data" / "serving"
PORTS = {0: 18180, 2: 18182, 3: 18183}


def start(k: int, np_: int) -> int:
    out = subprocess.run(["bash", str(SCRIPT), "start", str(PORTS[k]), str(k), str(np_)], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def version() -> str:
    cache = cache_dir() / "llama.cpp"  # where scripts/llama_cpp.sh builds it
    exe = next(cache.glob("*build-*/bin/llama-server"))
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    line = next((x for x in (out.stdout + out.stderr).splitlines() if x.startswith("version")), "version unknown")
    return f"llama.cpp llama-server, {line.strip()}"


def speclab_acceptance() -> dict:
    cal = json.loads((ROOT / "assets" / "draft" / "calibration.json").read_text())
    return {
        "per_pos_rate": cal["per_position_acceptance"],
        "source": f"SpecLab's engine: {cal['measured']}; {cal['prompts']} ({cal['date']})",
    }


def fixtures(base: str, model: str) -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        (FIXTURES / "llama-server-metrics.txt").write_bytes(r.read())
    body = {
        "model": model,
        "messages": [{"role": "user", "content": batch_prompts("heldout", 1)[0]}],
        "max_tokens": 24,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    req = urllib.request.Request(
        base + "/v1/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        (FIXTURES / "llama-server-stream.txt").write_bytes(r.read())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="1,2,4,8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--fixtures", action="store_true")
    args = ap.parse_args()
    conc = [int(x) for x in args.concurrency.split(",")]
    pids = {}
    lock = open("/work/bench.lock", "w") if Path("/work").is_dir() else None
    try:
        for k in PORTS:
            pids[k] = start(k, max(conc))
        servers = {k: sweep.Server(f"http://127.0.0.1:{port}") for k, port in PORTS.items()}
        prompts = batch_prompts("heldout", args.prompts)
        if lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
        load0 = os.getloadavg()[0]
        sweeps = {k: sweep.sweep(servers[0], servers[k], prompts, conc, args.rounds, args.max_new_tokens) for k in (2, 3)}
        note = (
            f"a quiet 2-core machine; load average {load0:.1f} to {os.getloadavg()[0]:.1f}; "
            f"{args.prompts} held-out prompts, {args.rounds} interleaved rounds"
        )
        if args.fixtures:
            fixtures(servers[2].base, servers[2].model)
    finally:
        if lock:
            lock.close()
        for pid in pids.values():
            with contextlib.suppress(Exception):
                subprocess.run(["bash", str(SCRIPT), "stop", str(pid)], check=False)
    machine = device_name(torch.device("cpu")) or platform.machine()
    rec = record.make(sweeps, server=version(), machine=machine, date=dt.date.today().isoformat(), note=note, speclab=speclab_acceptance())
    record.check(json.loads(json.dumps(rec)))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(rec, indent=1))
    for k, s in sweeps.items():
        print(f"K = {k}")
        from engine.serving.cli import table

        print(table(s))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
