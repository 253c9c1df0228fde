"""A drafter's shipped calibration: its per-position acceptance on held-out prompts, from its card.

A model drafter's folder (assets/eagle/, assets/draft/) may carry `calibration.json` (format
"speclab.drafter_calibration/1"): `per_position_acceptance[i]`, the fraction of row-steps whose draft was
accepted through position i + 1 (the trace summary's field of that name), measured with the real drafter on
held-out prompts (how: `measured`, a free-form description). The goodput policy (engine/decoding/goodput.py) starts from it:
its prior acceptance at position j is the chance of keeping draft j given drafts 1..j-1 were kept,
per_position_acceptance[j] / per_position_acceptance[j - 1]. A drafter without a card starts from
goodput.PRIOR_ACCEPTANCE.

The file is untrusted input, read with the project's strict checks (engine/checks.py): one that is corrupt, of
another format or out of range is ignored with a one-line notice on stderr, never trusted.
"""

from __future__ import annotations

from pathlib import Path

from engine.checks import Checker, notice

CALIBRATION_FILE = "calibration.json"
CALIBRATION_FORMAT = "speclab.drafter_calibration/1"
MAX_BYTES = 64 * 1024
MAX_POSITIONS = 16  # engine.config.MAX_DEPTH


class CalibrationError(ValueError):
    """A drafter calibration file that cannot be trusted."""


CHECK = Checker(
    CalibrationError, "malformed drafter calibration", foreign="not a drafter calibration", noun="calibration file", max_text=2000
)
SPEC = {
    "format": (CALIBRATION_FORMAT,),
    "drafter": ("eagle", "model"),
    "per_position_acceptance": ["num+", MAX_POSITIONS],
    "prompts": "str",
    "measured": "str",
    "date": "date",
}


def parse(raw: bytes | str, kind: str) -> list[float]:
    """The conditional acceptance per position from a calibration file's bytes (CalibrationError if untrusted)."""
    data = CHECK.parse(raw, MAX_BYTES)
    if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
        raise CalibrationError(f"not a drafter calibration: format is not {CALIBRATION_FORMAT!r}")
    CHECK.spec(data, SPEC, "calibration")
    if data["drafter"] != kind:
        CHECK.fail("calibration.drafter", f"is another drafter's (this is {kind!r})", data["drafter"])
    reached = CHECK.list(data["per_position_acceptance"], "calibration.per_position_acceptance", MAX_POSITIONS, min_len=1)
    for i, r in enumerate(reached):
        CHECK.num(r, f"calibration.per_position_acceptance[{i}]", 0.0, 1.0)
        if i and r > reached[i - 1]:
            CHECK.fail(f"calibration.per_position_acceptance[{i}]", "must not exceed the position before it", r)
    return conditional(reached)


def conditional(reached: list[float]) -> list[float]:
    """P(keep draft j | drafts 1..j-1 kept) from the fractions of row-steps kept through each position."""
    return [r / prev if prev > 0 else 0.0 for r, prev in zip(reached, [1.0, *reached])]


def shipped_acceptance(pair, kind: str) -> list[float] | None:
    """The prior acceptance per position of `pair`'s drafter `kind` from its card (None: no card, or an untrusted one)."""
    from engine.drafters import DRAFTERS  # the registry: which of the pair's loaded weights drafter `kind` runs on

    loaded = pair.loaded.get(DRAFTERS[kind].loads) if kind in DRAFTERS else None
    folder = loaded.folder if loaded is not None else None
    path = Path(folder) / CALIBRATION_FILE if folder else None
    if path is None or not path.is_file():
        return None
    card = getattr(DRAFTERS[kind], "card", kind)  # a drafter may start from the card of the weights it runs (the hybrid)
    try:
        return parse(path.read_bytes(), card)
    except (OSError, CalibrationError) as exc:
        notice(f"ignored {path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        return None
