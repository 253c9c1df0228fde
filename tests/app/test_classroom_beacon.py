"""Each class's change number as a served file (app/classroom/beacon.py) and the store's writes that move it (issue 41):
what a student's idle page polls instead of asking the server for a run. The browser side (no run while the number
stays, a rerun soon after it moves) is tests/app/test_class_browser.py; the component's fallback, AppTest below."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from streamlit import config
from streamlit.testing.v1 import AppTest

from app.classroom.beacon import FOLDER, STATIC_URL, ClassBeacons
from app.classroom.store import ClassroomError, ClassroomStore

SECRET = b"s" * 32


@pytest.fixture
def beacons(tmp_path) -> ClassBeacons:
    return ClassBeacons(tmp_path / "static" / FOLDER, secret=SECRET)


def test_a_files_name_is_an_hmac_of_the_code_and_never_the_code(beacons, tmp_path):
    name = beacons.name("ABCDE12345")
    assert len(name) == 36 and name.endswith(".txt") and int(name[:32], 16) >= 0
    assert "ABCDE12345" not in name and "abcde12345" not in name.lower()
    assert beacons.name("ABCDE12346") != name  # one file per class
    other = ClassBeacons(tmp_path / "x", secret=b"t" * 32)
    assert other.name("ABCDE12345") != name  # another server's secret: another name, nothing to guess from
    assert ClassBeacons(tmp_path / "y").name("ABCDE12345") != name  # a fresh random secret by default
    assert beacons.url_path("ABCDE12345") == f"{STATIC_URL}/{FOLDER}/{name}"
    assert "sss" not in repr(beacons)
    with pytest.raises(ValueError):
        ClassBeacons(tmp_path, secret=b"short")


def test_publish_writes_the_number_and_never_goes_backwards(beacons):
    code = "ABCDE12345"
    assert beacons.read(code) is None
    beacons.publish(code, 5)
    assert (beacons.folder / beacons.name(code)).read_text() == "5"
    beacons.publish(code, 3)  # a writer finishing late with an older number
    assert beacons.read(code) == 5
    beacons.publish(code, 9)
    assert beacons.read(code) == 9
    assert [p.name for p in beacons.folder.iterdir()] == [beacons.name(code)]  # no temporary file left behind
    beacons.remove(code)
    assert beacons.read(code) is None
    beacons.remove(code)  # removing twice is fine


def test_racing_writers_leave_the_highest_number(beacons):
    code = "ABCDE12345"
    threads = [threading.Thread(target=beacons.publish, args=(code, v)) for v in range(1, 41)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert beacons.read(code) == 40


def test_current_makes_a_missing_file_from_the_stores_number(beacons):
    code = "ABCDE12345"
    assert beacons.current(code, lambda: 7) == 7 and beacons.read(code) == 7
    assert beacons.current(code, lambda: 99) == 7  # an existing file wins: the page compares with what it reads
    assert beacons.current("ZZZZZZZZZZ", lambda: None) is None  # no such class: no file
    assert beacons.read("ZZZZZZZZZZ") is None


def test_a_file_that_is_not_a_number_reads_as_none(beacons):
    beacons.folder.mkdir(parents=True)
    for text in ("", "12a", "-1", "1" * 19, "<script>"):
        (beacons.folder / beacons.name("ABCDE12345")).write_text(text)
        assert beacons.read("ABCDE12345") is None


def test_an_unwritable_folder_means_no_file_never_an_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    beacons = ClassBeacons(blocker / "classes", secret=SECRET)  # a folder under a file: every write fails
    beacons.publish("ABCDE12345", 3)
    assert beacons.read("ABCDE12345") is None
    assert beacons.current("ABCDE12345", lambda: 3) is None  # the page falls back to polling the server


def test_prune_deletes_only_files_older_than_a_class_lives(beacons):
    beacons.publish("ABCDE12345", 1)
    beacons.publish("ABCDE12346", 1)
    old = beacons.folder / beacons.name("ABCDE12345")
    os.utime(old, (1.0, 1.0))
    assert beacons.prune() == 1
    assert beacons.read("ABCDE12345") is None and beacons.read("ABCDE12346") == 1


def test_the_store_moves_the_file_only_for_what_a_students_page_shows(tmp_path, beacons):
    store = ClassroomStore(tmp_path / "classes.sqlite3", beacons=beacons)
    code, token = store.create_class()
    number = lambda: beacons.read(code)  # noqa: E731
    assert number() is None  # nothing to show yet: made on a page's first read (current)
    store.set_lesson(code, token, "2")
    assert number() == store.version(code)
    before = number()
    ann = store.join(code, "Ann")
    bob = store.join(code, "Bob")
    store.predict(code, ann, "2", 1.5)  # before the Reveal a student's page shows no predictions
    store.answer(code, ann, "2", 1, 0)  # nor answers before they are revealed
    assert number() == before and store.version(code) > before  # the desk still sees them (the store's number)
    store.reveal(code, token, "2", '{"speedup": 1.2}')
    assert number() == store.version(code) > before
    at = number()
    with pytest.raises(ClassroomError, match="predictions for this lesson are closed"):
        store.predict(code, bob, "2", 2.5)  # after the Reveal the class's predictions are what they were
    store.answer(code, bob, "2", 1, 1)
    assert number() == at  # answers still hidden
    store.reveal_answers(code, token, "2")
    assert number() == store.version(code) > at
    at = number()
    with pytest.raises(ClassroomError, match="questions are closed"):
        store.answer(code, ann, "2", 1, 1)  # the counts on every page stay those revealed
    assert number() == at
    store.set_lesson(code, token, "3")
    assert number() == store.version(code)
    store.end_class(code, token)
    assert number() is None and store.version(code) is None


def _watch_page():
    import os

    import streamlit as st

    from app.classroom import watch
    from app.classroom.beacon import ClassBeacons
    from app.classroom.store import ClassroomStore

    beacons = ClassBeacons(os.environ["SPECLAB_BEACONS"], secret=b"s" * 32)
    store = ClassroomStore(os.environ["SPECLAB_CLASS_DB"], beacons=beacons)
    code = os.environ["SPECLAB_CODE"]
    watch.watch(watch.beacon(store, code), 1.5, 2.0)
    st.session_state["beacon"] = watch.beacon(store, code)


@pytest.mark.parametrize("serving", [True, False])
def test_the_watch_is_given_the_file_only_where_streamlit_serves_it(tmp_path, monkeypatch, serving):
    db, folder = tmp_path / "classes.sqlite3", tmp_path / "static" / FOLDER
    store = ClassroomStore(db, beacons=ClassBeacons(folder, secret=SECRET))
    code, token = store.create_class()
    store.set_lesson(code, token, "2")
    monkeypatch.setenv("SPECLAB_CLASS_DB", str(db))
    monkeypatch.setenv("SPECLAB_BEACONS", str(folder))
    monkeypatch.setenv("SPECLAB_CODE", code)
    was = config.get_option("server.enableStaticServing")
    config.set_option("server.enableStaticServing", serving)
    try:
        at = AppTest.from_function(_watch_page, default_timeout=30).run()
    finally:
        config.set_option("server.enableStaticServing", was)
    assert not at.exception
    found = at.session_state["beacon"]
    if serving:
        assert found == (f"{STATIC_URL}/{FOLDER}/{ClassBeacons(folder, secret=SECRET).name(code)}", store.version(code))
    else:
        assert found is None  # static serving off: the page polls the server, as before
    assert Path(folder).is_dir()


def test_the_live_part_draws_once_in_a_pass():
    from app.classroom import watch

    state: dict = {}
    assert watch.once_in_pass(state, None) and watch.once_in_pass(state, None) and not state  # page runs: once each
    one, two = ["old place", "new place"], ["new place"]
    assert watch.once_in_pass(state, one)  # the first of the live part's fragments in this pass draws
    assert not watch.once_in_pass(state, one)  # a second in the same pass does not (its watch's key would repeat)
    assert watch.once_in_pass(state, two) and not watch.once_in_pass(state, two)  # the next pass: once again
    assert watch.once_in_pass(state, ["new place"])  # an equal queue is another pass: the object, not its content


def _raced_page():
    import streamlit as st
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    from app.classroom import watch

    ctx = get_script_run_ctx()
    st.session_state["runs"] = st.session_state.get("runs", 0) + 1
    st.session_state["has_pass"] = hasattr(ctx, "fragment_ids_this_run")  # what draw_once reads, in this Streamlit
    if not st.session_state.get("raced"):
        st.session_state["raced"] = True
        ctx.fragment_ids_this_run = ["old place", "new place"]  # a pass that runs two of the live part's fragments
        try:
            watch.draw_once()
            st.write("the first draws")
            watch.draw_once()
            st.write("the second never does")
        finally:
            ctx.fragment_ids_this_run = None
    watch.draw_once()
    st.write("the page, once")


def test_a_second_live_part_in_one_pass_reruns_the_page_instead():
    at = AppTest.from_function(_raced_page, default_timeout=30).run()
    assert not at.exception and at.session_state["has_pass"]
    assert at.session_state["runs"] == 2  # the second draw_once asked for a page run, and it ran
    shown = [m.value for m in at.markdown]
    assert shown == ["the page, once"]


def test_a_reveal_writes_each_students_page_before_the_number_moves(tmp_path, beacons):
    """At a Reveal each student's result is a file of its own, written for the Reveal's number before the number moves
    (a page that sees the new number finds its file), named so that it says nothing of the code or the student."""
    store = ClassroomStore(tmp_path / "classes.sqlite3", beacons=beacons)
    code, token = store.create_class()
    store.set_lesson(code, token, "2")
    ann, bob = store.join(code, "Ann"), store.join(code, "Bob")
    store.predict(code, ann, "2", 1.5)
    store.predict(code, bob, "3", 9.0)  # another lesson's prediction is not this Reveal's
    before = beacons.read(code)
    seen = []

    def prepare(version: int, seats: list) -> None:
        seen.append((version, seats, beacons.read(code)))
        beacons.publish_results(code, version, {sid: f"<p>{value}</p>" for sid, value in seats})

    store.reveal(code, token, "2", '{"speedup": 1.2}', prepare=prepare)
    ((version, seats, number_then),) = seen
    assert version == store.version(code) == beacons.read(code) and number_then == before < version
    assert seats == [(ann, 1.5), (bob, None)]
    names = {sid: beacons.page_name(code, sid) for sid in (ann, bob)}
    assert len(set(names.values())) == 2 and not any(code in n or ann in n or bob in n for n in names.values())
    assert all(beacons.page_url(code, sid) == f"{STATIC_URL}/{FOLDER}/{n}" for sid, n in names.items())
    assert (beacons.folder / names[ann]).read_text() == f"<!--v{version}-->\n<p>1.5</p>"
    assert (beacons.folder / names[bob]).read_text() == f"<!--v{version}-->\n<p>None</p>"
    store.end_class(code, token)
    assert not list(beacons.folder.iterdir())  # the number and every student's page are gone with the class


def test_the_desk_writes_each_students_page_as_the_page_draws_it(tmp_path, beacons):
    from app.classroom import desk

    store = ClassroomStore(tmp_path / "classes.sqlite3", beacons=beacons)
    code, token = store.create_class()
    ann, bob = store.join(code, "Ann"), store.join(code, "Bob")

    def page(result: str, values: tuple, mine) -> str:
        return f"{result}|{values}|{mine}"

    desk.publish_pages(store, code, 7, [(ann, 2.0), (bob, None), ("carl", 1.0)], "R", page)
    assert (beacons.folder / beacons.page_name(code, ann)).read_text() == "<!--v7-->\nR|(1.0, 2.0)|2.0"
    assert (beacons.folder / beacons.page_name(code, bob)).read_text() == "<!--v7-->\nR|(1.0, 2.0)|None"

    def unreadable(result: str, values: tuple, mine) -> str:
        raise ValueError("not a result")

    desk.publish_pages(store, code, 8, [(ann, 2.0)], "R", unreadable)  # never fails the Reveal: the page asks its run
    assert (beacons.folder / beacons.page_name(code, ann)).read_text().startswith("<!--v7-->")


def test_the_number_moves_even_when_writing_the_pages_fails(tmp_path, beacons):
    store = ClassroomStore(tmp_path / "classes.sqlite3", beacons=beacons)
    code, token = store.create_class()
    store.set_lesson(code, token, "2")

    def broken(version: int, seats: list) -> None:
        raise RuntimeError("the pages could not be built")

    with pytest.raises(RuntimeError):
        store.reveal(code, token, "2", '{"speedup": 1.2}', prepare=broken)
    assert beacons.read(code) == store.version(code) and store.state(code, token=token).result_json is not None
