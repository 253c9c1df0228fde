"""What the Lessons page asks a student: the prediction box (its number checked here, in one line) and the check
questions, each on its own or, in a class session, with the class's rules (app/lessons/kit/class_page.py): the first
answer counts and right or wrong waits for the teacher's reveal."""

from __future__ import annotations

import streamlit as st

from app.lessons.kit.experiment import Experiment

GUESS_MAX = 1000  # a prediction is a number from 0 to this


def prediction(i: int, experiment: Experiment, settings: dict):
    """The student's prediction: the checked number, or None (empty, or refused in one line). The box takes any number
    and the page checks it (checked_guess): a bounded box showed the browser's own range error beside the old value,
    and a whole-number box cut 2.5 to 2 and read 1e9 as 1, silently (class review, 2026-12-07)."""
    whole = experiment.predict.whole  # a count takes whole numbers
    value = st.number_input(
        f"Your prediction: {experiment.predict.question.format(**settings)}",
        value=None,
        step=1.0 if whole else 0.05,
        format="%g" if whole else "%.2f",
        placeholder=experiment.predict.placeholder,
        key=f"l{i}_guess",
    )
    guess, problem = checked_guess(value, whole)
    if problem:
        st.warning(problem, icon=":material/edit:")
    return guess


def checked_guess(value, whole: bool) -> tuple[int | float | None, str | None]:
    """(the guess, None), or (None, one line saying why this number is not taken)."""
    if value is None:
        return None, None
    number = float(value)
    if not 0 <= number <= GUESS_MAX:  # NaN fails this too
        return None, f"A prediction lies between 0 and {GUESS_MAX}; {number:g} was not taken."
    if whole and number != int(number):
        return None, f"This prediction counts something, so it is a whole number; {number:g} was not taken."
    return (int(number) if whole else number), None


def show_checks(i: int, lesson, in_class=None) -> None:
    """The check questions, each answer's right or wrong at once; in a class (`in_class`, class_page.ClassChecks) a
    student's first answer is sent and locks its question, and right or wrong shows only once the teacher reveals the
    answers (else a classmate's screen would give them away, and a changed answer would count as right)."""
    st.subheader("Check your understanding")
    if lesson.checks_problem:
        st.error(lesson.checks_problem, icon=":material/error:")
        return
    if in_class is not None and in_class.note:
        st.caption(in_class.note)
    for j, check in enumerate(lesson.checks, start=1):
        key = f"l{i}_check{j}"
        kept = None if in_class is None else in_class.mine.get(j)
        if kept is not None:
            st.session_state[key] = kept  # the answer the class counts (after a reload or a change of lesson too)
        send = None if in_class is None or kept is not None else (lambda q=j, k=key: in_class.send(q, st.session_state.get(k)))
        answer = st.radio(
            f"{j}. {check.question}",
            list(range(len(check.options))),
            index=None,
            key=key,
            format_func=lambda o, c=check: c.options[o],
            disabled=kept is not None,
            on_change=send,  # sent before the run: this run reads it back as the class's, and locks the question
        )
        shown = answer if kept is None else kept
        if shown is None:
            continue
        if in_class is None or in_class.revealed:
            (st.success if shown == check.answer else st.error)(
                ("Right. " if shown == check.answer else f"Not quite: the answer is “{check.options[check.answer]}”. ") + check.explain
            )
        elif kept is not None:
            st.caption("Your answer is in the class's count; the right one shows when the teacher reveals the answers.")
