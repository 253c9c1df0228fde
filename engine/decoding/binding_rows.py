"""A batch waits for its slowest row: the goodput policy's acceptance as the row that ends the run sees it.

A batch that decodes together ends when its last row ends. A row that accepts many drafts finishes early and leaves
the batch, but the passes after it cost almost as much without it while the batch is memory-bound, so its extra
tokens save little time. What ends the run sooner is the row that will take the most steps to finish: the binding
row. Goodput's expected tokens per ms (engine/decoding/goodput.py) take the batch's mean acceptance, which is right
when every row accepts alike, or when a finished row's place is taken at once (continuous batching). Rows of
different texts accept very differently: four translation prompts at batch 4 accepted 11/21, 5/26, 1/29 and 1/29 of
single drafts (docs/journal.md, "the row a batch waits for"); the mean said that drafting paid, but the run took 30
steps against plain decoding's 31.

`RowAcceptance` keeps each row's own progress: the drafts it kept per drafting step (a chain's accepted drafts, a
tree's accepted path), as decayed counts (ACCEPT_DECAY) that start from the batch's mean worth ROW_PRIOR
steps. Before a step, `factor` ranks the rows by their expected steps left (remaining tokens over 1 + their kept drafts
per step) and returns the slower half's kept drafts per step over the batch's: the rows the run waits for. Goodput
multiplies the first position's acceptance by it, which scales every term of a chain's expected tokens past the
first, and a tree's expected accepted nodes too. The first position alone was counted before: where some rows copy
(lookups kept four drafts at a time) and the rows the run waits for do not, the deeper positions' acceptance was the
copying rows', and at batch 4 on translation goodput drafted 20 steps of 31 to read 0.88 of plain (docs/journal.md,
"goodput at batch 4: the rows' luck and the run's end"). One row's estimate after a few drafts is noisy, and the single
slowest would read its noise as the run's end (at batch 4 on RAG prompts it stopped drafting that paid): hence the
half.

Rows that keep alike on average still end apart: each step's kept drafts are a draw (0, or 3 where a lookup copies),
and the run waits for the unluckiest row. Over n more drafting steps a row's kept drafts sum to n x its mean, give or
take sqrt(n) x the spread of one row-step's draw, and the last of B rows falls about `last_of`(B) such spreads
behind (1.03 at B = 4). So the binding rows' kept drafts per step lose `last_of`(B) x spread / sqrt(n), n the
binding row's expected steps left: little over a long run, much near a run's end or in a short one, where a few
lucky rows finish early and the passes after them cost almost as much. At batch 1 the factor is 1, and for a
batch whose rows keep alike and steadily it is near 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist

from engine.decoding.goodput_steps import ACCEPT_DECAY

ROW_PRIOR = 6.0  # a row's own estimate starts at the batch's mean, worth this many drafting steps


@dataclass
class RowAcceptance:
    """Per row (its index in the prompt list): [kept drafts, drafting steps], decayed; `total`, [kept, steps, the sum of
    each row-step's kept drafts squared] over all rows, decayed alike."""

    counts: dict[int, list[float]] = field(default_factory=dict)
    total: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])

    def observe(self, drafted: list[tuple[int, int]]) -> None:
        """Count each row that drafted in a step: (row, drafts it kept), engine/decoding/goodput_steps.py's `kept_drafts`."""
        if not drafted:
            return
        for row, n in drafted:
            kept, steps = self.counts.get(row, (0.0, 0.0))
            self.counts[row] = [ACCEPT_DECAY * kept + n, ACCEPT_DECAY * steps + 1.0]
        kept = [n for _, n in drafted]
        self.total = [ACCEPT_DECAY * t + new for t, new in zip(self.total, (sum(kept), len(kept), sum(n * n for n in kept)))]

    def mean(self) -> float:
        """The batch's kept drafts per row per drafting step (0 before any)."""
        return self.total[0] / self.total[1] if self.total[1] else 0.0

    def spread(self) -> float:
        """The standard deviation of one row-step's kept drafts (0 before any)."""
        return math.sqrt(max(0.0, self.total[2] / self.total[1] - self.mean() ** 2)) if self.total[1] else 0.0

    def estimate(self, row: int) -> float:
        """A row's kept drafts per drafting step: its own counts with the batch's mean as ROW_PRIOR steps."""
        kept, steps = self.counts.get(row, (0.0, 0.0))
        return (kept + ROW_PRIOR * self.mean()) / (steps + ROW_PRIOR)

    def factor(self, rows: tuple[int, ...], remaining: tuple[int, ...]) -> float:
        """The binding rows' kept drafts per step over the batch's (see the module docstring): the mean over the half of
        the rows (at least one) with the most expected steps left, each row's remaining tokens over 1 + its kept drafts
        per step, less the luck of the draw, `last_of`(rows) x spread / sqrt(those steps), at least 0. 1 for one row,
        for a batch not described (no rows given) and before any draft was kept."""
        batch = self.mean()
        if len(rows) < 2 or len(rows) != len(remaining) or batch <= 0.0:
            return 1.0
        own = [self.estimate(r) for r in rows]
        steps = [left / (1.0 + a) for a, left in zip(own, remaining)]
        slower = sorted(range(len(rows)), key=steps.__getitem__, reverse=True)[: max(1, len(rows) // 2)]
        luck = last_of(len(rows)) * self.spread() / math.sqrt(max(1.0, steps[slower[0]]))
        return max(0.0, sum(own[i] for i in slower) / len(slower) - luck) / batch


def last_of(rows: int) -> float:
    """The expected largest of `rows` standard normal draws (Blom's approximation): how many standard deviations the
    unluckiest of `rows` rows falls behind the mean (exactly 0.56 for 2, 1.03 for 4, 1.77 for 16; this gives 0.59,
    1.05, 1.77)."""
    return NormalDist().inv_cdf((rows - 0.375) / (rows + 0.25)) if rows > 1 else 0.0
