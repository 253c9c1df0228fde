"""A class session's teacher desk (issue 29): the student link and QR code, the private link, and the live part (the
class's predictions and their distribution, Reveal, the answer counts, who joined), polled every POLL_S seconds in an
`st.fragment`. Every desk of a class (the teacher's private link opened on a second device) reads the class's lesson
and state from the store: a desk whose page is on another lesson than the class's follows the class there (the lesson
a teacher's page opens is the class's; only a lesson chosen on a desk moves the class). The shared parts (Seat,
notices, leaving) are app/classroom/panel.py's."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from app.classroom import watch
from app.classroom.inputs import ClassGone, ClassroomError
from app.classroom.panel import FOLLOW, POLL_S, SENT, ResultPage, Seat, class_ended, forget, leave_button, notice
from app.classroom.store import ClassroomStore, ClassState
from app.views import classroom as views
from app.views.safe import md_text

# --- the desk -----------------------------------------------------------------------------------------------
Questions = list[tuple[str, list[str], int]]  # (question, its options, the right option's index), question 1 first


def teacher_desk(
    store: ClassroomStore,
    me: Seat,
    page_url: str,
    lesson: str,
    *,
    unit: str,
    questions: Questions,
    run_result: Callable[[], str | None],
    page_redraws: bool = True,
    result_page: ResultPage | None = None,
) -> bool:
    """The control desk: the student link (text and QR code), the private link, then the live part (counts,
    the predictions' distribution, Reveal, answer counts). `lesson` is the lesson the teacher's page shows (the
    class follows it); `run_result()` runs the experiment once (live, or the recording in teacher mode) and returns
    the result as JSON text, or None when it could not (it has said why). `page_redraws`: the run is the page's own
    result too (a live run), so after a Reveal the whole page reruns to show it; False where the page already shows
    what the class is given (the recording, in teacher mode): then only the desk redraws (issue 41: a whole lesson page
    rerun at every Reveal cost the server ~0.5 s of CPU and the teacher's browser 1-2 s, while 30 students drew it).
    `result_page`: at a Reveal, each student's result is also written as a file their page fetches (publish_pages).
    Returns whether the class's result for `lesson` is out (until then the page folds its own result: the answer)."""
    state = desk_state(store, me, lesson)
    if state is None:
        return False
    revealed = state.result_json is not None
    link = views.lessons_url(page_url, me.code)
    with st.container(border=True):
        st.markdown(f"**Class {md_text(me.code)}**: students open this link or scan the code.")
        qr_col, text_col = st.columns([1, 3])
        qr_col.image(views.qr_svg(link), width=165)
        text_col.code(link, language=None)
        with text_col.expander("Teacher's private link (keep it secret: it opens this desk on another device)"):
            st.code(views.lessons_url(page_url, me.code, me.secret), language=None)
        desk_live(store, me, lesson, unit, questions, run_result, page_redraws or not revealed, result_page)
        if st.button("End the class", key="class_end", help="Deletes the class and everything in it now."):
            try:
                store.end_class(me.code, me.secret)
            except ClassroomError as exc:
                notice(exc)
            forget()
            st.rerun()
    return revealed


def desk_state(store: ClassroomStore, me: Seat, lesson: str) -> ClassState | None:
    """The class as this desk's full run finds it, on `lesson`: a lesson picked on this desk moves the class there
    (set_lesson); a class another desk moved elsewhere takes this page with it (follow_class). None after saying why
    not (an ended class: said so, with a way to close the desk)."""
    sent = st.session_state.setdefault(SENT, {})
    try:
        if sent.get("lesson") != lesson:
            store.set_lesson(me.code, me.secret, lesson)
            sent["lesson"] = lesson
        state = store.state(me.code, token=me.secret)
    except ClassGone:
        class_ended(store, "Close the desk")
        return None
    except ClassroomError as exc:
        notice(exc)
        leave_button()
        return None
    follow_class(state, lesson)
    return state


def follow_class(state: ClassState, lesson: str) -> None:
    """A desk whose page shows another lesson than the class's (another desk of this class moved it) moves there."""
    if state.lesson is not None and state.lesson != lesson:
        st.session_state[FOLLOW] = state.lesson
        st.session_state.setdefault(SENT, {})["lesson"] = state.lesson
        st.rerun(scope="app")


@st.fragment(run_every=POLL_S)
def desk_live(
    store: ClassroomStore,
    me: Seat,
    lesson: str,
    unit: str,
    questions: Questions,
    run_result: Callable[[], str | None],
    page_redraws: bool,
    result_page: ResultPage | None,
) -> None:
    """The live part of the desk, redrawn every POLL_S seconds on its own. A Reveal is handled before the desk reads the
    class (the button's value is set before the run its click starts), so this run draws the class as revealed. It
    reads the class's lesson from the store: another desk that moved the class takes this page along (follow_class),
    and an ended class reruns the page (which says so)."""
    if st.session_state.get("class_reveal") and reveal(store, me, lesson, run_result, result_page) and page_redraws:
        st.rerun(scope="app")  # the teacher's own page shows the result too (folded until now, or a live run)
    try:
        state = store.state(me.code, token=me.secret)
        follow_class(state, lesson)
        values = store.predictions(me.code, lesson, token=me.secret)
        counts = store.answer_counts(me.code, lesson, token=me.secret)
    except ClassGone:
        st.rerun(scope="app")  # the page's run says the class has ended, and offers to close the desk
    except ClassroomError as exc:
        notice(exc)
        return
    st.markdown(f"**{views.count_label(len(values))}** · {views.count_label(state.students, 'student')} joined")
    desk_predictions(tuple(values), unit)
    revealed = state.result_json is not None
    again = "run once more" if page_redraws else "share the recording once more"  # a recording is shared, not run
    label = f"Reveal again ({again})" if revealed else "Reveal"
    st.button(label, key="class_reveal", type="primary", icon=":material/visibility:")
    if revealed:
        st.caption("Revealed: every student's page shows this result and the class's predictions.")
    if questions:
        desk_answers(store, me, lesson, counts, questions, state.answers_revealed)
    with st.expander(f"Who joined ({state.students})"):
        try:
            st.markdown(views.roster_markdown(store.roster(me.code, me.secret)))
        except ClassroomError as exc:
            notice(exc)


def desk_answers(store: ClassroomStore, me: Seat, lesson: str, counts: dict, questions: Questions, shown: bool) -> None:
    """The class's answers per option (the right one marked once the answers are out), and 'Reveal the answers',
    which waits for a first answer. The click reveals them before the run it starts (a callback), so that run's table
    reads them as out."""
    st.markdown("**Check questions: the class's answers**")
    st.dataframe(views.answer_rows(counts, questions, mark=shown), hide_index=True, key="class_answers")
    if shown:
        st.caption("The answers are out: every student's page shows these counts, the right option marked.")
    elif not counts:
        st.caption("No answers yet: Reveal the answers once the class has answered.")
    st.button(
        "Reveal the answers", key="class_reveal_answers", disabled=shown or not counts, on_click=reveal_answers, args=(store, me, lesson)
    )


def reveal_answers(store: ClassroomStore, me: Seat, lesson: str) -> None:
    try:
        store.reveal_answers(me.code, me.secret, lesson)
    except ClassroomError as exc:
        notice(exc)


def reveal(store: ClassroomStore, me: Seat, lesson: str, run_result: Callable[[], str | None], result_page: ResultPage | None) -> bool:
    """Run the class's one result (`run_result`) and give it to the class, each student's page as a file first
    (publish_pages); False after saying why not."""
    result = run_result()
    if result is None:
        return False
    pages = None
    if result_page is not None and watch.serving(store):
        pages = lambda version, seats: publish_pages(store, me.code, version, seats, result, result_page)  # noqa: E731
    try:
        store.reveal(me.code, me.secret, lesson, result, prepare=pages)
    except ClassroomError as exc:
        notice(exc)
        return False
    return True


def publish_pages(store: ClassroomStore, code: str, version: int, seats: list, result: str, result_page: ResultPage) -> None:
    """At a Reveal, before the class's number moves: each student's revealed result (`result_page`, with the class's
    predictions and their own) as a file (ClassBeacons.publish_results). A page that sees the number move fetches its
    file and shows it before its Streamlit run (watch.js): 30 pages showing a Reveal wait on a fetch each, not on 30
    runs drawn by 30 browsers (issue 41). Never fails the Reveal: a page without its file asks its run, as before."""
    values = tuple(sorted(v for _, v in seats if v is not None))
    try:
        pages = {sid: page for sid, mine in seats if (page := result_page(result, values, mine)) is not None}
        store.beacons.publish_results(code, version, pages)
    except (OSError, ValueError, KeyError, TypeError):  # an unwritable folder, or a result no page could draw
        return


@st.cache_data(max_entries=64, show_spinner=False)
def desk_predictions(values: tuple, unit: str) -> None:
    """The desk's figure of the class's predictions (the teacher's one browser draws plotly), built once per set of
    predictions and replayed at each tick (~1 ms against ~20 ms of server CPU to build it)."""
    st.plotly_chart(views.predictions_figure(list(values), unit), key="class_predictions", config={"displayModeBar": False})
