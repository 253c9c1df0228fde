"""Where the measured pass curve is kept: a Space with persistent storage keeps it under /data across restarts
instead of measuring it again after each one; the class store's default folder is the same data folder."""

from __future__ import annotations

import pytest

from engine import formats
from engine.decoding import passcurve


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECLAB_DATA", raising=False)
    monkeypatch.setenv("SPECLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(formats, "SPACE_DATA", tmp_path / "data")
    return tmp_path


def test_without_persistent_storage_the_cache_folder(env):
    assert passcurve.curves_dir() == env / "cache" / "pass_curves"


def test_a_writable_data_mount_keeps_the_curves(env):
    (env / "data").mkdir()
    assert passcurve.curves_dir() == env / "data" / "speclab" / "pass_curves"


def test_speclab_data_wins(env, monkeypatch):
    (env / "data").mkdir()
    monkeypatch.setenv("SPECLAB_DATA", str(env / "elsewhere"))
    assert passcurve.curves_dir() == env / "elsewhere" / "pass_curves"


def test_a_curve_measured_once_is_read_back_from_data_after_a_restart(env, monkeypatch):
    (env / "data").mkdir()
    curve = passcurve.PassCurve(tokens=(1, 2), ms=(1.0, 1.5), context=128, key="k", measured_at="2026-12-01T00:00:00+00:00")
    monkeypatch.setattr(passcurve, "curve_key", lambda pair: "k")
    monkeypatch.setattr(passcurve, "_grid", lambda pair: (1, 2))
    monkeypatch.setattr(passcurve, "measure_curve", lambda pair: curve)
    monkeypatch.setattr(passcurve, "_memory", {})
    assert passcurve.pass_curve(object()) == curve
    assert len(list((env / "data" / "speclab" / "pass_curves").glob("*.json"))) == 1

    def no_measuring(pair):
        raise AssertionError("measured again after a restart")

    monkeypatch.setattr(passcurve, "measure_curve", no_measuring)
    monkeypatch.setattr(passcurve, "_memory", {})  # a restarted process
    assert passcurve.pass_curve(object()) == curve


def test_one_data_folder_for_curves_goodput_and_the_class_store(env, monkeypatch):
    """engine.formats.data_dir is the one reader of SPECLAB_DATA: the pass curves (and goodput's state beside them) and
    the class store's default folder follow it, and nothing else in the engine or the app reads the variable."""
    from pathlib import Path

    from app.classroom import inputs
    from engine.decoding import warmstart

    monkeypatch.setattr(
        warmstart, "state_dir", warmstart.state_dir.__wrapped__ if hasattr(warmstart.state_dir, "__wrapped__") else warmstart.state_dir
    )
    for setting in (None, "elsewhere"):
        if setting:
            monkeypatch.setenv("SPECLAB_DATA", str(env / setting))
        folder = formats.data_dir()
        assert folder == (env / setting if setting else env / "cache")
        assert passcurve.curves_dir() == folder / "pass_curves" and inputs.default_data_dir() == folder
    root = Path(__file__).resolve().parents[2]
    readers = sorted(
        str(p.relative_to(root))
        for folder in ("engine", "app")
        for p in (root / folder).rglob("*.py")
        if "environ" in p.read_text() and "SPECLAB_DATA" in p.read_text()
    )
    assert readers == ["engine/formats.py"]
