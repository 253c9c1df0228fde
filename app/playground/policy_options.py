"""The depth policies the pages offer: their labels, what each one does, and the batch-table syntax.

Plain functions and constants, no streamlit (tests/app/test_policy_options.py checks them). The labels
are what a widget bound to the URL writes into the query string, so they are short, readable and
stable. The batch table is written as the CLI writes it (`python -m engine run --batch-table`):
`1-4:4,5-16:2,17-1024:0`, rows MIN-MAX:K (or N:K for one batch size), K = 0 switching speculation off,
the semantics of vLLM's `num_speculative_tokens_per_batch_size` (engine/decoding/policies.py, BatchTable).
"""

from __future__ import annotations

import re

from app.views.safe import md_text
from engine import ConfigError, DecodeConfig

# label (shown, and written to the URL) -> DecodeConfig.policy
POLICIES = {
    "fixed k": "fixed",
    "off above batch N": "off_above_batch",
    "heuristic k": "heuristic",
    "batch table": "batch_table",
    "goodput": "goodput",
}
USES_N = ("off_above_batch", "heuristic")  # the policies that read disable_by_batch_size (the "N" control)
TABLE_EXAMPLE = "1-4:4,5-16:2,17-1024:0"
TABLE_MAX_CHARS = 200
VLLM_PR = "https://github.com/vllm-project/vllm/pull/35060"

POLICY_HELP = (
    "**fixed k**: draft k tokens at every step.  \n"
    "**off above batch N**: the classic load rule, no speculation while more than N sequences decode. It is what "
    "vLLM's V0 engine offered as `--speculative-disable-by-batch-size`, which did nothing from v0.10 on and was "
    f"removed in February 2026 ([vllm-project/vllm PR #35060]({VLLM_PR})).  \n"
    "**heuristic k**: transformers' assisted-generation schedule: start at k, +2 after a step whose drafts were all "
    "accepted, −1 after a rejection; also off above N.  \n"
    "**batch table**: k per batch-size range, as vLLM sets it today with `num_speculative_tokens_per_batch_size` "
    "(TensorRT-LLM: `draft_len_schedule`). Rows MIN-MAX:K; K = 0 turns speculation off; never above k. Leave the "
    "table empty to derive it from this machine's measured pass cost.  \n"
    "**goodput**: at every step, the depth from 0 to k that maximises expected tokens per second for the batch in "
    "flight, priced with this machine's measured pass cost and this run's own acceptance at each draft position. "
    "It only changes how many tokens are proposed, so the output is unchanged; k is its maximum. With tree nodes "
    "set it also chooses the shape each step: plain, a chain, or the tree cut to its most confident nodes."
)

_ROW = re.compile(r"^(\d{1,7})(?:\s*-\s*(\d{1,7}))?\s*:\s*(\d{1,3})$")


class BatchTableError(ValueError):
    """A batch table the page cannot use; the message is one sentence that says how to fix it."""


def _refuse(what: str) -> BatchTableError:
    return BatchTableError(
        f"Batch table: {what}. Fix: write rows as MIN-MAX:K separated by commas, e.g. {TABLE_EXAMPLE} "
        "(K = 0 switches speculation off), or leave it empty to derive the table from this machine's measured pass cost."
    )


def parse_batch_table(text: str) -> tuple[tuple[int, int, int], ...] | None:
    """'1-4:4,5-16:2,17-1024:0' -> ((1, 4, 4), (5, 16, 2), (17, 1024, 0)); 'N:K' is the row N-N:K; empty -> None
    (derive the table). Anything else raises BatchTableError, including tables the engine refuses
    (overlapping ranges, K above the engine's maximum)."""
    text = (text or "").strip()
    if not text:
        return None
    if len(text) > TABLE_MAX_CHARS:
        raise _refuse(f"{len(text)} characters is longer than the {TABLE_MAX_CHARS} allowed")
    rows = []
    for part in text.split(","):
        part = part.strip()
        match = _ROW.match(part)
        if not match:
            raise _refuse(f"cannot read the row {md_text(part, 30)}" if part else "an empty row (two commas in a row?)")  # shown as code
        low, high, k = match.groups()
        rows.append((int(low), int(high or low), int(k)))
    try:
        checked = DecodeConfig(policy="batch_table", batch_table=tuple(rows)).batch_table
    except ConfigError as exc:
        raise _refuse(str(exc).removeprefix("batch_table ")) from None
    return checked


def format_batch_table(rows) -> str:
    """((1, 4, 4), (5, 5, 2)) -> '1-4:4, 5:2' (the syntax parse_batch_table reads, with spaces for reading)."""
    return ", ".join(f"{low}:{k}" if low == high else f"{low}-{high}:{k}" for low, high, k in rows)
