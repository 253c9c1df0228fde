"""Did the two lanes run under the same load? From the optional load fields each trace's summary carries.

engine/loadmeter.py records, over each lane's timed windows, this process's CPU seconds (`cpu_s`), the
CPU seconds every other process used meanwhile (`other_cpu_s`), the 1-minute load average and the CPU
count. A speedup divides two wall times, so it is only a clean comparison when both lanes saw the same
machine: `contention_note` says so when other work kept noticeably more cores busy during one lane than
during the other (DIFFERENT_CORES, in mean cores). Traces recorded before these fields existed give no
note. Pure functions, no streamlit.
"""

from __future__ import annotations

import math

DIFFERENT_CORES = 0.3  # mean cores of other work: a gap this large between the lanes is flagged
BUSY_CORES = 0.5  # both lanes above this: the machine was shared throughout (tokens/s read low, the ratio holds better)
RERUN = "measured while other work was running: re-run for a clean comparison"


def _num(value) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    return float(value) if ok else None


def other_cores(summary: dict) -> float | None:
    """Mean CPU cores other processes kept busy while this lane decoded (None: not recorded)."""
    other, wall = _num(summary.get("other_cpu_s")), _num(summary.get("wall_s"))
    return None if other is None or not wall else other / wall


def own_cores(summary: dict) -> float | None:
    """Mean CPU cores this process used while the lane decoded (None: not recorded)."""
    cpu, wall = _num(summary.get("cpu_s")), _num(summary.get("wall_s"))
    return None if cpu is None or not wall else cpu / wall


def contention_note(ar_summary: dict, spec_summary: dict) -> str | None:
    """A warning when the lanes ran under different contention, a milder note when both shared the machine,
    else None (also None for traces without the load fields)."""
    a, b = other_cores(ar_summary), other_cores(spec_summary)
    if a is None or b is None:
        return None
    cpus = ar_summary.get("cpus") or spec_summary.get("cpus")
    of = f" of {cpus}" if isinstance(cpus, int) and not isinstance(cpus, bool) else ""
    lanes = f"other processes kept {a:.1f} cores{of} busy during the AR lane and {b:.1f} during the speculative lane"
    if abs(a - b) >= DIFFERENT_CORES:
        return f"These timings were {RERUN}: {lanes}, so the lanes ran under different load and the speedup is not a fair one."
    if min(a, b) >= BUSY_CORES:
        return (
            f"Both lanes shared the machine with other work ({lanes}): tokens/s read lower than on a quiet "
            "machine; the load was similar, so the speedup is fairer than the rates."
        )
    return None


def load_line(ar_summary: dict, spec_summary: dict) -> str | None:
    """'Load while decoding: AR 1.9 cores of this process, 0.1 of others (load average 1.2); speculative …'."""
    parts = []
    for name, summary in (("AR", ar_summary), ("speculative", spec_summary)):
        own, other = own_cores(summary), other_cores(summary)
        if own is None or other is None:
            return None
        load = _num(summary.get("load_avg"))
        parts.append(
            f"{name} {own:.1f} cores of this process, {other:.1f} of others" + (f" (load average {load:.1f})" if load is not None else "")
        )
    return "Load while decoding: " + "; ".join(parts) + "."


def cell_contention(row: dict) -> str | None:
    """A Sweep cell (an engine.bench row) whose two lanes ran under different contention: a short reason,
    e.g. 'others kept 0.1 cores busy during AR, 1.2 during speculative'; None when alike or not recorded."""
    a, b = _num(row.get("ar_other_cores")), _num(row.get("spec_other_cores"))
    if a is None or b is None or abs(a - b) < DIFFERENT_CORES:
        return None
    return f"others kept {a:.1f} cores busy during AR, {b:.1f} during speculative"


def grid_contention_note(rows: list[dict]) -> str | None:
    """One line for a measured grid: how many cells ran their lanes under different load (None: none, or the
    rows predate the load fields)."""
    flagged = [r for r in rows if cell_contention(r)]
    if not flagged:
        return None
    worst = max(flagged, key=lambda r: abs(r["ar_other_cores"] - r["spec_other_cores"]))
    n = len(flagged)
    return (
        f"{n} of {len(rows)} cells were {RERUN} (their lanes saw different load, marked ⚠ in the table; the worst: "
        f"batch {worst['batch']}, depth {worst['depth']}, {cell_contention(worst)})."
    )
