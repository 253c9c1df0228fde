"""The class database's schema, versioned: MIGRATIONS[i] brings a file from version i to i + 1, each step in
one transaction; the SQL dialect (SQLite by default; a server database is a connection change, see
app/classroom/store.py) and the small cursor the store writes its statements with."""

from __future__ import annotations

from dataclasses import dataclass

from app.classroom.inputs import ClassroomError


@dataclass(frozen=True)
class Dialect:
    """What differs between database servers: how a write transaction begins, and the parameter marker."""

    name: str
    begin_write: str
    marker: str = "?"


SQLITE = Dialect("sqlite", "BEGIN IMMEDIATE")


# Ordered: MIGRATIONS[i] brings a file from version i to version i + 1.
MIGRATIONS: list[tuple[str, ...]] = [
    (  # 1: classes, students, predictions, revealed results, and the rate-limit logs
        "CREATE TABLE classes (code TEXT PRIMARY KEY, token_sha256 TEXT NOT NULL, created_at REAL NOT NULL, "
        "expires_at REAL NOT NULL, lesson TEXT, version INTEGER NOT NULL DEFAULT 0, row_count INTEGER NOT NULL DEFAULT 0)",
        "CREATE TABLE students (student_id TEXT PRIMARY KEY, code TEXT NOT NULL, nickname TEXT NOT NULL, joined_at REAL NOT NULL)",
        "CREATE INDEX students_by_code ON students (code)",
        "CREATE TABLE predictions (code TEXT NOT NULL, lesson TEXT NOT NULL, student_id TEXT NOT NULL, "
        "value REAL NOT NULL, at REAL NOT NULL, PRIMARY KEY (code, lesson, student_id))",
        "CREATE TABLE results (code TEXT NOT NULL, lesson TEXT NOT NULL, result_json TEXT NOT NULL, at REAL NOT NULL, "
        "PRIMARY KEY (code, lesson))",
        "CREATE TABLE creations (at REAL NOT NULL)",
        "CREATE TABLE join_attempts (at REAL NOT NULL, client TEXT NOT NULL, ok INTEGER NOT NULL)",
    ),
    (  # 2: the check questions' answers, and which lessons' answers the teacher revealed
        "CREATE TABLE answers (code TEXT NOT NULL, lesson TEXT NOT NULL, question INTEGER NOT NULL, "
        "student_id TEXT NOT NULL, choice INTEGER NOT NULL, at REAL NOT NULL, "
        "PRIMARY KEY (code, lesson, question, student_id))",
        "CREATE TABLE answer_reveals (code TEXT NOT NULL, lesson TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (code, lesson))",
    ),
]
SCHEMA_VERSION = len(MIGRATIONS)
CLASS_TABLES = ("students", "predictions", "results", "answers", "answer_reveals")  # every row names its class


class _Cursor:
    """The few statements the store needs, written with '?' and sent with the dialect's marker."""

    def __init__(self, conn, marker: str) -> None:
        self.conn, self.marker = conn, marker

    def _exec(self, sql: str, args: tuple):
        cur = self.conn.cursor()
        cur.execute(sql if self.marker == "?" else sql.replace("?", self.marker), args)
        return cur

    def run(self, sql: str, *args) -> int:
        return self._exec(sql, args).rowcount

    def one(self, sql: str, *args):
        return self._exec(sql, args).fetchone()

    def all(self, sql: str, *args) -> list:
        return self._exec(sql, args).fetchall()


def schema_version(store) -> int:
    """The version a store's file is at (`store`: a ClassroomStore; its `_tx` opens a transaction)."""
    with store._tx(write=False) as c:
        return _version(c)


def _version(c: _Cursor) -> int:
    c.run("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = c.one("SELECT version FROM schema_version")
    return row[0] if row else 0


def migrate(store, upto: int = SCHEMA_VERSION) -> int:
    """Apply MIGRATIONS[version:upto] in one transaction; returns the version the file is at now. A file written
    by a newer SpecLab (a version this code does not know) is refused."""
    with store._tx(write=True) as c:
        version = _version(c)
        if version > SCHEMA_VERSION:
            raise ClassroomError(
                f"The class database is schema version {version}, newer than this SpecLab knows "
                f"({SCHEMA_VERSION}); update SpecLab or point SPECLAB_DATA elsewhere."
            )
        for step in MIGRATIONS[version:upto]:
            for statement in step:
                c.run(statement)
        if upto > version:
            c.run("DELETE FROM schema_version")
            c.run("INSERT INTO schema_version (version) VALUES (?)", upto)
            version = upto
    return version
