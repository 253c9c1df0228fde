"""A run's decode steps re-timed with recorded pass costs: "what would these same steps have cost on that GPU?".

The run is given as a histogram of pass shapes, `[tokens_per_pass, depth, steps]` triples over its decode steps
(depth = draft tokens per row that step, 0 for a plain step; a tree step's tokens count its nodes). Each step is
priced at the recorded time of one pass carrying that many tokens, read off a recorded curve (ms per pass against
tokens per pass, e.g. SpecLab's H200 CUDA-graph passes, engine/roofline/recordings.py) by a straight line between the
two recorded pass sizes on either side. Nothing is extrapolated: a pass smaller or larger than every recorded one is
refused (counted in `Retimed.outside`, and the run gets no re-timed rate).

Drafting is priced where it can be (`DraftPrices`, by batch): from a recording of that drafter's own time on that
machine (`recorded_draft_prices`: the bench's `draft_ms_per_forward`, per drafted position), or from the roofline
predictor for the drafter's own shape (`predicted_draft_prices`: one draft pass per drafted position, a MODEL, flagged
`measured=False`). Where no price is given it is left out and the result says so (`Retimed.draft_priced` False): then
the re-timed time is the target's passes alone, a lower bound on the run's time on that GPU (a ceiling on its rate).

What this is and is not: the same steps (the same tokens per pass, the same accepted tokens per step) on another
machine's measured pass costs. Not a run on that machine: its acceptance is this run's, and whatever the recording
did not include (KV-cache reads where it was recorded with no context, the engine's bookkeeping) is not in it.
Pure numbers; no torch.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass
from pathlib import Path

from engine.checks import Checker
from engine.costs import ModelCosts
from engine.roofline.predictor import Roof, pass_ms
from engine.roofline.recordings import MAX_FILE_BYTES, MAX_ROWS, ROOT, RecordingError

BENCH = "docs/measurements/h200-gpu_bench.json"  # its grids time the n-gram drafter on the H200 machine


@dataclass(frozen=True)
class PassPrices:
    """A recorded pass-cost curve: ms of one pass at each recorded tokens-per-pass count (increasing)."""

    tokens: tuple[int, ...]
    ms: tuple[float, ...]
    label: str  # the machine, date, shape, mode and file it was recorded in

    def __post_init__(self):
        if not self.tokens or len(self.tokens) != len(self.ms):
            raise ValueError("a pass-cost curve needs one time per tokens-per-pass count, at least one")
        if list(self.tokens) != sorted(set(self.tokens)) or self.tokens[0] < 1 or min(self.ms) <= 0:
            raise ValueError("tokens per pass must increase from 1 or more, and every time must be positive")

    def price(self, tokens: float) -> float | None:
        """ms of one pass carrying `tokens`: recorded, or on the straight line between the recorded neighbours;
        None outside the recorded range (never extrapolated)."""
        if tokens < self.tokens[0] or tokens > self.tokens[-1]:
            return None
        i = bisect.bisect_left(self.tokens, tokens)
        if self.tokens[i] == tokens:
            return self.ms[i]
        t0, t1, m0, m1 = self.tokens[i - 1], self.tokens[i], self.ms[i - 1], self.ms[i]
        return m0 + (m1 - m0) * (tokens - t0) / (t1 - t0)


@dataclass(frozen=True)
class DraftPrices:
    """A drafter's time by batch (the nearest priced batch is used): per speculative step, or with `per_position`
    per drafted position (a step at depth k costs k of them); `measured` False where the times are a model's."""

    batches: tuple[int, ...]
    ms: tuple[float, ...]
    label: str
    per_position: bool = False
    measured: bool = True

    def price(self, batch: int) -> float:
        i = min(range(len(self.batches)), key=lambda j: (abs(self.batches[j] - batch), self.batches[j]))
        return self.ms[i]

    def step_ms(self, rows: int, depth: int) -> float:
        """The drafting time of one step of `rows` rows drafting `depth` positions each."""
        return self.price(rows) * (depth if self.per_position else 1)


@dataclass(frozen=True)
class Retimed:
    steps: int  # decode steps re-timed
    decode_tokens: int
    target_ms: float  # the recorded passes' time over those steps
    draft_ms: float  # the recorded drafting time (0.0 where not priced)
    draft_priced: bool  # False: drafting is not in the time (no recording of this drafter)
    outside: int  # steps whose pass size lies outside the recorded range (not priced: no rate then)
    largest: int  # the largest tokens per pass among the steps
    drafted_steps: int = 0  # steps that drafted (depth > 0)

    @property
    def seconds(self) -> float:
        return (self.target_ms + self.draft_ms) / 1000.0

    @property
    def tokens_per_s(self) -> float | None:
        """Decode tokens per second on the recorded passes; None where a step could not be priced."""
        if self.outside or not self.steps or self.seconds <= 0:
            return None
        return self.decode_tokens / self.seconds


def check_passes(passes) -> list[tuple[int, int, int]]:
    """The histogram as (tokens_per_pass, depth, steps) integer triples; ValueError on anything else."""
    out = []
    for entry in passes:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise ValueError(f"each pass shape is [tokens_per_pass, depth, steps]; got {entry!r}")
        tokens, depth, steps = (int(x) for x in entry)
        if tokens < 1 or depth < 0 or steps < 0:
            raise ValueError(f"a pass shape needs tokens_per_pass >= 1, depth >= 0 and steps >= 0; got {entry!r}")
        out.append((tokens, depth, steps))
    return out


def rows_of(tokens: int, depth: int) -> int:
    """Rows in a chain step of `tokens` tokens at `depth` (each row carries depth + 1), at least 1."""
    return max(1, tokens // (depth + 1))


def retime(passes, decode_tokens: int, prices: PassPrices, draft: DraftPrices | None = None) -> Retimed:
    """The steps of `passes` priced on `prices` (and, for speculative steps, `draft` where given)."""
    shapes = check_passes(passes)
    target = drafting = 0.0
    steps = outside = largest = drafted = 0
    for tokens, depth, count in shapes:
        if not count:
            continue
        steps += count
        drafted += count if depth else 0
        largest = max(largest, tokens)
        ms = prices.price(tokens)
        if ms is None:
            outside += count
            continue
        target += ms * count
        if depth and draft is not None:
            drafting += draft.step_ms(rows_of(tokens, depth), depth) * count
    return Retimed(steps, int(decode_tokens), target, drafting, draft is not None, outside, largest, drafted)


def recorded_draft_prices(drafter: str, path: Path | None = None) -> DraftPrices | None:
    """A drafter's recorded time per speculative step by batch: the median over the report's grid rows at each batch
    (scripts/record/gpu_bench.py's `draft_ms_per_forward`, every shape timed with that drafter). None where the report
    timed no such drafter (the shipped H200 report timed only the n-gram lookup). RecordingError for a bad file."""
    path = ROOT / BENCH if path is None else Path(path)
    source = path.name
    check = Checker(RecordingError, source, noun=source)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise RecordingError(f"{source}: larger than {MAX_FILE_BYTES >> 20} MB")
        data = check.parse(path.read_bytes(), MAX_FILE_BYTES)
    except OSError as exc:
        raise RecordingError(f"{source}: cannot be read ({type(exc).__name__})") from None
    check.obj(data, "the report", ("device", "date", "shapes"), open=True)
    by_batch: dict[int, list[float]] = {}
    for i, shape in enumerate(check.list(data["shapes"], "shapes", MAX_ROWS)):
        grid = check.obj(shape, f"shapes[{i}]", open=True).get("grid")
        if not isinstance(grid, dict) or grid.get("drafter") != drafter:
            continue
        for j, row in enumerate(check.list(grid.get("rows"), f"shapes[{i}].grid.rows", MAX_ROWS)):
            where = f"shapes[{i}].grid.rows[{j}]"
            check.obj(row, where, ("batch", "draft_ms_per_forward"), open=True)
            ms = check.opt_num(row["draft_ms_per_forward"], f"{where}.draft_ms_per_forward")
            if ms is not None:
                by_batch.setdefault(check.int(row["batch"], f"{where}.batch", 1, 1 << 20), []).append(ms)
    if not by_batch:
        return None
    batches = tuple(sorted(by_batch))
    label = f"{drafter} drafting timed on the {data['device']} machine, {data['date']} ({BENCH if path == ROOT / BENCH else source})"
    return DraftPrices(batches, tuple(statistics.median(by_batch[b]) for b in batches), label, per_position=True)


DRAFT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def predicted_draft_prices(costs: ModelCosts, roof: Roof, label: str, context: int = 0) -> DraftPrices:
    """A MODEL of a drafter's time on a GPU: one draft pass of one token per row per drafted position, each priced by
    the roofline predictor (engine/roofline/predictor.py: roofline at `roof`'s peaks plus the CUDA-graph overhead
    measured on an H200) for the drafter's own `costs`, at `context` tokens of its KV cache."""
    ms = tuple(pass_ms(costs, roof, b, 1, context, "graph") for b in DRAFT_BATCHES)
    return DraftPrices(DRAFT_BATCHES, ms, label, per_position=True, measured=False)
