"""Fixtures the app's tests share."""

from __future__ import annotations

import pytest


@pytest.fixture
def data(tmp_path, monkeypatch):
    """A class session's data folder ($SPECLAB_DATA) of its own for one test, with the server-wide store cache cleared
    before and after, so the page opens this test's file."""
    from app.common import resources

    monkeypatch.setenv("SPECLAB_DATA", str(tmp_path))
    resources.classroom_store.clear()
    yield tmp_path
    resources.classroom_store.clear()
