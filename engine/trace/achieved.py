"""Achieved utilisation of a decode step: modelled work ÷ measured time, as % of the probed peaks.

Two kinds of numbers describe how busy the hardware was, and SpecLab keeps them apart:
- modelled ÷ measured: SpecLab's own FLOP and byte counts of each forward pass (engine/costs.py: the
  weights streamed once per pass plus the KV cache read; 2 FLOPs per weight per token plus attention)
  divided by the passes' measured time (CUDA events on a GPU, perf_counter on a CPU: engine/hardware.py
  StepTimer), as a share of the peaks this machine's probe measured. Not hardware counters: a model of
  the work over a measurement of the time;
- time-sampled gauges: what NVML (GPU utilisation, SM clock, power) or psutil (CPU %) reported every few
  ms while the step ran (engine/hardware.py UtilizationSampler). NVML's "utilisation" is the share of
  time some kernel was running, not how much of the chip it used: a memory-bound decode reads busy
  ~100% while its FLOP/s are a few % of peak, which is the point these numbers make side by side.

Pure functions of a Step-like object (draft_ms, verify_ms, target/draft FLOPs and bytes); no torch, so
the app's views use them too.
"""

from __future__ import annotations

import statistics


def timer_name(device: str) -> str:
    """How a step's pass times were measured on this device type."""
    return "CUDA-event time" if device == "cuda" else "perf_counter time"


def gauge_labels(util_source: str | None) -> dict[str, str]:
    """Names for the time-sampled gauges, saying what each one is."""
    if util_source == "nvml":
        return {
            "util_pct": "NVML GPU util % (time-sampled: share of time a kernel ran)",
            "sm_clock_mhz": "NVML SM clock, MHz (time-sampled)",
            "power_w": "NVML board power, W (time-sampled)",
        }
    return {"util_pct": "psutil CPU % (time-sampled, system-wide)"}


def achieved_pct(work: float, ms: float, peak: float) -> float | None:
    """100 · (work / seconds) / peak; None when the time or the peak is not positive."""
    if not ms > 0 or not peak > 0:
        return None
    return 100.0 * work / (ms / 1000.0) / peak


def pass_achieved(step, peak_bandwidth: float, peak_flops: float) -> dict[str, float | None]:
    """Per pass and for the whole step: % of the probed peak bandwidth and FLOP/s, modelled ÷ measured.

    verify: the target's pass (target bytes/FLOPs ÷ verify_ms); draft: the drafter's passes (÷ draft_ms);
    passes: both together over draft_ms + verify_ms (the time the device spent in the model passes)."""
    passes_ms = step.draft_ms + step.verify_ms
    return {
        "verify_bw_pct": achieved_pct(step.target_bytes, step.verify_ms, peak_bandwidth),
        "verify_flops_pct": achieved_pct(step.target_flops, step.verify_ms, peak_flops),
        "draft_bw_pct": achieved_pct(step.draft_bytes, step.draft_ms, peak_bandwidth) if step.draft_bytes else None,
        "draft_flops_pct": achieved_pct(step.draft_flops, step.draft_ms, peak_flops) if step.draft_flops else None,
        "passes_bw_pct": achieved_pct(step.target_bytes + step.draft_bytes, passes_ms, peak_bandwidth),
        "passes_flops_pct": achieved_pct(step.target_flops + step.draft_flops, passes_ms, peak_flops),
    }


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def utilization_summary(steps, peak_bandwidth: float, peak_flops: float, device: str, util_source: str | None) -> str:
    """One line from the decode steps' medians, e.g. "NVML busy 100% (time-sampled) · bandwidth 38%, FLOP/s 2%
    of the probed peaks (modelled ÷ CUDA-event time) · SM clock 1980 MHz, power 310 W (time-sampled)"."""
    decode = [s for s in steps if s.kind == "decode"]
    if not decode:
        return "no decode steps to summarise"
    rows = [pass_achieved(s, peak_bandwidth, peak_flops) for s in decode]
    bw, fl = _median(r["passes_bw_pct"] for r in rows), _median(r["passes_flops_pct"] for r in rows)
    parts = []
    busy = _median(getattr(s, "util_pct", None) for s in decode)
    if busy is not None:
        parts.append(f"{'NVML' if util_source == 'nvml' else 'psutil'} busy {busy:.0f}% (time-sampled)")
    if bw is not None and fl is not None:
        parts.append(f"bandwidth {bw:.0f}%, FLOP/s {fl:.1f}% of the probed peaks (modelled ÷ {timer_name(device)}, median step)")
    clock = _median(getattr(s, "sm_clock_mhz", None) for s in decode)
    power = _median(getattr(s, "power_w", None) for s in decode)
    sampled = ([f"SM clock {clock:.0f} MHz"] if clock is not None else []) + ([f"power {power:.0f} W"] if power is not None else [])
    if sampled:
        parts.append(", ".join(sampled) + " (time-sampled)")
    return " · ".join(parts)
