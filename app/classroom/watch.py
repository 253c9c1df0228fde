"""A student's idle page asks the server for nothing, and shows a Reveal before its Streamlit run (issue 41): a small
custom component (Streamlit's components v2, JavaScript in the page, no iframe, no build step) that polls the class's
change number as a static file and reruns the page's live fragment only when it moved (app/classroom/watch.js; the
file: app/classroom/beacon.py).

Why: a fragment run every 2 s cost each page 45-60 ms of its browser's main thread (Streamlit sends ~8 messages per run
and React redraws) and the server a run, for 30 pages ~1 core of this 2-core machine's browsers while nothing changed;
late joins got the CPU that was left. A fetch of a ten-byte file costs next to nothing on both sides.

It also shows the class's result on the page (plain HTML this server built, in the component's element): at a Reveal
each student's result is written as a file first (desk.publish_pages), and a page that sees the number move to the
Reveal's fetches its own and shows it at once; its run then gives the same HTML. 30 pages showing a Reveal each wait
on one fetch and one insert (milliseconds), not on a Streamlit run drawn by their browser (~0.1-0.3 s of CPU each).

Fallback: with no file to read (static serving off, an unwritable folder: `path` None) or while the fetch fails, the
script asks for a run every period, as the fragment's own timer did before; and the fragment keeps a slow timer of its own
(panel.BACKSTOP_S) in case the script cannot run at all.
"""

from __future__ import annotations

import sqlite3
from collections.abc import MutableMapping
from pathlib import Path

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from app.classroom.inputs import ClassroomError
from app.classroom.store import ClassroomStore

KEY = "class_watch"
PASS = "class_watch_pass"  # session_state: the fragment pass (its queue, the object itself) that last drew the watch
# Not style-isolated: the result it shows takes the page's styles, and its text is the page's (find, copy, read aloud).
_component = st.components.v2.component("speclab_class_watch", js=(Path(__file__).with_name("watch.js")).read_text(), isolate_styles=False)


def serving(store: ClassroomStore) -> bool:
    """Whether students' pages can fetch the class's files: the store keeps them and Streamlit serves app/static/."""
    return store.beacons is not None and bool(st.get_option("server.enableStaticServing"))


def beacon(store: ClassroomStore, code: str) -> tuple[str, int] | None:
    """(the file's path for the page, the number in it now) for class `code`, or None (the page polls the server).
    Read before the page reads the class: a change after it always leaves another number in the file."""
    beacons = store.beacons
    if not serving(store):
        return None
    try:
        found = beacons.current(code, lambda: store.version(code))
    except (ClassroomError, OSError, sqlite3.Error):  # no file to be had: the page polls the server, never breaks
        return None
    return None if found is None else (beacons.url_path(code), found)


def page_path(store: ClassroomStore, code: str, student_id: str) -> str:
    """Where this student's page fetches its revealed result (written at a Reveal: desk.publish_pages)."""
    return store.beacons.page_url(code, student_id)


def once_in_pass(state: MutableMapping, this_pass: object | None) -> bool:
    """Whether the live part may draw in this pass: False for its second run in one fragment pass (`this_pass`, the
    pass's queue of fragments, the same object throughout the pass; None in a page run, which draws it once).

    Why: a page run that a newer request cut short leaves the live part's previous fragment (Streamlit names a
    fragment by its place on the page, and a page whose elements above it changed puts it elsewhere) beside the new
    one; when the old one's timer and the new one's watch ask for runs together, both run in one pass and the second
    watch's key repeats (seen once in a class of 30, 2026-12-04 blur-a: StreamlitDuplicateElementKey)."""
    if this_pass is None:
        return True
    if state.get(PASS) is this_pass:
        return False
    state[PASS] = this_pass
    return True


def draw_once() -> None:
    """Before the live part draws: its second run in one pass reruns the page instead (a page run redraws the live
    part once, at its one place, and forgets the old fragment)."""
    ctx = get_script_run_ctx()
    if not once_in_pass(st.session_state, getattr(ctx, "fragment_ids_this_run", None) or None):
        st.rerun(scope="app")


def watch(
    where: tuple[str, int] | None, period_s: float, poll_s: float, *, page: str = "", page_path: str | None = None, committed: int = 0
) -> None:
    """Mount the watch: it shows `page` (HTML built by this server from escaped text and numbers: the class's result,
    or the frame waiting for it), fetches the file every `period_s` and reruns the enclosing fragment when the class's
    number is no longer `where`'s (or, with `where` None or while the fetch fails, every `poll_s`). When the number
    moved to a Reveal's, it first shows the result file at `page_path` written for that number (no Streamlit run).
    When `committed` (the predictions this session sent) grew since its last call, it lets go of the prediction
    input's focus: on a phone the keyboard closes and the result the Reveal brings is not hidden under it; an idle
    page with a focused input redraws its blinking caret twice a second (in 10 co-located headless pages, 0.24 of a
    core against 0.14 with the inputs blurred, 2026-12-04)."""
    path, version = where if where is not None else (None, None)
    data = {"path": path, "version": version, "period_ms": int(period_s * 1000), "poll_ms": int(poll_s * 1000)}
    _component(
        key=KEY,
        data=data | {"page": page, "page_path": page_path, "committed": int(committed)},
        height="content",
        on_changed_change=lambda: None,
        on_poll_change=lambda: None,
    )
