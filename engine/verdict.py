"""The one rule that names a winner between two contenders, stated once (pure Python: the bench, the lessons, the
Playground and the Sweep all judge with it).

Every lesson, the Playground's summary and the Sweep judge "A against B" with `judge`:

- The contenders ran in interleaved rounds (A B A B …). Each round gives the ratio A ÷ B of their rates; a drift
  of the machine's speed moves both halves of a round alike, so it cancels in the round's ratio.
- From the rounds' ratios comes a 95% interval for the typical ratio: Student's t on the logarithms of the ratios
  (the geometric mean, with n − 1 degrees of freedom). Rounds that were not paired (different counts) use Welch's
  t on the logarithms of each contender's rates instead.
- A is **faster** only when the interval lies wholly above 1 **and** the typical ratio is at least 1 + MIN_GAP;
  **slower** the mirror image. Otherwise the two are **level** (the whole interval lies within MIN_GAP of 1, or
  the difference is real but smaller than MIN_GAP) or we **can't tell** with this many rounds (the interval
  still reaches both a gap worth naming and no gap at all).

A claim that A is **not slower** than B names no winner: it is shown when the rule finds A faster or level, or when
the 95% range rules out A being more than NOT_WORSE slower (a non-inferiority margin, `not_worse`); a range that
still reaches a larger slowdown shows nothing.

In a student's words (`RULE`): "We name a winner only when, over the interleaved rounds, the 95% range of the
speed ratio stays on one side of 1 and the gap is at least 3%; otherwise the two are level, or the rounds are too
few or too noisy to tell."
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

LEVEL = 0.95  # the interval's confidence
MIN_GAP = 0.03  # a winner must be at least this much faster (3%)
NOT_WORSE = 0.10  # a "not slower" claim: the range must rule out A being more than this much slower (10%)
# Student's t, two-sided 95% (0.975 quantile), by degrees of freedom 1..30; past 30 the normal's 1.96 is within 2%.
_T975 = tuple(
    float(t)
    for t in "12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 2.145 2.131 2.120 2.110 "
    "2.101 2.093 2.086 2.080 2.074 2.069 2.064 2.060 2.056 2.052 2.048 2.045 2.042".split()
)

RULE = (
    f"A winner is named only when, over the interleaved rounds, the {LEVEL:.0%} range of the speed ratio stays on one "
    f"side of 1 and the gap is at least {MIN_GAP:.0%}; otherwise the two are level, or the rounds are too few or too "
    "noisy to tell."
)


NOT_WORSE_RULE = (
    f"A claim that one is not slower names no winner: it is shown when the two are level or the first is faster, or, "
    f"weakly, when the {LEVEL:.0%} range rules out the first being more than {NOT_WORSE:.0%} slower."
)


def t975(df: float) -> float:
    """The two-sided 95% quantile of Student's t with df degrees of freedom (df ≥ 1; a fractional df, as Welch's,
    is interpolated in 1/df between the whole numbers around it, where the quantile is nearly straight)."""
    if df < 1:
        raise ValueError("Student's t needs at least one degree of freedom")

    def whole(d: int) -> float:
        return _T975[d - 1] if d <= len(_T975) else 1.96 + 2.4 / d  # within 0.1% of the quantile past 30

    lo = int(df)
    if lo == df:
        return whole(lo)
    share = (1 / lo - 1 / df) / (1 / lo - 1 / (lo + 1))
    return whole(lo) + (whole(lo + 1) - whole(lo)) * share


@dataclass(frozen=True)
class Verdict:
    """A against B: `ratio` is the typical A ÷ B (geometric mean), `lo`..`hi` its 95% interval (None with one
    round), `rounds` how many rounds (or runs of the smaller side), `sign` +1 A faster, -1 slower, 0 neither."""

    ratio: float
    lo: float | None
    hi: float | None
    rounds: int
    paired: bool
    sign: int
    kind: str  # "faster", "slower", "level", "can't tell"

    @property
    def interval(self) -> str:
        """'1.08× (95% range 1.03–1.13×, 5 rounds)' or '1.08× (one round: no range)'."""
        if self.lo is None:
            return f"{self.ratio:.2f}× (one round: no range)"
        return f"{self.ratio:.2f}× (95% range {span(self.lo, self.hi)}, {self.rounds} rounds)"

    def words(self, a: str = "it", b: str = "the other") -> str:
        """The verdict as a clause: 'faster than plain: 1.08× (95% range 1.03–1.13×, 5 rounds)'."""
        if self.kind == "faster":
            return f"faster than {b}: {self.interval}"
        if self.kind == "slower":
            return f"slower than {b}: {self.interval}"
        if self.kind == "level":
            return f"level with {b}: {self.interval}, within {MIN_GAP:.0%}"
        return f"not told apart from {b} with {self.rounds} round{'s' if self.rounds != 1 else ''} (can't tell): {self.interval}"

    @property
    def word(self) -> str:
        """'faster than' / 'slower than' / 'level with' / "can't be told apart from"."""
        return {"faster": "faster than", "slower": "slower than", "level": "level with"}.get(self.kind, "not told apart from")


def span(lo: float, hi: float) -> str:
    """'1.03–1.13×'; three decimals where a bound rounds to 1.00, so which side of 1 it lies on still shows."""
    digits = 3 if f"{lo:.2f}" == "1.00" or f"{hi:.2f}" == "1.00" else 2
    return f"{lo:.{digits}f}–{hi:.{digits}f}×"


def _classify(ratio: float, lo: float | None, hi: float | None) -> tuple[int, str]:
    if lo is None or hi is None:
        return 0, "can't tell"
    if lo > 1 and ratio >= 1 + MIN_GAP:
        return 1, "faster"
    if hi < 1 and ratio <= 1 / (1 + MIN_GAP):
        return -1, "slower"
    inside = lo >= 1 / (1 + MIN_GAP) and hi <= 1 + MIN_GAP
    real_but_small = lo > 1 or hi < 1  # the interval excludes 1 but the typical gap is under MIN_GAP
    return 0, "level" if inside or real_but_small else "can't tell"


def not_worse(v: Verdict) -> bool:
    """A "not slower" claim on A ÷ B (rates): the rule finds A faster or level, or the 95% range's low end stays within
    NOT_WORSE of 1. One round (no range) shows it only by the rule's own words."""
    return v.kind in ("faster", "level") or (v.lo is not None and v.lo >= 1 / (1 + NOT_WORSE))


def _values(x) -> list[float]:
    """A spread dict ({"values": [...]}) or a plain list of rates, as positive floats."""
    values = x.get("values") if isinstance(x, dict) else x
    if not values:
        raise ValueError("a contender needs at least one measured rate")
    out = [float(v) for v in values]
    if any(not math.isfinite(v) or v <= 0 for v in out):
        raise ValueError("rates must be positive finite numbers")
    return out


def _verdict(mean: float, half: float | None, n: int, paired: bool) -> Verdict:
    """A verdict from the mean log ratio and its interval's half-width (None: one round, no interval)."""
    lo, hi = (None, None) if half is None else (math.exp(mean - half), math.exp(mean + half))
    return Verdict(math.exp(mean), lo, hi, n, paired, *_classify(math.exp(mean), lo, hi))


def judge(a, b) -> Verdict:
    """A against B by the rule above. a, b: each contender's rate in every round (higher is better: tokens/s), as
    lists or measurement spreads. Equal counts are taken as interleaved rounds, paired in order."""
    va, vb = _values(a), _values(b)
    if len(va) == len(vb):
        logs = [math.log(x / y) for x, y in zip(va, vb)]
        n = len(logs)
        half = t975(n - 1) * statistics.stdev(logs) / math.sqrt(n) if n >= 2 else None
        return _verdict(statistics.fmean(logs), half, n, True)
    la, lb = [math.log(v) for v in va], [math.log(v) for v in vb]
    mean, n = statistics.fmean(la) - statistics.fmean(lb), min(len(la), len(lb))
    if n < 2:
        return _verdict(mean, None, n, False)
    sa, sb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    se = math.sqrt(sa + sb)
    df = (sa + sb) ** 2 / ((sa**2 / (len(la) - 1)) + (sb**2 / (len(lb) - 1))) if se > 0 else len(la) + len(lb) - 2
    return _verdict(mean, t975(max(df, 1.0)) * se, n, False)


def sign(a, b) -> int:
    """+1 A faster than B by the rule, -1 slower, 0 neither (level or can't tell); 0 where either side is missing."""
    if not a or not b:
        return 0
    return judge(a, b).sign


def cheaper(a_ms, b_ms) -> Verdict:
    """A against B where lower is better (ms of a pass): judged on the rates 1/ms, so 'faster' means A is cheaper."""
    return judge([1 / v for v in _values(a_ms)], [1 / v for v in _values(b_ms)])


def rounds_needed(gap: float, noise: float, power: float = 0.8, most: int = 40) -> int | None:
    """How many interleaved rounds the rule needs to name a real gap (e.g. 0.10 for 10%) at least `power` of the
    time, where one round's log ratio scatters with standard deviation `noise`: the smallest n whose interval's
    half-width, t(n-1)·noise/√n, leaves the gap's logarithm clear of 0 by a normal margin for the power (a planning
    figure: the rounds' own scatter decides each verdict). None when even `most` rounds would not do."""
    if gap <= MIN_GAP:
        return None
    z = {0.5: 0.0, 0.8: 0.842, 0.9: 1.282, 0.95: 1.645}.get(round(power, 2))
    if z is None:
        raise ValueError("power must be one of 0.5, 0.8, 0.9, 0.95")
    target = math.log(1 + gap)
    for n in range(2, most + 1):
        if (t975(n - 1) + z) * noise / math.sqrt(n) <= target:
            return n
    return None
