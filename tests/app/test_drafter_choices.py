"""The Playground's and the Sweep's drafter choices are the engine's registry: a drafter registered in-process (and
removed again) is one of the Playground's Drafter options with no other edit (tests/engine/test_drafter_registry.py
has the CLI's half)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402
from toy_drafter import ToyDrafter  # noqa: E402

from app.common import drafters  # noqa: E402


def _playground_controls():
    """The Playground's controls alone (no model pair): what its page draws above the lanes."""
    from app.playground.controls import controls

    controls(hub_ok=False, on_gpu=False)


def _drafter_options() -> list[str]:
    at = AppTest.from_function(_playground_controls, default_timeout=60).run()
    assert not at.exception, at.exception
    return list(at.radio(key="drafter").options)


def test_the_playgrounds_drafters_are_the_registrys(monkeypatch):
    from engine.drafters import DRAFTERS

    assert _drafter_options() == [d.display for d in DRAFTERS.values()]
    monkeypatch.setitem(DRAFTERS, ToyDrafter.kind, ToyDrafter)
    assert "toy drafter" in _drafter_options() and drafters.choices()["toy drafter"] == "toy"
    assert "proposes nothing" in drafters.help_text() and not drafters.branches("toy") and not drafters.confident("toy")
