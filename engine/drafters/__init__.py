"""Drafters, and the registry that maps `DecodeConfig.drafter` to one.

Each drafter is declared once, on its class (base.py's `Drafter`: kind, display name, what it loads, whether it
branches and reports confidence), and listed once, in `DRAFTERS` below. Everything else reads it from here: the
decode loop (`make_drafter`), `DecodeConfig`'s validation, the CLI's `--drafter` choices and help, the bench, the
app's labels and which of a pair's loaded weights (`ModelPair.loaded`) a drafter runs on. To add a drafter: write
its class in its own module and add it to the line below (plus its tests and docs).
"""

from __future__ import annotations

from engine.drafters.base import ConfidenceGate, Draft, Drafter, Verified, choose_tokens
from engine.drafters.eagle import EagleDrafter
from engine.drafters.hybrid import LookupEagleDrafter
from engine.drafters.model import ModelDrafter
from engine.drafters.ngram import NgramDrafter

# the app's order; the pages default to the last the pair can run (the EAGLE head)
DRAFTERS: dict[str, type[Drafter]] = {d.kind: d for d in (NgramDrafter, ModelDrafter, LookupEagleDrafter, EagleDrafter)}


def by_display() -> dict[str, str]:
    """display name -> kind of every registered drafter, in the registry's order (the app's radio options)."""
    return {d.display: kind for kind, d in DRAFTERS.items()}


def cli_help() -> str:
    """One line per drafter for the CLI's --drafter help: 'kind: what it drafts from'."""
    return "; ".join(f"{kind}: {d.about}" for kind, d in DRAFTERS.items())


def make_drafter(pair, cfg, pad_id: int, backend=None) -> Drafter | None:
    """The drafter `cfg` asks for, built for `pair` (None for plain decoding); ConfigError if the pair lacks it.
    `backend`: the run's (engine/model/backend.py, chosen once by the decode loop), which a drafter's own cache runs
    on; None: chosen here from `cfg`."""
    if not cfg.speculative:
        return None
    return DRAFTERS[cfg.drafter].build(pair, cfg, pad_id, backend)


def drafter_label(pair, cfg) -> str | None:
    """The display name a trace records for cfg's drafter (None for plain decoding)."""
    return DRAFTERS[cfg.drafter].label(pair, cfg) if cfg.speculative else None


def drafter_params(pair, cfg) -> int:
    """The drafter's own parameters (0 for plain decoding and for the n-gram lookup)."""
    return DRAFTERS[cfg.drafter].params(pair) if cfg.speculative else 0


def available_drafters(pair) -> dict[str, str]:
    """kind -> display name of every drafter `pair` can run."""
    return {kind: d.label(pair) for kind, d in DRAFTERS.items() if d.available(pair)}


def drafter_name(pair, kind: str) -> str | None:
    """Display name of drafter `kind` (a key of DRAFTERS) for `pair`; None if the pair cannot run it."""
    return available_drafters(pair).get(kind)


__all__ = [
    "DRAFTERS",
    "ConfidenceGate",
    "Draft",
    "Drafter",
    "EagleDrafter",
    "LookupEagleDrafter",
    "ModelDrafter",
    "NgramDrafter",
    "Verified",
    "available_drafters",
    "by_display",
    "choose_tokens",
    "cli_help",
    "drafter_label",
    "drafter_name",
    "drafter_params",
    "make_drafter",
]
