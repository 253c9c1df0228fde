"""Where the measured pass curve is kept (issue 30, item 7): a Space with persistent storage keeps it under
/data across restarts instead of measuring it again (10-20 s) after each one."""

from __future__ import annotations

import pytest

from engine.decoding import passcurve


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECLAB_DATA", raising=False)
    monkeypatch.setenv("SPECLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(passcurve, "SPACE_DATA", tmp_path / "data")
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
