"""Drafters, and the registry that maps `DecodeConfig.drafter` to one.

To add a drafter: write a class implementing `Drafter` (base.py) in its own module and list it in
`DRAFTERS`; the decode loop, the CLI and the app pick it up from here (`DecodeConfig` validates the
name against `config.DrafterKind`, which a test keeps equal to this registry).
"""

from __future__ import annotations

from engine.drafters.base import ConfidenceGate, Draft, Drafter, Verified, choose_tokens
from engine.drafters.eagle import EagleDrafter
from engine.drafters.model import ModelDrafter
from engine.drafters.ngram import NgramDrafter

DRAFTERS: dict[str, type[Drafter]] = {d.kind: d for d in (ModelDrafter, EagleDrafter, NgramDrafter)}


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
    """Display name of drafter `kind` ("model", "eagle", "ngram") for `pair`; None if the pair cannot run it."""
    return available_drafters(pair).get(kind)


__all__ = [
    "DRAFTERS",
    "ConfidenceGate",
    "Draft",
    "Drafter",
    "EagleDrafter",
    "ModelDrafter",
    "NgramDrafter",
    "Verified",
    "available_drafters",
    "choose_tokens",
    "drafter_label",
    "drafter_name",
    "drafter_params",
    "make_drafter",
]
