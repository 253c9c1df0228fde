"""What the machine was doing while a lane decoded: this process's CPU time, other processes' CPU time, load.

Wall time alone cannot tell a slow lane from a lane that shared the machine. Over the same timed windows
as the run's clock (the consumer's pauses between steps are off it), `LoadMeter` adds up
- `cpu_s`: CPU seconds of this process, all threads (time.process_time; on a server that includes other
  sessions' threads, which the app keeps off the model with its run lock);
- `other_cpu_s`: CPU seconds every other process used meanwhile: the machine's busy time
  (psutil.cpu_times, all CPUs, idle and iowait excluded) minus `cpu_s`; None without psutil;
and records the 1-minute load average (os.getloadavg) and the CPU count when the lane ends. The
summary carries them as optional fields (engine/trace/); app/views/fairness.py compares two lanes.
"""

from __future__ import annotations

import os
import time


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
