"""Where a student's Reveal time goes (issue 41): the tracing that `scripts/class_load.py --trace DIR` adds.

Server side: run as `python scripts/investigate/reveal_trace.py run app/main.py ...` (instead of `python -m streamlit`),
this module patches Streamlit's ScriptRunner and AppSession before the server starts and writes one JSON line per
script run to $SPECLAB_RUN_TRACE: the session, when its rerun request arrived, when the run started and ended (epoch
seconds), the run's thread CPU, whether it was a fragment run, and each ForwardMsg it sent (time, kind, bytes).

Browser side (`PAGE_INIT`, an init script in each student's context): every WebSocket message a page sends or receives
(epoch ms, bytes), the DOM nodes added and removed, and whether the page's element containers survive a Reveal
(`ARM` tags them, `COLLECT` reads back). Each page's main-thread time comes from Chrome's own counters
(CDP Performance.getMetrics: TaskDuration, ScriptDuration, LayoutDuration, RecalcStyleDuration), read before and after.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time

PAGE_INIT = """(() => {
  window.__ws = []; window.__adds = 0; window.__removes = 0;
  const Orig = window.WebSocket;
  class Traced extends Orig {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (e) => window.__ws.push(["r", Date.now(), e.data.byteLength ?? e.data.size ?? 0]));
    }
    send(data) { window.__ws.push(["s", Date.now(), data.byteLength ?? data.length ?? 0]); return super.send(data); }
  }
  window.WebSocket = Traced;
  const start = () => new MutationObserver((records) => {
    for (const r of records) { window.__adds += r.addedNodes.length; window.__removes += r.removedNodes.length; }
  }).observe(document.body, {childList: true, subtree: true});
  if (document.body) start(); else document.addEventListener("DOMContentLoaded", start);
})()"""

# Before a Reveal: forget what came before, tag every element container now on the page.
ARM = """() => { window.__ws = []; window.__adds = 0; window.__removes = 0; performance.clearResourceTimings();
  window.__tagged = Array.from(document.querySelectorAll('[data-testid="stElementContainer"]')); }"""
# After it: the messages, the mutation counts, how many tagged containers are still in the page, the beacon fetches.
COLLECT = """() => ({ws: window.__ws, adds: window.__adds, removes: window.__removes,
  tagged: window.__tagged.length, kept: window.__tagged.filter((n) => n.isConnected).length,
  containers: document.querySelectorAll('[data-testid="stElementContainer"]').length,
  fetches: performance.getEntriesByType("resource").filter((e) => e.name.includes("/static/classes/"))
    .map((e) => [performance.timeOrigin + e.startTime, performance.timeOrigin + e.responseEnd])})"""
METRICS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")


def process_cpu(server_pid: int) -> dict:
    """CPU seconds so far by kind of process on this machine: the server, Chromium's renderers (one per page), Chromium's
    other processes, the Playwright driver (node), this harness, everything else (/proc; a process's own time only)."""
    out: dict[str, float] = {}
    ticks = os.sysconf("SC_CLK_TCK")
    for stat in os.scandir("/proc"):
        if not stat.name.isdigit():
            continue
        try:
            with open(f"/proc/{stat.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{stat.name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        pid = int(stat.name)
        if pid == server_pid:
            kind = "server"
        elif pid == os.getpid():
            kind = "harness"
        elif "chromium" in cmd and "--type=renderer" in cmd:
            kind = "chromium_renderers"
        elif "chromium" in cmd:
            kind = "chromium_other"
        elif "playwright" in cmd and "node" in cmd:
            kind = "playwright_driver"
        else:
            kind = "other"
        out[kind] = out.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return out


def open_metrics(page):
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    return cdp


def metrics(cdp) -> dict:
    got = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return {name: got.get(name, 0.0) for name in METRICS}


def page_breakdown(t0_ms: float, shown_s: float | None, got: dict, before: dict, after: dict) -> dict:
    """One page's Reveal: when it asked for the run (its first send after t0), got the run's first and last message
    before it showed the result, and showed it (seconds after the click); its main thread's time over the reveal."""
    sends = [t for kind, t, _ in got["ws"] if kind == "s" and t >= t0_ms]
    asked = sends[0] if sends else None
    shown_ms = t0_ms + 1000 * shown_s if shown_s is not None else None
    recv = [(t, n) for kind, t, n in got["ws"] if kind == "r" and asked is not None and t >= asked]
    upto = [(t, n) for t, n in recv if shown_ms is None or t <= shown_ms + 1]
    saw = [end for start, end in got["fetches"] if asked is not None and end <= asked + 1]

    def s(x):
        return None if x is None else round((x - t0_ms) / 1000, 3)

    return {
        "fetch_saw_change_s": s(saw[-1]) if saw else None,
        "asked_s": s(asked),
        "first_msg_s": s(upto[0][0]) if upto else None,
        "last_msg_before_shown_s": s(upto[-1][0]) if upto else None,
        "shown_s": shown_s,
        "msgs_received": len(recv),
        "bytes_received": sum(n for _, n in recv),
        "dom_added": got["adds"],
        "dom_removed": got["removes"],
        "containers_kept": f"{got['kept']}/{got['tagged']} (now {got['containers']})",
        **{f"main_thread_{k}_s": round(after[k] - before[k], 3) for k in METRICS},
    }


def server_runs(path: str, t0: float, t1: float) -> list[dict]:
    runs = []
    with open(path) as f:
        for line in f:
            run = json.loads(line)
            if "start" in run and t0 <= run["start"] <= t1:
                runs.append(run)
    return sorted(runs, key=lambda r: r["start"])


def published(path: str, t0: float, t1: float) -> list[float]:
    """Seconds after the click at which the class's file got a new number (the store's beacon publish)."""
    with open(path) as f:
        return [round(r["published"] - t0, 3) for r in map(json.loads, f) if "published" in r and t0 <= r["published"] <= t1]


def summary(pages: list[dict], runs: list[dict], t0: float) -> dict:
    """Medians and extremes over the pages, and the server's runs after the click: how many, their wall and CPU, and
    how much they overlapped (Streamlit runs each session's script in its own thread: concurrent, under one GIL)."""

    def col(key):
        return [p[key] for p in pages if p.get(key) is not None]

    def stats(xs):
        return {"min": round(min(xs), 3), "median": round(statistics.median(xs), 3), "max": round(max(xs), 3)} if xs else None

    gaps = {
        "click_to_fetch_saw_change": col("fetch_saw_change_s"),
        "click_to_asked": col("asked_s"),
        "asked_to_first_msg": [p["first_msg_s"] - p["asked_s"] for p in pages if p["first_msg_s"] is not None and p["asked_s"] is not None],
        "first_to_last_msg": [p["last_msg_before_shown_s"] - p["first_msg_s"] for p in pages if p["first_msg_s"] is not None],
        "last_msg_to_shown": [
            p["shown_s"] - p["last_msg_before_shown_s"]
            for p in pages
            if p["last_msg_before_shown_s"] is not None and p["shown_s"] is not None
        ],
        "shown": col("shown_s"),
    }
    out = {f"{k}_s": stats(v) for k, v in gaps.items()}
    for k in METRICS + ("msgs_received", "bytes_received", "dom_added", "dom_removed"):
        name = f"main_thread_{k}_s" if k in METRICS else k
        out[name] = stats(col(name))
    out["main_thread_TaskDuration_sum_s"] = round(sum(col("main_thread_TaskDuration_s")), 3)
    frag = [r for r in runs if r["fragment"]]
    whole = [r for r in runs if not r["fragment"]]
    out["server_runs"] = {
        "fragment_runs": len(frag),
        "page_runs": len(whole),
        "first_start_s": round(runs[0]["start"] - t0, 3) if runs else None,
        "last_end_s": round(max(r["end"] for r in runs) - t0, 3) if runs else None,
        "fragment_wall_ms": stats([1000 * (r["end"] - r["start"]) for r in frag]),
        "fragment_cpu_ms": stats([1000 * r["cpu"] for r in frag]),
        "fragment_queue_ms": stats([1000 * (r["start"] - r["asked"]) for r in frag if r.get("asked")]),
        "fragment_msgs": stats([len(r["msgs"]) for r in frag]),
        "fragment_bytes": stats([sum(m[2] for m in r["msgs"]) for r in frag]),
        "fragment_msg_kinds": sorted({m[1] for r in frag for m in r["msgs"]}),
        "page_runs_wall_cpu_ms": [[round(1000 * (r["end"] - r["start"])), round(1000 * r["cpu"])] for r in whole],
        "max_concurrent_runs": max_overlap(runs),
        "sum_cpu_s": round(sum(r["cpu"] for r in runs), 3),
    }
    return out


def max_overlap(runs: list[dict]) -> int:
    events = sorted([(r["start"], 1) for r in runs] + [(r["end"], -1) for r in runs])
    best = now = 0
    for _, d in events:
        now += d
        best = max(best, now)
    return best


def install(trace_path: str) -> None:
    """Patch Streamlit (before its server starts) to write one JSON line per script run to `trace_path`."""
    from streamlit.runtime import app_session
    from streamlit.runtime.scriptrunner import script_runner as sr

    out = open(trace_path, "a", buffering=1)  # noqa: SIM115 - open for the server's whole life
    lock = threading.Lock()
    asked: dict[str, float] = {}
    run_script, enqueue, handle = sr.ScriptRunner._run_script, sr.ScriptRunner._enqueue_forward_msg, app_session.AppSession.handle_backmsg

    def traced_handle(self, msg):
        if msg.WhichOneof("type") == "rerun_script":
            asked[self.id] = time.time()
        return handle(self, msg)

    def traced_run(self, rerun_data):
        self._trace_msgs = []
        start, cpu = time.time(), time.thread_time()
        try:
            return run_script(self, rerun_data)
        finally:
            rec = {
                "session": self._session_id[:8],
                "asked": asked.pop(self._session_id, None),
                "start": start,
                "end": time.time(),
                "cpu": time.thread_time() - cpu,
                "fragment": bool(rerun_data.fragment_id_queue),
                "msgs": self._trace_msgs,
            }
            with lock:
                out.write(json.dumps(rec) + "\n")

    def traced_enqueue(self, msg):
        if (msgs := getattr(self, "_trace_msgs", None)) is not None:
            kind = msg.WhichOneof("type")
            if kind == "delta":
                kind = msg.delta.WhichOneof("type")
                if kind == "new_element":
                    kind = msg.delta.new_element.WhichOneof("type")
            msgs.append((round(time.time(), 4), kind, msg.ByteSize()))
        return enqueue(self, msg)

    from app.classroom.beacon import ClassBeacons

    publish = ClassBeacons.publish

    def traced_publish(self, code, version):
        publish(self, code, version)
        with lock:
            out.write(json.dumps({"published": time.time(), "version": version}) + "\n")

    ClassBeacons.publish = traced_publish
    app_session.AppSession.handle_backmsg = traced_handle
    sr.ScriptRunner._run_script = traced_run
    sr.ScriptRunner._enqueue_forward_msg = traced_enqueue


if __name__ == "__main__":
    # scripts/class_load.py puts this checkout first on PYTHONPATH (as `python -m streamlit` from its root has it).
    install(os.environ["SPECLAB_RUN_TRACE"])
    from streamlit.web import cli

    sys.argv = ["streamlit", *sys.argv[1:]]
    sys.exit(cli.main())
