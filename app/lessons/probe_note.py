"""Lesson 1's pass against the probed peaks, in words computed from the numbers: why a one-token pass can read more
than "the peak", and a live probe far below the recording's named a disturbed machine.

The quick probe (engine.hardware.probe) measures bandwidth once, at the app's warm-up. Until 2026-12-03 it timed
only a copy and counted 2 bytes per byte copied; a decode pass mostly reads its weights, and on a 2-core EPYC a read
streamed up to 1.28x the copy's counted rate (docs/measurements.md, "why a one-token pass read more than the probed
peak"). The probe now takes the higher of the two. Pure: no streamlit.
"""

from __future__ import annotations

READ_OVER_COPY = 1.28  # the most a read streamed over the copy's counted rate on the 2-core EPYC (docs/measurements.md)
DISTURBED_BELOW = 0.75  # a live probe under 75% of the recording's peak on the same kind of machine: disturbed
DISTURBED = "DISTURBED"


def pass_against_probe(m: dict) -> str:
    """The one-token pass's bandwidth as a share of the probed peak, and, above 100%, why."""
    rows = m.get("rows") or []
    peak = m.get("peak_bandwidth")
    if not rows or not peak:
        return ""
    one = rows[0]
    share = one["achieved_bandwidth"] / peak
    text = (
        f"The {one['tokens_per_pass']}-token pass read {one['achieved_bandwidth'] / 1e9:.1f} GB/s of weights and KV cache, "
        f"{share:.0%} of the {peak / 1e9:.1f} GB/s probed."
    )
    if share <= 1.0:
        return text + " Below 100%: the probe's stream was at least as fast as this pass."
    why = (
        f" Above 100% does not mean the pass beat the memory: the probe ran once, when the app started, and a probe "
        f"made before 2026-12-03 timed only a copy, counted as 2 bytes per byte, while a pass mostly reads; on a 2-core "
        f"EPYC a read streamed up to {READ_OVER_COPY:.2f}× the copy's counted rate (docs/measurements.md), and this pass "
        f"is {share:.2f}× the probe"
    )
    fits = share <= READ_OVER_COPY
    return (
        text
        + why
        + (", inside that gap. " if fits else ", beyond that gap: the probe's moment was slower than the pass's (other load). ")
        + "The probe now times a read as well and takes the higher."
    )


def live_probe_note(m: dict, label: str, recorded: dict | None) -> str | None:
    """For a live run: its probe against the shipped recording's on the same kind of machine; a sentence starting
    with DISTURBED where it fell below DISTURBED_BELOW of it, else None. `recorded` is the lesson's recording (as
    app/common/measurement.py loads it) or None."""
    if not recorded or not str(label).startswith("measured live") or str(recorded.get("machine", "")) not in str(label):
        return None
    rec = recorded.get("measurement") or {}
    pairs = [(m.get(k), rec.get(k)) for k in ("peak_bandwidth", "peak_flops")]
    if not all(now and then for now, then in pairs):
        return None
    (bw, bw_rec), (fl, fl_rec) = pairs
    if min(bw / bw_rec, fl / fl_rec) >= DISTURBED_BELOW:
        return None
    return (
        f"{DISTURBED}: probed now at {bw / 1e9:.1f} GB/s and {fl / 1e9:.0f} GFLOP/s, against {bw_rec / 1e9:.1f} GB/s and "
        f"{fl_rec / 1e9:.0f} GFLOP/s when this lesson was recorded on the same kind of machine ({recorded['machine']}, "
        f"{recorded.get('date', '')}). Other work is slowing this machine, so its live timings, and the ridge drawn from "
        "these peaks, are not its quiet ones: compare the curve's shape, or re-measure when it is quiet."
    )
