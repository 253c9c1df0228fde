"""The room and the knee of a measured pass-cost curve: how many tokens a pass carries nearly free, and where it
stops being free.

A pass's time against its tokens is flat while the pass is memory- or overhead-bound and rises once it is
compute-bound (engine/decoding/passcurve.py measures it). Two numbers read that curve the same way everywhere:

- the room: the most tokens per pass whose time stays within ROOM (1.25×) of the curve's first pass (at batch B,
  B tokens: one per row), read between the measured sizes where the curve crosses that line and rounded down. Draft
  tokens inside the room cost little; past it each one costs real time.
- the knee: the tokens per pass where the curve first reaches KNEE (1.5×) of that first pass, on the straight line
  between the two measured sizes around it; None where the curve never reaches it (the knee lies past it).

At a long context every row's KV cache is read once per pass whatever its tokens, so a (batch, context) curve's
first pass is dearer and its room wider (engine/decoding/context_curves.py measures one per (batch, context)).
Pure numbers: no model, no torch. The lessons' kit (app/lessons/kit/numbers.py) reads curves with these.
"""

from __future__ import annotations

ROOM = 1.25  # a pass within this factor of the curve's first pass is "inside the room" (nearly free)
KNEE = 1.5  # the knee: where a pass costs this many times the curve's first pass


def _check(tokens, ms) -> None:
    if not tokens or len(tokens) != len(ms) or ms[0] <= 0:
        raise ValueError("a pass curve needs as many times as token counts, the first one positive")


def room_tokens(tokens, ms, factor: float = ROOM) -> int:
    """The most tokens per pass whose cost stays within `factor` × the first pass (at least 1): where the curve first
    crosses that line, read on the straight line between the two measured sizes around it (as the knee is) and
    rounded down, or the last size where it never does. Reads the curve from its smallest point on and stops at the
    first crossing, so a later dip (a kernel that happens to suit one size) does not widen the room; reading between
    the sizes keeps a room near a measured size from jumping to the size below it with the noise."""
    _check(tokens, ms)
    line = factor * ms[0]
    for (t0, m0), (t1, m1) in zip(zip(tokens, ms), zip(tokens[1:], ms[1:])):
        if m1 > line:
            return max(int(t0 + (t1 - t0) * (line - m0) / (m1 - m0)) if m1 > m0 else int(t0), 1)
    return max(int(tokens[-1]), 1)


def knee_tokens(tokens, ms, factor: float = KNEE) -> float | None:
    """Tokens per pass where the measured curve first reaches `factor` × its first pass, on the straight line between
    the two measured sizes around it; None where it never does within the curve."""
    _check(tokens, ms)
    base = ms[0]
    for (t0, m0), (t1, m1) in zip(zip(tokens, ms), zip(tokens[1:], ms[1:])):
        if m1 >= factor * base:
            return float(t1) if m0 >= factor * base or m1 == m0 else t0 + (t1 - t0) * (factor * base - m0) / (m1 - m0)
    return None
