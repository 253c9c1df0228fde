"""A batch waits for its slowest row: the goodput policy's acceptance as the row that ends the run sees it.

A batch that decodes together ends when its last row ends. A row that accepts many drafts finishes early and leaves
the batch, but the passes after it cost almost as much without it while the batch is memory-bound, so its extra
tokens save little time. What ends the run sooner is the row that will take the most steps to finish: the binding
row. Goodput's expected tokens per ms (engine/decoding/goodput.py) take the batch's mean acceptance, which is right
when every row accepts alike, or when a finished row's place is taken at once (continuous batching). Rows of
different texts accept very differently: four translation prompts at batch 4 accepted 11/21, 5/26, 1/29 and 1/29 of
single drafts (docs/journal.md, "the row a batch waits for"); the mean said that drafting paid, but the run took 30
steps against plain decoding's 31.

`RowAcceptance` keeps each row's own acceptance at the first draft position (a chain's first draft, a tree's best
first-level child): decayed counts as the batch's (ACCEPT_DECAY), starting from the batch's estimate worth ROW_PRIOR
observations. Before a step, `factor` ranks the rows by their expected steps left (remaining tokens over expected
tokens per step) and returns the mean first-position acceptance of the slower half over the batch's: the rows the run
waits for. One row's estimate after a few drafts is noisy, and the single slowest would read its noise as the run's
end (at batch 4 on RAG prompts it stopped drafting that paid). Goodput multiplies the first position's acceptance
(every deeper draft depends on it) and a tree's expected accepted nodes by that factor. At batch 1 it is 1, and it is
1 for a batch whose rows accept alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.decoding.chain_value import expected_tokens
from engine.decoding.goodput_steps import ACCEPT_DECAY

ROW_PRIOR = 6.0  # a row's own estimate starts at the batch's, worth this many observations


@dataclass
class RowAcceptance:
    """Per row (its index in the prompt list): [kept, reached] at the first draft position, decayed."""

    counts: dict[int, list[float]] = field(default_factory=dict)

    def observe(self, drafts) -> None:
        """Count each row that drafted in a step at the first position: `drafts`, the step's
        engine/decoding/goodput_steps.py `first_drafts` (a tree's first position: its best first-level child)."""
        for row, hits in drafts:
            kept, reached = self.counts.setdefault(row, [0.0, 0.0])
            self.counts[row] = [ACCEPT_DECAY * kept + hits[0], ACCEPT_DECAY * reached + 1.0]

    def estimate(self, row: int, batch_first: float) -> float:
        """A row's first-position acceptance: its own counts with the batch's estimate as ROW_PRIOR observations."""
        kept, reached = self.counts.get(row, (0.0, 0.0))
        return (kept + ROW_PRIOR * batch_first) / (reached + ROW_PRIOR)

    def factor(self, rows: tuple[int, ...], remaining: tuple[int, ...], accept: list[float]) -> float:
        """The binding rows' first-position acceptance over the batch's (`accept`, per position): the mean over the half
        of the rows (at least one) with the most expected steps left, each row's remaining tokens over its expected
        tokens per step at the deepest chain. 1 for one row, for a batch not described (no rows given) and for a batch
        estimate of 0."""
        batch_first = accept[0] if accept else 0.0
        if len(rows) < 2 or len(rows) != len(remaining) or batch_first <= 0.0:
            return 1.0
        own = [self.estimate(r, batch_first) for r in rows]
        steps = [left / expected_tokens([a, *accept[1:]], len(accept)) for a, left in zip(own, remaining)]
        slower = sorted(range(len(rows)), key=steps.__getitem__, reverse=True)[: max(1, len(rows) // 2)]
        return sum(own[i] for i in slower) / len(slower) / batch_first
