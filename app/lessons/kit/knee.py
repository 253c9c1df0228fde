"""One room and one knee for every lesson, read off this machine's pass curve: the room is the most tokens a pass
carries within ROOM (1.25×) of a one-token pass, the knee where the curve reaches KNEE (1.5×); lessons choose their
depths and batches from the room. No streamlit.
"""

from __future__ import annotations

ROOM = 1.25  # a pass within this factor of a one-token pass is "inside the room" (nearly free)


MOST_DEPTH = 3  # a chosen depth stops here: deeper drafts are accepted too rarely to pay for drafting them (with


# α ≈ 0.5, the EAGLE head's on held-out prompts, a chain's 4th draft survives with chance α^4 ≈ 6%), and a room that
# reads 4 tokens in one recording and 8 in the next (8 tokens cost 1.22-1.27x one on the 2-core EPYC) gives the same k
PAST = 4.0  # "past the knee": a pass carrying at least this many times the room's tokens


KNEE = 1.5  # the knee: where a pass costs this many times a one-token pass


def room_tokens(tokens, ms) -> int:
    """The most tokens per pass whose measured pass cost stays within ROOM× the one-token pass (at least 1).
    Reads the curve from its smallest point on and stops at the first point over the line, so a later dip (a
    kernel that happens to suit one size) does not widen the room."""
    if not tokens or len(tokens) != len(ms) or ms[0] <= 0:
        raise ValueError("a pass curve needs as many times as token counts, the first one positive")
    room = int(tokens[0])
    for t, m in zip(tokens, ms):
        if m > ROOM * ms[0]:
            break
        room = int(t)
    return max(room, 1)


def knee_tokens(tokens, ms, factor: float = KNEE) -> float | None:
    """Tokens per pass where the measured curve first reaches `factor` × its one-token pass, on the straight line
    between the two measured sizes around it; None where it never does within the curve (the knee lies past it)."""
    if not tokens or len(tokens) != len(ms) or ms[0] <= 0:
        raise ValueError("a pass curve needs as many times as token counts, the first one positive")
    base = ms[0]
    for (t0, m0), (t1, m1) in zip(zip(tokens, ms), zip(tokens[1:], ms[1:])):
        if m1 >= factor * base:
            return float(t1) if m0 >= factor * base or m1 == m0 else t0 + (t1 - t0) * (factor * base - m0) / (m1 - m0)
    return None


def cost_at(tokens, ms, n: float) -> float:
    """The curve's cost of an n-token pass as a multiple of its one-token pass (linear between measured points,
    the last point's slope past the end)."""
    xs, ys = list(tokens), list(ms)
    if n <= xs[0]:
        return 1.0
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if n <= x1:
            return (y0 + (y1 - y0) * (n - x0) / (x1 - x0)) / ys[0]
    slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    return (ys[-1] + slope * (n - xs[-1])) / ys[0]


def inside_depth(room: int, batch: int = 1, most: int = 8) -> int:
    """The deepest draft (1..most) whose verify pass, batch × (k + 1) tokens, fits inside the room; 1 where even
    k = 1 does not fit (the page then says so)."""
    return max(1, min(most, room // max(batch, 1) - 1))


def past_batch(room: int, depth: int, options, factor: float = PAST) -> int:
    """The smallest batch among `options` whose verify pass, batch × (depth + 1) tokens, carries at least `factor`×
    (PAST×) the room; the largest option where none does."""
    ordered = sorted(int(b) for b in options)
    return next((b for b in ordered if b * (depth + 1) >= factor * room), ordered[-1])


def room_words(room: int, tokens, ms) -> str:
    """One sentence computed from the curve: how much room this machine has and what a pass past it costs."""
    past = int(PAST * room)
    return (
        f"On this machine a pass stays within {ROOM:.2f}× a one-token pass up to {room} token{'s' if room != 1 else ''} "
        f"(the room); a {past}-token pass costs {cost_at(tokens, ms, past):.2f}×."
    )


SAME_TIME = 1.10  # two passes within this factor of each other took "about the same time"
