"""Load of a class session on the store (issue 29): N simulated students polling, then one Reveal.

Each student is a thread that joins a fresh class in a temporary store file and then does what its page's
polling fragment does (app/classroom/panel.py: one ClassState read every POLL_S seconds). The script reports
  - idle CPU: this process's CPU time while the class only polls, as % of one core (the issue's goal: <= 10 %),
    the store's share of the server's idle cost;
  - Reveal -> last student: the time from the teacher's reveal() to the last student's poll that sees the
    result, median and max over --reveals reveals (goal: median <= 3 s; with polling every 2 s expect ~2 s).
With --server-pid PID it also samples a running `streamlit run app/main.py` (e.g. with 30 real browser tabs
on a class, opened by hand or by Playwright) over the same idle window, so the whole server's idle CPU is
measured, not only the store's. Keep runs short on a shared machine:

    python scripts/investigate/class_store_load.py --students 30 --idle-s 10 --reveals 3 [--server-pid PID] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psutil

from app.classroom.inputs import Limits
from app.classroom.panel import POLL_S
from app.classroom.store import ClassroomStore


def student(store: ClassroomStore, code: str, k: int, stop: threading.Event, seen: dict, polls: list) -> None:
    """Join, then poll like the page's fragment; note when each revealed result is first seen."""
    sid = store.join(code, f"s{k}", client=f"sim{k}")
    time.sleep(POLL_S * k / 30)  # students arrive spread over a poll period, as real ones do
    while not stop.is_set():
        state = store.state(code, student_id=sid)
        polls[k] += 1
        if state.result_json is not None and (k, state.result_json) not in seen:
            seen[(k, state.result_json)] = time.perf_counter()
        stop.wait(POLL_S)


def cpu_percent(seconds: float, server: psutil.Process | None) -> tuple[float, float | None]:
    """(this process, the server or None) CPU over `seconds` of wall time, as % of one core."""
    me = psutil.Process()
    t0, mine0 = time.perf_counter(), me.cpu_times()
    theirs0 = server.cpu_times() if server else None
    time.sleep(seconds)
    wall = time.perf_counter() - t0
    mine1 = me.cpu_times()
    own = (mine1.user + mine1.system - mine0.user - mine0.system) / wall * 100
    if server is None:
        return own, None
    theirs1 = server.cpu_times()
    return own, (theirs1.user + theirs1.system - theirs0.user - theirs0.system) / wall * 100


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--idle-s", type=float, default=10.0, help="how long to measure the idle CPU")
    ap.add_argument("--reveals", type=int, default=3)
    ap.add_argument("--server-pid", type=int, default=None, help="a running streamlit server to sample as well")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        store = ClassroomStore(Path(tmp) / "classes.sqlite3", limits=Limits(joins_per_client_per_minute=1000))
        code, token = store.create_class()
        store.set_lesson(code, token, 1)
        stop, seen, polls = threading.Event(), {}, [0] * args.students
        threads = [threading.Thread(target=student, args=(store, code, k, stop, seen, polls), daemon=True) for k in range(args.students)]
        for t in threads:
            t.start()
        time.sleep(POLL_S + 0.5)  # everyone joined and polling
        server = psutil.Process(args.server_pid) if args.server_pid else None
        polls_before = sum(polls)
        own_cpu, server_cpu = cpu_percent(args.idle_s, server)
        poll_rate = (sum(polls) - polls_before) / args.idle_s

        latencies = []
        for r in range(args.reveals):
            result = json.dumps({"reveal": r, "speedup": 1.5})
            t_reveal = time.perf_counter()
            store.reveal(code, token, 1, result)
            deadline = t_reveal + 4 * POLL_S
            while time.perf_counter() < deadline and sum(1 for k, res in seen if res == result) < args.students:
                time.sleep(0.05)
            times = [t for (k, res), t in seen.items() if res == result]
            if len(times) < args.students:
                raise SystemExit(f"reveal {r}: only {len(times)} of {args.students} students saw it within {4 * POLL_S} s")
            latencies.append(max(times) - t_reveal)
        stop.set()
        for t in threads:
            t.join(timeout=5)

    report = {
        "students": args.students,
        "poll_s": POLL_S,
        "idle_window_s": args.idle_s,
        "polls_per_s": round(poll_rate, 2),
        "store_idle_cpu_pct_of_one_core": round(own_cpu, 2),
        "server_idle_cpu_pct_of_one_core": None if server_cpu is None else round(server_cpu, 2),
        "reveal_to_last_student_s": {
            "median": round(statistics.median(latencies), 3),
            "max": round(max(latencies), 3),
            "all": [round(x, 3) for x in latencies],
        },
        "goals": {"idle_cpu_pct": 10, "reveal_median_s": 3},
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
