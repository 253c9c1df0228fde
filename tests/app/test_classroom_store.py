"""The class-session store (app/classroom/store.py, issue 29): concurrency, restarts, expiry, every cap, schema
migration, and bad input. Plain SQLite files in tmp_path; no streamlit, no model."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.classroom import inputs, schema
from app.classroom.inputs import CODE_BITS, ClassroomError, Limits
from app.classroom.schema import MIGRATIONS, SCHEMA_VERSION
from app.classroom.store import ClassroomStore

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_800_000_000.0  # a fixed "now": every call below passes its own time


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "classes.sqlite3"


def _rows(path: Path) -> dict[str, int]:
    """Row counts read with a plain sqlite3 connection (not through the store)."""
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("classes", *schema.CLASS_TABLES)}
    finally:
        conn.close()


def _one_line(exc: ClassroomError) -> str:
    text = str(exc)
    assert text and "\n" not in text and len(text) < 200
    return text


def test_a_class_from_start_to_revealed_answers(db):
    s = ClassroomStore(db)
    code, token = s.create_class(now=T0)
    assert len(code) == 10 and CODE_BITS == 50 and len(token) >= 43  # 32 bytes urlsafe: 256 bits
    s.set_lesson(code, token, 3, now=T0)
    ann, bob = s.join(code, "Ann", now=T0), s.join(code, None, now=T0)
    s.predict(code, ann, 3, 2.0, now=T0)
    s.predict(code, bob, 3, "1.5", now=T0)
    s.predict(code, ann, 3, 2.5, now=T0 + 1)  # replaces her first
    teacher = s.state(code, token=token, now=T0 + 2)
    assert (teacher.role, teacher.lesson, teacher.students, teacher.predictions) == ("teacher", "3", 2, 2)
    assert teacher.result_json is None and s.predictions(code, 3, token=token, now=T0) == [1.5, 2.5]
    with pytest.raises(ClassroomError, match="once the teacher reveals the result"):
        s.predictions(code, 3, student_id=bob, now=T0)
    result = json.dumps({"speedup": 1.7})
    s.reveal(code, token, 3, result, now=T0 + 3)
    for sid, mine in ((ann, 2.5), (bob, 1.5)):
        seen = s.state(code, student_id=sid, now=T0 + 4)
        assert seen.result_json == result and seen.predictions == 2 and seen.my_prediction == mine
        assert s.predictions(code, 3, student_id=sid, now=T0 + 4) == [1.5, 2.5]
    s.answer(code, ann, 3, 1, 0, now=T0 + 5)
    s.answer(code, bob, 3, 1, 2, now=T0 + 5)
    with pytest.raises(ClassroomError, match="counts your first answer"):
        s.answer(code, bob, 3, 1, 0, now=T0 + 6)  # a change of mind is refused: the first answer counts
    assert s.answer_counts(code, 3, token=token, now=T0 + 6) == {1: {0: 1, 2: 1}}
    with pytest.raises(ClassroomError, match="once the teacher reveals them"):
        s.answer_counts(code, 3, student_id=ann, now=T0 + 6)
    s.reveal_answers(code, token, 3, now=T0 + 7)
    assert s.answer_counts(code, 3, student_id=ann, now=T0 + 7) == {1: {0: 1, 2: 1}}
    assert s.my_answers(code, bob, 3, now=T0 + 7) == ({1: 2}, True) and s.my_answers(code, ann, 4, now=T0 + 7) == ({}, False)
    assert s.state(code, student_id=ann, now=T0 + 7).answers_revealed
    assert s.roster(code, token, now=T0 + 7) == ["Ann", ""]


def test_predictions_and_answers_close_when_their_result_is_out(db):
    """A guess changed after the Reveal, or an answer after the answers, would be a copy of the result: refused in one
    line, the class's count as it was, and a lesson not yet revealed still open."""
    s = ClassroomStore(db)
    code, token = s.create_class(now=T0)
    s.set_lesson(code, token, 3, now=T0)
    ann, bob = s.join(code, "Ann", now=T0), s.join(code, "Bob", now=T0)
    s.predict(code, ann, 3, 1.5, now=T0)
    s.reveal(code, token, 3, json.dumps({"speedup": 2.1}), now=T0 + 1)
    for sid, value in ((ann, 2.1), (bob, 2.0)):  # the one who guessed and the one who had not
        with pytest.raises(ClassroomError, match="predictions for this lesson are closed") as exc:
            s.predict(code, sid, 3, value, now=T0 + 2)
        _one_line(exc.value)
    assert s.predictions(code, 3, token=token, now=T0 + 2) == [1.5]
    assert s.state(code, student_id=ann, now=T0 + 2).my_prediction == 1.5
    s.reveal(code, token, 3, json.dumps({"speedup": 2.2}), now=T0 + 3)  # Reveal again: still closed
    with pytest.raises(ClassroomError, match="closed"):
        s.predict(code, bob, 3, 2.2, now=T0 + 3)
    assert s.predict(code, bob, 4, 1.2, now=T0 + 3) == 1.2  # another lesson is open
    s.answer(code, ann, 3, 1, 0, now=T0 + 4)
    with pytest.raises(ClassroomError, match="You answered question 1 already") as exc:
        s.answer(code, ann, 3, 1, 1, now=T0 + 5)  # her first answer is the one counted, even before the answers are out
    _one_line(exc.value)
    s.reveal_answers(code, token, 3, now=T0 + 6)
    with pytest.raises(ClassroomError, match="questions are closed") as exc:
        s.answer(code, bob, 3, 1, 1, now=T0 + 7)
    _one_line(exc.value)
    assert s.answer_counts(code, 3, token=token, now=T0 + 7) == {1: {0: 1}}


def test_students_cannot_act_as_the_teacher(db):
    s = ClassroomStore(db)
    code, token = s.create_class(now=T0)
    sid = s.join(code, now=T0)
    for call in (
        lambda: s.set_lesson(code, sid, 2, now=T0),
        lambda: s.reveal(code, sid, 2, "{}", now=T0),
        lambda: s.reveal_answers(code, sid, 2, now=T0),
        lambda: s.roster(code, sid, now=T0),
        lambda: s.end_class(code, sid, now=T0),
    ):
        with pytest.raises(ClassroomError, match="teacher link is not valid"):
            call()
    assert s.state(code, token=token, now=T0).lesson is None


def test_many_threads_writing_at_once_lose_nothing(db):
    """40 students (half on one shared store object, half each on their own, as separate server processes would
    be) join, predict five times and answer, all at once: every write lands, in order per student."""
    limits = Limits(joins_per_client_per_minute=1000)
    shared = ClassroomStore(db, limits=limits)
    code, token = shared.create_class(now=T0)
    shared.set_lesson(code, token, 1, now=T0)
    n, errors, ids = 40, [], {}
    start = threading.Barrier(n)

    def student(i: int) -> None:
        s = shared if i % 2 else ClassroomStore(db, limits=limits)
        start.wait()
        try:
            sid = s.join(code, f"s{i}", client=f"c{i}", now=T0 + 1)
            for k in range(5):
                s.predict(code, sid, 1, i + k / 10, now=T0 + 2 + k)
            s.answer(code, sid, 1, 1, i % 3, now=T0 + 10)
            ids[i] = sid
        except (ClassroomError, sqlite3.Error) as exc:
            errors.append(exc)

    threads = [threading.Thread(target=student, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and len(ids) == n
    assert shared.predictions(code, 1, token=token, now=T0 + 11) == sorted(i + 0.4 for i in range(n))
    assert shared.answer_counts(code, 1, token=token, now=T0 + 11) == {1: {0: 14, 1: 13, 2: 13}}
    state = shared.state(code, token=token, now=T0 + 11)
    assert state.students == n and state.predictions == n
    assert state.version == 1 + n * (1 + 5 + 1)  # every write bumped it once: none was lost
    assert _rows(db)["predictions"] == n and _rows(db)["answers"] == n


def test_the_creation_cap_holds_under_a_race(db):
    s = ClassroomStore(db, limits=Limits(classes_per_hour=10))
    made, refused = [], []
    start = threading.Barrier(20)

    def create() -> None:
        start.wait()
        try:
            made.append(s.create_class(now=T0))
        except ClassroomError as exc:
            refused.append(_one_line(exc))

    threads = [threading.Thread(target=create) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(made) == 10 and len(refused) == 10 and all("last hour" in r for r in refused)
    assert len({code for code, _ in made}) == 10 and _rows(db)["classes"] == 10


def test_a_class_survives_a_restart(db):
    """The server dies in the middle of a class (another process wrote and exited without closing anything);
    a new store object on the same file carries on with the same code, token and student ids."""
    script = f"""
import json, os, sys
from app.classroom.store import ClassroomStore
s = ClassroomStore({str(db)!r})
code, token = s.create_class(now={T0})
s.set_lesson(code, token, 5, now={T0})
sid = s.join(code, "Ann", now={T0})
s.predict(code, sid, 5, 3.25, now={T0})
print(json.dumps([code, token, sid]), flush=True)
os._exit(0)  # no cleanup at all, as in a killed server
"""
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    code, token, sid = json.loads(out.stdout.strip().splitlines()[-1])
    s = ClassroomStore(db)  # the restarted server
    state = s.state(code, student_id=sid, now=T0 + 60)
    assert (state.lesson, state.my_prediction, state.nickname, state.students) == ("5", 3.25, "Ann", 1)
    s.predict(code, sid, 5, 4.0, now=T0 + 61)
    s.reveal(code, token, 5, '{"ok": true}', now=T0 + 62)
    again = ClassroomStore(db)  # and once more
    assert again.state(code, student_id=sid, now=T0 + 63).result_json == '{"ok": true}'
    assert again.predictions(code, 5, token=token, now=T0 + 63) == [4.0]


def test_classes_expire_after_12_hours_and_are_deleted(db):
    s = ClassroomStore(db)
    code, token = s.create_class(now=T0)
    sid = s.join(code, "Ann", now=T0)
    s.set_lesson(code, token, 1, now=T0)
    s.predict(code, sid, 1, 1.0, now=T0)
    s.answer(code, sid, 1, 1, 1, now=T0)
    s.reveal(code, token, 1, "{}", now=T0)
    s.reveal_answers(code, token, 1, now=T0)
    end = T0 + 12 * 3600
    assert s.state(code, token=token, now=end - 1).students == 1  # still running a second before
    for call in (
        lambda: s.state(code, token=token, now=end),
        lambda: s.predict(code, sid, 1, 2.0, now=end),
        lambda: s.join(code, now=end + 1),
    ):
        with pytest.raises(ClassroomError, match="No class with that code is running"):
            call()
    assert s.purge(now=end) == 0  # join's purge already deleted it ...
    assert _rows(db) == dict.fromkeys(("classes", *schema.CLASS_TABLES), 0)  # ... with every row it had


def test_purge_deletes_only_expired_classes(db):
    s = ClassroomStore(db)
    old, _ = s.create_class(now=T0)
    s.join(old, now=T0)
    new, token = s.create_class(now=T0 + 6 * 3600)
    s.join(new, now=T0 + 6 * 3600)
    assert s.purge(now=T0 + 12 * 3600) == 1
    assert _rows(db)["classes"] == 1 and _rows(db)["students"] == 1
    assert s.state(new, token=token, now=T0 + 12 * 3600).students == 1


def test_early_end_deletes_the_class(db):
    s = ClassroomStore(db)
    code, token = s.create_class(now=T0)
    s.join(code, now=T0)
    s.end_class(code, token, now=T0 + 1)
    assert _rows(db)["classes"] == 0 and _rows(db)["students"] == 0


def test_cap_on_classes_per_hour(db):
    s = ClassroomStore(db, limits=Limits(classes_per_hour=3))
    for k in range(3):
        s.create_class(now=T0 + k)
    with pytest.raises(ClassroomError, match="3 classes were started on this server in the last hour"):
        s.create_class(now=T0 + 10)
    assert s.create_class(now=T0 + 3600.5)  # the first has left the hour's window


def test_cap_on_students_per_class(db):
    s = ClassroomStore(db, limits=Limits(students_per_class=3))
    code, _ = s.create_class(now=T0)
    for k in range(3):
        s.join(code, client=f"c{k}", now=T0)
    with pytest.raises(ClassroomError, match=r"This class is full \(3 students\)"):
        s.join(code, client="c9", now=T0)
    assert _rows(db)["students"] == 3
    assert Limits().students_per_class == 300


def test_cap_on_rows_per_class(db):
    s = ClassroomStore(db, limits=Limits(rows_per_class=4))
    code, token = s.create_class(now=T0)
    sid = s.join(code, now=T0)
    for lesson in ("a", "b", "c"):
        s.predict(code, sid, lesson, 1.0, now=T0)
    s.answer(code, sid, "a", 1, 0, now=T0)  # the 4th row
    with pytest.raises(ClassroomError, match="cap of 4 saved answers"):
        s.predict(code, sid, "d", 1.0, now=T0)
    with pytest.raises(ClassroomError, match="cap of 4 saved answers"):
        s.reveal(code, token, "a", "{}", now=T0)
    s.predict(code, sid, "a", 2.0, now=T0)  # replacing a row is still allowed
    assert s.predictions(code, "a", token=token, now=T0) == [2.0]
    assert sum(_rows(db)[t] for t in ("predictions", "answers", "results")) == 4


def test_cap_on_nickname_length_and_nicknames_are_stored_as_text(db):
    s = ClassroomStore(db)
    code, token = s.create_class(now=T0)
    with pytest.raises(ClassroomError, match="at most 24 characters; this one has 25"):
        s.join(code, "x" * 25, now=T0)
    with pytest.raises(ClassroomError, match="control characters"):
        s.join(code, "a\u202eb", now=T0)  # right-to-left override
    hostile = "<img src=x onerror=1>"
    s.join(code, f"  {hostile} ", now=T0)
    s.join(code, "Zoë\n  K", now=T0)
    assert s.roster(code, token, now=T0) == [hostile, "Zoë K"]  # kept verbatim, to be escaped where shown


def test_cap_on_result_size(db):
    s = ClassroomStore(db, limits=Limits(result_bytes=100))
    code, token = s.create_class(now=T0)
    with pytest.raises(ClassroomError, match="at most 100 bytes"):
        s.reveal(code, token, 1, json.dumps("x" * 200), now=T0)
    s.reveal(code, token, 1, json.dumps("x" * 50), now=T0)


def test_joins_are_rate_limited_per_client(db):
    s = ClassroomStore(db, limits=Limits(joins_per_client_per_minute=5))
    code, _ = s.create_class(now=T0)
    for k in range(5):
        s.join(code, client="10.0.0.1", now=T0 + k)
    with pytest.raises(ClassroomError, match="Too many attempts to join from here"):
        s.join(code, client="10.0.0.1", now=T0 + 10)
    s.join(code, client="10.0.0.2", now=T0 + 10)  # another client is not held up
    s.join(code, client="10.0.0.1", now=T0 + 61)  # nor this one after a minute


def test_wrong_codes_are_rate_limited_for_everyone(db):
    """Guessing codes: the failed attempts are recorded (even though each one raises) and, past the cap, every
    join waits a minute, so no more than the cap of guesses per minute reach the class table."""
    s = ClassroomStore(db, limits=Limits(failed_joins_per_minute=10))
    code, _ = s.create_class(now=T0)
    wrong = "0000000000" if code != "0000000000" else "1111111111"
    for k in range(10):
        with pytest.raises(ClassroomError, match="No class with that code"):
            s.join(wrong, client=f"bot{k}", now=T0 + 1)
    with pytest.raises(ClassroomError, match="wrong codes right now"):
        s.join(code, client="teacher-room", now=T0 + 2)
    assert s.join(code, client="teacher-room", now=T0 + 62)


@pytest.mark.parametrize(
    "value,why",
    [
        (math.nan, "finite"),
        ("nan", "finite"),
        (math.inf, "finite"),
        ("-inf", "finite"),
        (1e7, "between"),
        ("1e300", "between"),
        (-2e6, "between"),
        ("abc", "a number"),
        ("", "a number"),
        (True, "a number"),
        (None, "a number"),
        ([1], "a number"),
        ({"v": 1}, "a number"),
        ("9" * 100, "a number"),
    ],
)
def test_nonsense_predictions_are_refused(db, value, why):
    s = ClassroomStore(db)
    code, token = s.create_class(now=T0)
    sid = s.join(code, now=T0)
    with pytest.raises(ClassroomError, match=why) as got:
        s.predict(code, sid, 1, value, now=T0)
    _one_line(got.value)
    assert s.predictions(code, 1, token=token, now=T0) == []


def test_bad_inputs_each_get_one_line(db):
    s = ClassroomStore(db)
    code, token = s.create_class(now=T0)
    other, other_token = s.create_class(now=T0)
    sid = s.join(code, now=T0)
    stranger = s.join(other, now=T0)
    before = s.state(code, token=token, now=T0).version
    unknown = "ZZZZZZZZZZ" if code != "ZZZZZZZZZZ" else "YYYYYYYYYY"
    cases = {
        "unknown code": (lambda: s.state(unknown, token=token, now=T0), "No class with that code is running"),
        "malformed code": (lambda: s.join("abc<script>", now=T0), "not a class code"),
        "code not text": (lambda: s.join(12345, now=T0), "not a class code"),
        "wrong token": (lambda: s.set_lesson(code, other_token, 1, now=T0), "teacher link is not valid"),
        "empty token": (lambda: s.reveal(code, "", 1, "{}", now=T0), "teacher link is not valid"),
        "token not text": (lambda: s.reveal(code, 7, 1, "{}", now=T0), "teacher link is not valid"),
        "no credential": (lambda: s.state(code, now=T0), "Join the class first"),
        "student of another class": (lambda: s.predict(code, stranger, 1, 1.0, now=T0), "not in this class"),
        "made-up student": (lambda: s.state(code, student_id="x" * 16, now=T0), "not in this class"),
        "hostile student id": (lambda: s.predict(code, "'; DROP TABLE students;--", 1, 1, now=T0), "student id"),
        "bad lesson": (lambda: s.predict(code, sid, "../etc", 1.0, now=T0), "not a lesson"),
        "negative lesson": (lambda: s.set_lesson(code, token, -1, now=T0), "not a lesson"),
        "question 0": (lambda: s.answer(code, sid, 1, 0, 1, now=T0), "not a question"),
        "negative option": (lambda: s.answer(code, sid, 1, 1, -1, now=T0), "not a choice"),
        "option as bool": (lambda: s.answer(code, sid, 1, 1, True, now=T0), "not a choice"),
        "result not JSON": (lambda: s.reveal(code, token, 1, "{oops", now=T0), "JSON"),
        "result not text": (lambda: s.reveal(code, token, 1, {"a": 1}, now=T0), "JSON text"),
    }
    for name, (call, fragment) in cases.items():
        with pytest.raises(ClassroomError) as got:
            call()
        text = _one_line(got.value)
        assert fragment in text, (name, text)
        assert token not in text and other_token not in text
    assert _rows(db)["students"] == 2 and s.state(code, token=token, now=T0).version == before  # nothing changed


def test_codes_are_forgiving_to_type(db):
    s = ClassroomStore(db)
    code, token = s.create_class(now=T0)
    typed = f" {code[:5].lower()}-{code[5:]} ".replace("0", "o").replace("1", "l")
    sid = s.join(typed, now=T0)
    assert s.state(code, student_id=sid, now=T0).code == code


def test_the_token_is_stored_only_as_a_hash(db):
    s = ClassroomStore(db)
    code, token = s.create_class(now=T0)
    raw = b"".join(p.read_bytes() for p in db.parent.glob("classes.sqlite3*"))  # the file, its WAL and index
    assert code.encode() in raw and token.encode() not in raw
    assert token not in repr(s)


def test_migration_from_schema_version_1(db):
    """A file written by the first schema (before check answers existed), with a class in it, is brought to the
    newest version on open; its class carries on and the new tables work."""
    conn = sqlite3.connect(db, isolation_level=None)
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version VALUES (1)")
    code, token, sid = "ABCDE12345", "t" * 43, "s" * 16  # a class as the version-1 build wrote it
    conn.execute("INSERT INTO classes VALUES (?, ?, ?, ?, '1', 3, 1)", (code, inputs._sha256(token), T0, T0 + 43200))
    conn.execute("INSERT INTO students VALUES (?, ?, 'Ann', ?)", (sid, code, T0))
    conn.execute("INSERT INTO predictions VALUES (?, '1', ?, 2.0, ?)", (code, sid, T0))
    assert "answers" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()

    s = ClassroomStore(db)  # the new build opens the old file
    assert schema.schema_version(s) == SCHEMA_VERSION == 2
    assert s.state(code, student_id=sid, now=T0).my_prediction == 2.0
    s.answer(code, sid, 1, 1, 0, now=T0)
    s.reveal_answers(code, token, 1, now=T0)
    assert s.answer_counts(code, 1, student_id=sid, now=T0) == {1: {0: 1}}
    assert schema.schema_version(ClassroomStore(db)) == 2  # opening again changes nothing


def test_a_file_from_a_newer_speclab_is_refused(db):
    ClassroomStore(db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE schema_version SET version = 99")
    conn.close()
    with pytest.raises(ClassroomError, match="schema version 99, newer than this SpecLab knows"):
        ClassroomStore(db)


def test_wal_mode_and_where_the_file_goes(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECLAB_DATA", str(tmp_path / "data"))
    s = ClassroomStore()
    assert s.path == tmp_path / "data" / "classes.sqlite3" and s.path.exists() and s.journal_mode == "wal"
    monkeypatch.delenv("SPECLAB_DATA")
    assert inputs.default_data_dir() in (Path("/data/speclab"), Path.home() / ".cache" / "speclab")


def test_the_store_imports_neither_streamlit_nor_torch():
    code = "import sys, app.classroom.store; print(sorted(m for m in ('streamlit', 'torch', 'plotly') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert out.stdout.strip() == "[]"


def test_the_version_a_poll_reads_moves_with_every_change_and_only_then(db):
    """A poll's one read (issue 41): the class's version changes with each write to that class (a lesson opened, a
    join, a prediction, a reveal) and with nothing else; an unknown or ended class reads None."""
    s = ClassroomStore(db)
    code, token = s.create_class(now=T0)
    v0 = s.version(code, now=T0)
    assert v0 is not None and s.version(code, now=T0 + 1) == v0  # reading changes nothing
    s.set_lesson(code, token, 2, now=T0)
    ann = s.join(code, "Ann", now=T0)  # a join is a write too (the teacher's count changes)
    v1 = s.version(code, now=T0)
    s.state(code, student_id=ann, now=T0)  # a student's read
    s.predictions(code, 2, token=token, now=T0)  # the teacher's read
    assert s.version(code, now=T0) == v1
    s.predict(code, ann, 2, 1.5, now=T0)
    v2 = s.version(code, now=T0)
    s.reveal(code, token, 2, json.dumps({"x": 1}), now=T0)
    v3 = s.version(code, now=T0)
    assert v0 < v1 < v2 < v3 and s.state(code, student_id=ann, now=T0).version == v3
    other, other_token = s.create_class(now=T0)
    s.set_lesson(other, other_token, 1, now=T0)
    assert s.version(code, now=T0) == v3  # another class's writes leave this one's version alone
    assert s.version("ABCDEFGHJK", now=T0) is None and s.version(code, now=T0 + 13 * 3600) is None


def test_a_class_behind_one_address_can_all_join_within_a_minute(db):
    """A school's class shares one public address: 30 students from it join in the same minute; the 61st is refused."""
    s = ClassroomStore(db)
    code, _ = s.create_class(now=T0)
    for n in range(60):
        s.join(code, f"s{n}", client="203.0.113.7", now=T0 + n * 0.5)
    with pytest.raises(ClassroomError, match="Too many attempts to join from here"):
        s.join(code, "late", client="203.0.113.7", now=T0 + 31)


def test_a_nickname_is_one_students_and_a_cleared_prediction_leaves_the_count(db):
    """Two students cannot join one class under one nickname (the roster would not tell them apart: one line says so,
    and it is no wrong code); a prediction cleared before the Reveal is withdrawn, after it the class keeps it."""
    s = ClassroomStore(db)
    code, token = s.create_class(now=T0)
    s.set_lesson(code, token, 2, now=T0)
    ann = s.join(code, "Ann", now=T0)
    with pytest.raises(ClassroomError, match="already goes by “Ann”") as exc:
        s.join(code, " Ann ", now=T0 + 1)
    _one_line(exc.value)
    assert s.roster(code, token, now=T0 + 1) == ["Ann"]
    assert s.join(code, "", now=T0 + 1) and s.join(code, None, now=T0 + 1)  # no nickname: as many as like
    s.predict(code, ann, 2, 1.5, now=T0 + 2)
    assert s.withdraw(code, ann, 2, now=T0 + 3) and not s.withdraw(code, ann, 2, now=T0 + 3)
    assert s.predictions(code, 2, token=token, now=T0 + 3) == [] and s.state(code, student_id=ann, now=T0 + 3).my_prediction is None
    s.predict(code, ann, 2, 1.7, now=T0 + 4)
    s.reveal(code, token, 2, json.dumps({"speedup": 2.0}), now=T0 + 5)
    with pytest.raises(ClassroomError, match="the class keeps the one you sent"):
        s.withdraw(code, ann, 2, now=T0 + 6)
    assert s.predictions(code, 2, token=token, now=T0 + 6) == [1.7]
