"""The class store's reads (app/classroom/store.py's ClassroomStore takes them from StoreReads): one poll's ClassState,
the class's change number, the predictions and answer counts (a student's only once revealed), and a student's own
answers. Each is one short read transaction through the store's `_tx` and its viewer checks."""

from __future__ import annotations

import time
from dataclasses import dataclass

from app.classroom.inputs import ClassroomError, lesson_key, normalize_code


@dataclass(frozen=True)
class ClassState:
    """What one poll returns: the class as its teacher (role "teacher") or one student sees it now."""

    code: str
    role: str  # "teacher" | "student"
    lesson: str | None  # the lesson the teacher has open (None before the first one)
    version: int  # grows with every change: a poller redraws only when it moved
    students: int
    expires_at: float
    predictions: int  # for the current lesson
    result_json: str | None  # the current lesson's revealed result, None before Reveal
    answers_revealed: bool  # for the current lesson
    my_prediction: float | None = None  # a student's own, for the current lesson
    nickname: str | None = None  # a student's own


class StoreReads:
    """ClassroomStore's reads (it gives `_tx` and `_viewer`)."""

    def predictions(
        self, code: object, lesson: object, *, token: object = None, student_id: object = None, now: float | None = None
    ) -> list[float]:
        """The class's predictions for `lesson`, sorted. Students see them only once the result is revealed."""
        now = time.time() if now is None else now
        key = lesson_key(lesson)
        with self._tx(write=False) as c:
            row, role = self._viewer(c, code, token, student_id, now)
            if role == "student" and c.one("SELECT 1 FROM results WHERE code = ? AND lesson = ?", row[0], key) is None:
                raise ClassroomError("The class's predictions are shown once the teacher reveals the result.")
            return [r[0] for r in c.all("SELECT value FROM predictions WHERE code = ? AND lesson = ? ORDER BY value", row[0], key)]

    def answer_counts(
        self, code: object, lesson: object, *, token: object = None, student_id: object = None, now: float | None = None
    ) -> dict[int, dict[int, int]]:
        """question -> {option: how many chose it} for `lesson`. Students see them once the teacher reveals them."""
        now = time.time() if now is None else now
        key = lesson_key(lesson)
        with self._tx(write=False) as c:
            row, role = self._viewer(c, code, token, student_id, now)
            shown = c.one("SELECT 1 FROM answer_reveals WHERE code = ? AND lesson = ?", row[0], key) is not None
            if role == "student" and not shown:
                raise ClassroomError("The class's answers are shown once the teacher reveals them.")
            counts: dict[int, dict[int, int]] = {}
            for q, o, n in c.all(
                "SELECT question, choice, COUNT(*) FROM answers WHERE code = ? AND lesson = ? "
                "GROUP BY question, choice ORDER BY question, choice",
                row[0],
                key,
            ):
                counts.setdefault(q, {})[o] = n
            return counts

    def version(self, code: object, now: float | None = None) -> int | None:
        """The class's change counter (bumped by every write to it), for a poll to skip everything else while it stays
        the same: one primary-key read; None where no class with that code is running. It says only that something
        changed, never what: a student's reads still go through state() with the student's id."""
        now = time.time() if now is None else now
        with self._tx(write=False) as c:
            row = c.one("SELECT version FROM classes WHERE code = ? AND expires_at > ?", normalize_code(code), now)
        return row[0] if row else None

    def state(self, code: object, *, token: object = None, student_id: object = None, now: float | None = None) -> ClassState:
        """One poll: the class now, for its teacher (token) or one of its students (student_id)."""
        now = time.time() if now is None else now
        with self._tx(write=False) as c:
            row, role = self._viewer(c, code, token, student_id, now)
            code, lesson = row[0], row[3]
            students = c.one("SELECT COUNT(*) FROM students WHERE code = ?", code)[0]
            count = c.one("SELECT COUNT(*) FROM predictions WHERE code = ? AND lesson = ?", code, lesson)[0]
            result = c.one("SELECT result_json FROM results WHERE code = ? AND lesson = ?", code, lesson)
            shown = c.one("SELECT 1 FROM answer_reveals WHERE code = ? AND lesson = ?", code, lesson) is not None
            mine = nickname = None
            if role == "student":
                got = c.one("SELECT value FROM predictions WHERE code = ? AND lesson = ? AND student_id = ?", code, lesson, student_id)
                mine = got[0] if got else None
                nickname = c.one("SELECT nickname FROM students WHERE student_id = ?", student_id)[0]
        return ClassState(
            code=code,
            role=role,
            lesson=lesson,
            version=row[4],
            students=students,
            expires_at=row[2],
            predictions=count,
            result_json=result[0] if result else None,
            answers_revealed=shown,
            my_prediction=mine,
            nickname=nickname,
        )

    def my_answers(self, code: object, student_id: object, lesson: object, now: float | None = None) -> tuple[dict[int, int], bool]:
        """({question: the option this student chose first}, whether `lesson`'s answers are out) for one student."""
        now = time.time() if now is None else now
        key = lesson_key(lesson)
        with self._tx(write=False) as c:
            row, _ = self._viewer(c, code, None, student_id, now)
            rows = c.all("SELECT question, choice FROM answers WHERE code = ? AND lesson = ? AND student_id = ?", row[0], key, student_id)
            shown = c.one("SELECT 1 FROM answer_reveals WHERE code = ? AND lesson = ?", row[0], key) is not None
        return {q: o for q, o in rows}, shown
