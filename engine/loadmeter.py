"""What the machine was doing while a lane decoded: this process's CPU time, other processes' CPU time, load.

Wall time alone cannot tell a slow lane from a lane that shared the machine. Over the same timed windows
as the run's clock (the consumer's pauses between steps are off it), `LoadMeter` adds up
- `cpu_s`: CPU seconds of this process, all threads (time.process_time; on a server that includes other
  sessions' threads, which the app keeps off the model with its run lock);
- `other_cpu_s`: CPU seconds every other process used meanwhile: the machine's busy time
  (psutil.cpu_times, all CPUs, idle and iowait excluded) minus `cpu_s`; None without psutil;
and records the 1-minute load average (os.getloadavg) and the CPU count when the lane ends. The
summary carries them as optional fields (engine/trace/); app/views/fairness.py compares two lanes.

Before a run, `run_threads` leaves out the CPUs other work keeps busy (`others_running`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def _busy_s() -> float | None:
    """Seconds all CPUs of the machine have been busy since boot (None without psutil)."""
    try:
        import psutil
    except ImportError:
        return None
    t = psutil.cpu_times()
    return sum(getattr(t, name, 0.0) for name in t._fields if name not in ("idle", "iowait", "guest", "guest_nice"))


class LoadMeter:
    """resume() ... pause() around every timed window; fields() once the lane is done."""

    def __init__(self):
        self.cpu_s = 0.0
        self.busy_s: float | None = 0.0
        self._cpu0: float | None = None
        self._busy0: float | None = None

    def resume(self) -> None:
        self._cpu0, self._busy0 = time.process_time(), _busy_s()

    def pause(self) -> None:
        if self._cpu0 is None:
            return
        self.cpu_s += time.process_time() - self._cpu0
        busy = _busy_s()
        if self.busy_s is None or busy is None or self._busy0 is None:
            self.busy_s = None
        else:
            self.busy_s += busy - self._busy0
        self._cpu0 = self._busy0 = None

    def fields(self) -> dict:
        """The summary's optional fields: cpu_s, other_cpu_s, load_avg (1 minute), cpus."""
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # not on every platform
            load = None
        other = None if self.busy_s is None else max(0.0, self.busy_s - self.cpu_s)
        return {"cpu_s": self.cpu_s, "other_cpu_s": other, "load_avg": load, "cpus": os.cpu_count()}


LOADAVG = Path("/proc/loadavg")


def others_running(samples: int = 5, gap_s: float = 0.001, loadavg: Path = LOADAVG) -> int:
    """Threads other than this reader that want a CPU now: /proc/loadavg's count of runnable threads less one, the
    smallest of a few reads `gap_s` apart (a pool thread still spinning after the last op shows in one read, a busy
    process in all of them). 0 where the OS cannot say."""
    seen = []
    for i in range(samples):
        try:
            running = int(loadavg.read_text().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return 0
        seen.append(max(0, running - 1))
        if i + 1 < samples:
            time.sleep(gap_s)
    return min(seen)


def run_threads(budget: int | None = None) -> int:
    """The threads a CPU run uses: the budget (`thread_budget`) less the CPUs other work keeps busy when it starts,
    at least 1. A thread team larger than the free CPUs waits at every barrier for a thread the OS has descheduled:
    on two cores beside one busy process, two threads decoded at 2-8 tokens/s where one thread decoded at 47
    (docs/journal.md, "a thread team beside a busy process")."""
    if budget is None:
        from engine.hardware import thread_budget

        budget = thread_budget().threads
    return max(1, budget - others_running())
