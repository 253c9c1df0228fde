"""The run lock is released on every path once taken (issue 30, item 1).

Streamlit raises its control exceptions (StopException for a closed tab, RerunException for a widget change)
from page calls. `acquire_lock` makes page calls while queued (`notice.warning`) and one after it has the
lock (`notice.empty`): a raise at that moment, before `model_turn`'s `try`, used to leave the lock held for
every visitor. These tests drive `model_turn` with a fresh lock and notices that raise the real exceptions.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException  # noqa: E402

from app.common import resources  # noqa: E402


class Notice:
    """A stand-in for st.empty(): counts calls, and raises `exc` from the chosen call."""

    def __init__(self, raise_on: str | None = None, exc: BaseException | None = None):
        self.raise_on, self.exc = raise_on, exc
        self.calls: list[str] = []

    def warning(self, *args, **kwargs):
        self.calls.append("warning")
        if self.raise_on == "warning":
            raise self.exc

    def empty(self):
        self.calls.append("empty")
        if self.raise_on == "empty":
            raise self.exc


@pytest.fixture
def lock(monkeypatch) -> resources.RunLock:
    fresh = resources.RunLock()
    monkeypatch.setattr(resources, "run_lock", lambda: fresh)
    return fresh


def _free(lock: resources.RunLock) -> bool:
    if lock.try_acquire():
        lock.release()
        return True
    return False


def _turn_in_thread(notice: Notice) -> tuple[threading.Thread, dict]:
    """Enter model_turn(notice) in a thread (as a second session's script thread would); record how it ended."""
    box: dict = {}

    def body():
        try:
            with resources.model_turn(notice):
                box["ran"] = True
        except BaseException as exc:  # noqa: BLE001 - the test inspects what escaped
            box["raised"] = exc

    return threading.Thread(target=body, daemon=True), box


def _wait_queued(lock: resources.RunLock, thread: threading.Thread) -> None:
    deadline = time.monotonic() + 10
    while lock.waiting == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert thread.is_alive() and lock.waiting == 1


@pytest.mark.parametrize("exc", [StopException(), RerunException(None)], ids=["stop", "rerun"])
def test_a_page_call_that_raises_just_after_the_lock_is_taken_releases_it(lock, exc):
    """Hold the lock; a second session queues; the holder finishes; the queued session takes the lock and its
    `notice.empty()` raises (the visitor changed a widget or closed the tab at that moment)."""
    assert lock.acquire(timeout=1)
    notice = Notice(raise_on="empty", exc=exc)
    thread, box = _turn_in_thread(notice)
    thread.start()
    _wait_queued(lock, thread)
    lock.release()
    thread.join(10)
    assert not thread.is_alive()
    assert box.get("raised") is exc and "ran" not in box  # the page's exception still propagates
    assert notice.calls[-1] == "empty"
    assert _free(lock), "the lock leaked: every later run would queue forever"
    assert lock.waiting == 0 and lock.holder_since is None


def test_a_tab_closed_while_queued_leaves_the_queue_and_never_holds_the_lock(lock):
    """While queued, the session's next page call (the queue notice) raises StopException, as Streamlit does
    once a tab is closed; the session leaves the queue, and the holder's release frees the lock for everyone."""
    assert lock.acquire(timeout=1)
    notice = Notice(raise_on="warning", exc=StopException())
    thread, box = _turn_in_thread(notice)
    thread.start()
    thread.join(10)
    assert not thread.is_alive() and isinstance(box.get("raised"), StopException) and "ran" not in box
    assert lock.waiting == 0 and not _free(lock)  # still the holder's
    lock.release()
    assert _free(lock)


def test_a_body_that_raises_releases_the_lock_and_an_uncontended_turn_makes_no_page_call(lock):
    notice = Notice()
    with pytest.raises(StopException):
        with resources.model_turn(notice):
            raise StopException()
    assert _free(lock) and notice.calls == []  # nothing to clear: it never queued


def test_a_queued_turn_clears_its_notice_and_runs(lock):
    assert lock.acquire(timeout=1)
    notice = Notice()
    thread, box = _turn_in_thread(notice)
    thread.start()
    _wait_queued(lock, thread)
    time.sleep(0.6)  # at least one queue notice
    lock.release()
    thread.join(10)
    assert box.get("ran") and "raised" not in box
    assert "warning" in notice.calls and notice.calls[-1] == "empty"
    assert _free(lock) and lock.waiting == 0


def test_the_app_preloads_the_default_pair_and_the_probe_in_the_background():
    """resources.preload (app/main.py calls it unless SPECLAB_PRELOAD is 0) loads the embedded pair and probes this
    machine once, on a thread of its own under the run lock, so a visitor's first live run does not wait for them;
    the lock is free again once it is done, and a second call returns the same thread."""
    from streamlit.testing.v1 import AppTest

    def script():
        import streamlit as st

        from app.common import resources

        thread = resources.preload("embedded", "auto")
        thread.join(timeout=600)
        lock = resources.run_lock()
        free = lock.try_acquire()
        if free:
            lock.release()
        pair = resources.get_pair("embedded", "auto")  # loaded by the preload: no second load
        probed = (pair.device.type, pair.dtype_name) in resources._store()["probes"]  # earlier tests may probe others
        st.write(f"alive {thread.is_alive()}; loaded {resources.is_loaded('embedded', 'auto')}; probed {probed}; lock free {free}")
        st.write(f"same thread {resources.preload('embedded', 'auto') is thread}; hub {resources.preload('smollm2-1.7b', 'auto')}")

    at = AppTest.from_function(script, default_timeout=600).run()
    assert not at.exception
    assert at.markdown[0].value == "alive False; loaded True; probed True; lock free True"
    assert at.markdown[1].value == "same thread True; hub None"


def test_the_preload_takes_each_later_step_in_a_run_lock_turn_of_its_own():
    """After the pair and the probe, each of the preload's steps (the lessons' preparations) gets the loaded pair and
    runs holding the run lock, which is free between steps; a step that fails leaves the next one to run."""
    from app.common import resources

    seen = []

    def held(pair):
        lock = resources.run_lock()
        seen.append(("held", not lock.try_acquire(), pair))

    def fails(pair):
        seen.append(("fails",))
        raise ValueError("a context that does not fit")

    def last(pair):
        seen.append(("last", resources.run_lock().busy_for() >= 0.0, pair))

    resources.preload.clear()
    thread = resources.preload("embedded", "auto", _then=(held, fails, last))
    thread.join(timeout=600)
    assert not thread.is_alive()
    pair = resources._store()["pairs"][("embedded", "auto")]
    assert seen == [("held", True, pair), ("fails",), ("last", True, pair)]
    assert _free(resources.run_lock())


def test_the_lessons_preparations_measure_the_room_first_and_warm_lesson_8s_default_contexts():
    """app/main.py hands the registry's preparations to the preload: the room every lesson's settings come from, then
    each record's own (lesson 8's: the contexts its default run reads)."""
    from app.lessons import l8_long_context as l8
    from app.lessons.kit import runs
    from app.lessons.registry import EXPERIMENTS, preparations

    steps = preparations()
    assert steps[0] is runs.machine_curve and steps[1:] == [e.prepare for e in EXPERIMENTS.values() if e.prepare] and l8.prepare in steps
    assert EXPERIMENTS["long_context"].defaults()["context"] == l8.LONG
    assert "preparations()" in (Path(__file__).resolve().parents[2] / "app" / "main.py").read_text()
