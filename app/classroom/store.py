"""The class-session store (issue 29): classes, students, predictions, revealed results and check answers.

Standard library only (sqlite3; no streamlit, no torch), so the app, the tests and scripts/investigate/class_store_load.py share it.
One SQLite file, `classes.sqlite3` under $SPECLAB_DATA (default: /data/speclab where /data is writable, as on a
Space with persistent storage, else ~/.cache/speclab), in WAL mode: readers (30 students polling) never block the
one writer, and a class survives a server restart because every call opens its own short connection and
commits before it returns (no state lives in the process).

The schema is versioned (app/classroom/schema.py): `schema_version` holds one number and MIGRATIONS is the ordered list of steps that
bring a file from any older version to the newest, each applied in one transaction (a file from a newer
SpecLab is refused, not guessed at).

Security (a public Space, anyone can call any of these with any text):
- class codes: 10 symbols of Crockford base32 = 50 bits from `secrets`. At most Limits.classes_per_hour (30) x 12 h = 360
  classes live at once and at most Limits.failed_joins_per_minute (120) x 60 x 12 = 86,400 wrong-code attempts fit in a
  class's life, so a guesser finds *some* live class with probability <= 86,400 x 360 / 2**50 ~ 3e-8; even
  unthrottled at 1,000 guesses a second for 12 h it stays <= 4e7 x 360 / 2**50 ~ 1.4e-5.
- joins are rate-limited per client (Limits.joins_per_client_per_minute, 60; the client key is what the caller knows,
  e.g. the IP address) and wrong codes globally; state() and every write need a student id or the teacher
  token, so no call is a cheaper oracle for codes than join().
- the teacher token: 256 bits (secrets.token_urlsafe(32)); only its SHA-256 is stored, compared with
  hmac.compare_digest; no message, log line or repr holds a token. Student ids: 96 random bits.
- caps: classes created per hour, students per class, rows per class (predictions + answers + results),
  nickname length, result size; prediction values must be finite and |x| <= 1e6. Classes expire 12 h
  after they start and are deleted by purge() (run by create_class and join, or by anyone).
- every bad input raises ClassroomError with a one-line message meant for the page.
- with `beacons` (app/classroom/beacon.py), a committed change that students' pages show also moves the class's
  change-number file, which those pages poll; the file is named by an HMAC of the code and holds only a number.

Several replicas: SQLite is one file on one machine. The store talks to its database only through
`connect` (a zero-argument callable returning a DB-API connection in autocommit mode) and a Dialect (how a
write transaction begins, the parameter marker). The SQL is the common subset (no SQLite functions; times and
ids come from Python; upserts are UPDATE-then-INSERT), so a shared server database (e.g. PostgreSQL through
psycopg) is `ClassroomStore(connect=lambda: psycopg.connect(DSN, autocommit=True), dialect=Dialect("postgres",
"BEGIN ISOLATION LEVEL SERIALIZABLE", "%s"))`: a connection change. (SQLite-only: the WAL and busy-timeout
PRAGMAs, applied only for the sqlite dialect.)
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from app.classroom.beacon import ClassBeacons
from app.classroom.inputs import (
    DB_NAME,
    STUDENT_ID_BYTES,
    TOKEN_BYTES,
    ClassGone,
    ClassroomError,
    Limits,
    _secret,
    _sha256,
    _small_int,
    clean_nickname,
    default_data_dir,
    lesson_key,
    new_code,
    normalize_code,
    prediction_value,
)
from app.classroom.reads import ClassState, StoreReads
from app.classroom.schema import CLASS_TABLES, SQLITE, Dialect, _Cursor, migrate

__all__ = ["ClassGone", "ClassState", "ClassroomError", "ClassroomStore", "Dialect", "Limits"]

# Each student of a class (code: 2nd ?) with their prediction for a lesson (1st ?) or NULL, in joining order.
SEATS_SQL = "SELECT s.student_id, p.value FROM students s LEFT JOIN predictions p ON p.code = s.code AND p.lesson = ? \
AND p.student_id = s.student_id WHERE s.code = ? ORDER BY s.joined_at"


class ClassroomStore(StoreReads):
    """Classes in one database; every method is one short transaction, safe from many threads at once."""

    def __init__(
        self,
        path: str | os.PathLike | None = None,
        *,
        connect: Callable[[], object] | None = None,
        dialect: Dialect = SQLITE,
        limits: Limits = Limits(),
        beacons: ClassBeacons | None = None,
    ) -> None:
        self.limits = limits
        self.beacons = beacons  # each class's change number as a file a student's page polls (app/classroom/beacon.py)
        self.dialect = dialect
        if connect is None:
            self.path = Path(path) if path is not None else default_data_dir() / DB_NAME
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connect = lambda: sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        else:
            self.path = None
        self._connect = connect
        self.journal_mode = self._setup()

    def __repr__(self) -> str:
        return f"ClassroomStore({str(self.path) if self.path else self.dialect.name!r})"

    # -- connections and transactions
    @contextmanager
    def _conn(self) -> Iterator[object]:
        conn = self._connect()
        try:
            if self.dialect.name == "sqlite":
                conn.execute("PRAGMA busy_timeout = 30000")
                conn.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at checkpoints, never corrupt
            yield conn
        finally:
            conn.close()

    @contextmanager
    def _tx(self, write: bool) -> Iterator[_Cursor]:
        """One transaction: committed when the body returns, rolled back when it raises."""
        with self._conn() as conn:
            conn.execute(self.dialect.begin_write if write else "BEGIN")
            done = False
            try:
                yield _Cursor(conn, self.dialect.marker)
                conn.execute("COMMIT")
                done = True
            finally:
                if not done and getattr(conn, "in_transaction", True):  # SQLite may have rolled back itself
                    conn.execute("ROLLBACK")

    def _setup(self) -> str:
        """WAL mode (SQLite), then the migrations this file lacks, in one transaction."""
        mode = "n/a"
        if self.dialect.name == "sqlite":
            with self._conn() as conn:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        migrate(self)
        return mode

    # -- checks shared by the calls
    def _live_class(self, c: _Cursor, code: str, now: float, lock: bool = False) -> tuple:
        """The class row (code, token_sha256, expires_at, lesson, version, row_count) or ClassroomError. With
        lock=True it first touches the row (bumps its version), which serialises writers to one class on any
        database server."""
        if lock:
            c.run("UPDATE classes SET version = version + 1 WHERE code = ? AND expires_at > ?", code, now)
        row = c.one(
            "SELECT code, token_sha256, expires_at, lesson, version, row_count FROM classes WHERE code = ? AND expires_at > ?", code, now
        )
        if row is None:
            hours = f"{self.limits.class_life_s / 3600:g}"
            raise ClassGone(f"No class with that code is running (a wrong code, or the class has ended: classes last {hours} hours).")
        return row

    def _teacher(self, c: _Cursor, code: object, token: object, now: float, lock: bool = False) -> tuple:
        row = self._live_class(c, normalize_code(code), now, lock)
        given = _sha256(token) if isinstance(token, str) and len(token) <= 128 else ""
        if not hmac.compare_digest(given, row[1]):
            raise ClassroomError("That teacher link is not valid for this class (only its teacher's link is).")
        return row

    def _student(self, c: _Cursor, code: object, student_id: object, now: float, lock: bool = False) -> tuple:
        row = self._live_class(c, normalize_code(code), now, lock)
        sid = _secret(student_id, "student id")
        if c.one("SELECT 1 FROM students WHERE student_id = ? AND code = ?", sid, row[0]) is None:
            raise ClassroomError("You are not in this class: join it again with its link.")
        return row

    def _viewer(self, c: _Cursor, code, token, student_id, now: float) -> tuple[tuple, str]:
        if token is not None:
            return self._teacher(c, code, token, now), "teacher"
        if student_id is not None:
            return self._student(c, code, student_id, now), "student"
        raise ClassroomError("Join the class first (with its link).")

    def _add_row(self, c: _Cursor, row: tuple, table: str, keys: dict, values: dict) -> None:
        """Replace the row of `table` with these keys, or insert it within the class's row cap."""
        sets = ", ".join(f"{k} = ?" for k in values)
        where = " AND ".join(f"{k} = ?" for k in keys)
        if c.run(f"UPDATE {table} SET {sets} WHERE {where}", *values.values(), *keys.values()) == 0:
            if row[5] >= self.limits.rows_per_class:
                raise ClassroomError(f"This class has reached its cap of {self.limits.rows_per_class} saved answers.")
            cols = {**keys, **values}
            c.run(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", *cols.values())
            c.run("UPDATE classes SET row_count = row_count + 1 WHERE code = ?", row[0])

    def _signal(self, code: str, version: int) -> None:
        """After a committed change that students' pages show: the class's beacon file moves to `version` (joins, and
        predictions and answers not yet revealed, show on the desk only, which reads the store itself)."""
        if self.beacons is not None:
            self.beacons.publish(code, version)

    # -- teacher
    def create_class(self, now: float | None = None) -> tuple[str, str]:
        """Start a class: (code, teacher_token). The token is shown once, to the teacher; keep it secret."""
        now = time.time() if now is None else now
        with self._tx(write=True) as c:
            self._purge(c, now)
            started = c.one("SELECT COUNT(*) FROM creations WHERE at > ?", now - 3600)[0]
            if started >= self.limits.classes_per_hour:
                raise ClassroomError(f"{started} classes were started on this server in the last hour (the cap); try again later.")
            code = new_code()
            while c.one("SELECT 1 FROM classes WHERE code = ?", code) is not None:
                code = new_code()  # 50 bits: practically never
            token = secrets.token_urlsafe(TOKEN_BYTES)
            c.run(
                "INSERT INTO classes (code, token_sha256, created_at, expires_at, lesson, version, row_count) "
                "VALUES (?, ?, ?, ?, NULL, 0, 0)",
                code,
                _sha256(token),
                now,
                now + self.limits.class_life_s,
            )
            c.run("INSERT INTO creations (at) VALUES (?)", now)
        return code, token

    def set_lesson(self, code: object, token: object, lesson: object, now: float | None = None) -> None:
        """The teacher opens `lesson`: every following student's page moves there."""
        now = time.time() if now is None else now
        key = lesson_key(lesson)
        with self._tx(write=True) as c:
            row = self._teacher(c, code, token, now, lock=True)
            c.run("UPDATE classes SET lesson = ? WHERE code = ?", key, row[0])
        self._signal(row[0], row[4])

    def reveal(
        self,
        code: object,
        token: object,
        lesson: object,
        result_json: object,
        now: float | None = None,
        prepare: Callable[[int, list[tuple[str, float | None]]], None] | None = None,
    ) -> None:
        """Store THE result of `lesson` (one JSON text; a second reveal replaces it) that every student reads. Then
        `prepare(version after, [(student id, prediction for `lesson` or None)] read in the same transaction)`, before
        the class's beacon moves (app/classroom/panel.py writes each student's result page with it)."""
        now = time.time() if now is None else now
        key = lesson_key(lesson)
        if not isinstance(result_json, str) or len(result_json.encode()) > self.limits.result_bytes:
            raise ClassroomError(f"A result must be JSON text of at most {self.limits.result_bytes:,} bytes.")
        try:
            json.loads(result_json)
        except ValueError:
            raise ClassroomError("A result must be JSON text.") from None
        with self._tx(write=True) as c:
            row = self._teacher(c, code, token, now, lock=True)
            self._add_row(c, row, "results", {"code": row[0], "lesson": key}, {"result_json": result_json, "at": now})
            seats = c.all(SEATS_SQL, key, row[0])
        try:
            if prepare is not None:
                prepare(row[4], [(r[0], r[1]) for r in seats])
        finally:  # stored: the pages hear of it whatever `prepare` did
            self._signal(row[0], row[4])

    def reveal_answers(self, code: object, token: object, lesson: object, now: float | None = None) -> None:
        """Show every student the class's answer counts for `lesson`'s check questions."""
        now = time.time() if now is None else now
        key = lesson_key(lesson)
        with self._tx(write=True) as c:
            row = self._teacher(c, code, token, now, lock=True)
            self._add_row(c, row, "answer_reveals", {"code": row[0], "lesson": key}, {"at": now})
        self._signal(row[0], row[4])

    def roster(self, code: object, token: object, now: float | None = None) -> list[str]:
        """The students' nicknames in joining order ('' for those who gave none): the teacher's to see."""
        now = time.time() if now is None else now
        with self._tx(write=False) as c:
            row = self._teacher(c, code, token, now)
            return [r[0] for r in c.all("SELECT nickname FROM students WHERE code = ? ORDER BY joined_at", row[0])]

    def end_class(self, code: object, token: object, now: float | None = None) -> None:
        """Delete the class and everything in it now (before its 12 hours are up)."""
        now = time.time() if now is None else now
        with self._tx(write=True) as c:
            row = self._teacher(c, code, token, now, lock=True)
            self._delete(c, "code = ?", row[0])
        if self.beacons is not None:
            self.beacons.remove(row[0])

    # -- students
    def join(self, code: object, nickname: object = None, client: str = "", now: float | None = None) -> str:
        """Join a class: a new student id (the caller keeps it, e.g. in the session). `client` names the caller
        for the join rate limit (an IP address, say; '' puts every caller in one bucket)."""
        now = time.time() if now is None else now
        name = clean_nickname(nickname, self.limits.nickname_chars)
        client = str(client)[:64]
        refused: ClassroomError | None = None
        with self._tx(write=True) as c:
            self._purge(c, now)
            recent = c.one("SELECT COUNT(*) FROM join_attempts WHERE client = ? AND at > ?", client, now - 60)[0]
            if recent >= self.limits.joins_per_client_per_minute:
                raise ClassroomError("Too many attempts to join from here; wait a minute and try again.")
            failed = c.one("SELECT COUNT(*) FROM join_attempts WHERE ok = 0 AND at > ?", now - 60)[0]
            if failed >= self.limits.failed_joins_per_minute:
                raise ClassroomError("Too many attempts to join with wrong codes right now; wait a minute and try again.")
            try:
                row = self._live_class(c, normalize_code(code), now, lock=True)
                count = c.one("SELECT COUNT(*) FROM students WHERE code = ?", row[0])[0]
                if count >= self.limits.students_per_class:
                    raise ClassroomError(f"This class is full ({self.limits.students_per_class} students).")
            except ClassroomError as exc:
                refused = exc  # recorded below (the attempt counts), raised after the commit
            if refused is None and name and c.one("SELECT 1 FROM students WHERE code = ? AND nickname = ?", row[0], name) is not None:
                taken = ClassroomError(f"Someone in this class already goes by “{name}”: pick another nickname, or none.")
            else:
                taken = None  # a clash is no wrong code: the attempt counts as a good one
            c.run("INSERT INTO join_attempts (at, client, ok) VALUES (?, ?, ?)", now, client, int(refused is None))
            refused = refused or taken
            if refused is None:
                student_id = secrets.token_urlsafe(STUDENT_ID_BYTES)
                c.run("INSERT INTO students (student_id, code, nickname, joined_at) VALUES (?, ?, ?, ?)", student_id, row[0], name, now)
        if refused is not None:
            raise refused
        return student_id

    def predict(self, code: object, student_id: object, lesson: object, value: object, now: float | None = None) -> float:
        """Commit a student's prediction for `lesson` (a new one replaces the old, until the result is out); returns the stored value."""
        now = time.time() if now is None else now
        key, number = lesson_key(lesson), prediction_value(value, self.limits.prediction_abs_max)
        with self._tx(write=True) as c:  # a guess made after the result is out is no prediction: the class's count is closed
            row = self._student(c, code, student_id, now, lock=True)
            if c.one("SELECT 1 FROM results WHERE code = ? AND lesson = ?", row[0], key) is not None:
                raise ClassroomError(
                    "The result is out, so predictions for this lesson are closed (the class keeps the one you sent before)."
                )
            self._add_row(c, row, "predictions", {"code": row[0], "lesson": key, "student_id": student_id}, {"value": number, "at": now})
        return number

    def withdraw(self, code: object, student_id: object, lesson: object, now: float | None = None) -> bool:
        """Take a student's prediction for `lesson` out of the class's count (they cleared it) until the result is out;
        returns whether there was one."""
        now = time.time() if now is None else now
        key = lesson_key(lesson)
        with self._tx(write=True) as c:
            row = self._student(c, code, student_id, now, lock=True)
            if c.one("SELECT 1 FROM results WHERE code = ? AND lesson = ?", row[0], key) is not None:
                raise ClassroomError("The result is out, so predictions for this lesson are closed (the class keeps the one you sent).")
            gone = c.run("DELETE FROM predictions WHERE code = ? AND lesson = ? AND student_id = ?", row[0], key, student_id)
            if gone:
                c.run("UPDATE classes SET row_count = row_count - 1 WHERE code = ?", row[0])
        return bool(gone)

    def answer(self, code: object, student_id: object, lesson: object, question: object, option: object, now: float | None = None) -> None:
        """A student's answer to check question `question` (1, 2, …) of `lesson`: option index 0, 1, … The first answer
        to a question is the one the class counts (a change after seeing a classmate's screen would be no answer)."""
        now = time.time() if now is None else now
        key = lesson_key(lesson)
        q = _small_int(question, 1, self.limits.max_question, "question")
        o = _small_int(option, 0, self.limits.max_option, "choice")
        with self._tx(write=True) as c:  # and an answer after the answers are out counts for nothing
            row = self._student(c, code, student_id, now, lock=True)
            if c.one("SELECT 1 FROM answer_reveals WHERE code = ? AND lesson = ?", row[0], key) is not None:
                raise ClassroomError("The answers are out, so this lesson's questions are closed (the class keeps what you sent before).")
            if c.one("SELECT 1 FROM answers WHERE code = ? AND lesson = ? AND question = ? AND student_id = ?", row[0], key, q, student_id):
                raise ClassroomError(f"You answered question {q} already: the class counts your first answer.")
            self._add_row(
                c, row, "answers", {"code": row[0], "lesson": key, "question": q, "student_id": student_id}, {"choice": o, "at": now}
            )

    # -- upkeep
    def purge(self, now: float | None = None) -> int:
        """Delete every expired class with all its rows, and rate-limit records older than an hour; returns how
        many classes went."""
        now = time.time() if now is None else now
        with self._tx(write=True) as c:
            return self._purge(c, now)

    def _purge(self, c: _Cursor, now: float) -> int:
        gone = self._delete(c, "expires_at <= ?", now)
        c.run("DELETE FROM creations WHERE at <= ?", now - 3600)
        c.run("DELETE FROM join_attempts WHERE at <= ?", now - 3600)
        return gone

    def _delete(self, c: _Cursor, where: str, arg: object) -> int:
        for table in CLASS_TABLES:
            c.run(f"DELETE FROM {table} WHERE code IN (SELECT code FROM classes WHERE {where})", arg)
        return c.run(f"DELETE FROM classes WHERE {where}", arg)

    def counts(self) -> dict[str, int]:
        """Rows per table (for tests and the load script)."""
        with self._tx(write=False) as c:
            return {t: c.one(f"SELECT COUNT(*) FROM {t}")[0] for t in ("classes", *CLASS_TABLES, "creations", "join_attempts")}
