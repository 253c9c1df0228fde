"""Each class's change number as a tiny file Streamlit serves itself (issue 41): what a student's idle page polls.

A student's page polls this file from its own JavaScript (app/classroom/watch.py) and asks Streamlit for a run only when
the number in it is not the one the page last drew at; an unchanged class costs a poll one small static-file request
(Streamlit's own static serving, `server.enableStaticServing`: files under app/static/ are served at /app/static/...),
not a fragment run on the server and a redraw in the browser.

The number is the class's store version (app/classroom/store.py) at the last change a student's page shows: the
teacher's lesson, a Reveal and the answers revealed. A join, a prediction or an answer changes nothing on a student's
page (the store takes neither once its result is out), so it leaves the file alone (30 students joining one after
another would otherwise wake every page already in at each join).

A Reveal also leaves each student's revealed result as a page fragment of its own (`publish_results`: the HTML the
student's page would draw, first line `<!--v VERSION-->`), written before the number moves: a page that sees the number
move to a Reveal's fetches its file and shows it at once, before its Streamlit run (app/classroom/watch.js).

Names: a file is named by HMAC-SHA256 of the class code under a secret made when the server starts (256 bits from
`secrets`), so a code never appears in a URL and a name says nothing about the code; the files hold one number each.
A server restart makes a new secret (pages reconnect and are given the new name). Files are written atomically
(a temporary file, then a rename), never made to go backwards by two writers racing (one lock per process), removed
when a class ends, and those untouched for longer than a class lives are pruned. Standard library only: the store
and the tests use it without Streamlit. Any OSError makes a page fall back to polling the server (watch.py), never an
error on a page.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

STATIC_URL = "app/static"  # where Streamlit serves app/static/ (relative to the page: a base URL path is kept)
FOLDER = "classes"  # under app/static/
SUFFIX = ".txt"
PAGE_SUFFIX = SUFFIX  # a student's revealed result, CLASSNAME-STUDENTNAME.txt: served as text/plain, never as a page
PRUNE_EVERY_S = 600.0


class ClassBeacons:
    """One folder of version files, one per class, named by an HMAC of the class code under this server's secret."""

    def __init__(self, folder: str | os.PathLike, *, secret: bytes | None = None, max_age_s: float = 12 * 3600.0 + 600.0) -> None:
        self.folder = Path(folder)
        self._secret = secret if secret is not None else secrets.token_bytes(32)
        if len(self._secret) < 16:
            raise ValueError("the beacon secret must be at least 16 bytes")
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._pruned_at = 0.0

    def __repr__(self) -> str:
        return f"ClassBeacons({str(self.folder)!r})"  # never the secret

    def name(self, code: str) -> str:
        """The file's name for class `code`: 32 hex digits of HMAC-SHA256(secret, code), then .txt."""
        return hmac.new(self._secret, code.encode(), hashlib.sha256).hexdigest()[:32] + SUFFIX

    def page_name(self, code: str, student_id: str) -> str:
        """Student `student_id`'s result file in class `code`: the class's name, then 24 hex digits of
        HMAC-SHA256(secret, code NUL student id): from the name, nothing about the student or the code."""
        mark = hmac.new(self._secret, f"{code}\0{student_id}".encode(), hashlib.sha256).hexdigest()[:24]
        return f"{self.name(code)[: -len(SUFFIX)]}-{mark}{PAGE_SUFFIX}"

    def page_url(self, code: str, student_id: str) -> str:
        return f"{STATIC_URL}/{FOLDER}/{self.page_name(code, student_id)}"

    def publish_results(self, code: str, version: int, pages: dict[str, str]) -> None:
        """Before class `code`'s number moves to `version` (a Reveal): each student's result page (student id -> HTML),
        its first line `<!--v VERSION-->` so a page shows only the one written for the number it saw. OSError on a
        failed write (the files written stay: each is whole, and a page whose file is missing or old asks its run)."""
        for student_id, body in pages.items():
            self._write(self.page_name(code, student_id), f"<!--v{int(version)}-->\n{body}")

    def url_path(self, code: str) -> str:
        """Where a page fetches it, relative to the page (so a server's base URL path is kept)."""
        return f"{STATIC_URL}/{FOLDER}/{self.name(code)}"

    def read(self, code: str) -> int | None:
        """The number in class `code`'s file, or None (no file, unreadable, or not a number)."""
        try:
            text = (self.folder / self.name(code)).read_text()
        except OSError:
            return None
        return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None

    def publish(self, code: str, version: int) -> None:
        """Class `code` changed (as a student's page sees it) at store version `version`: the file says so, unless
        it already holds a later number (two writers finishing out of order). A failed write removes the file, so
        pages fall back to polling the server rather than wait on a number that no longer moves."""
        with self._lock:
            current = self.read(code)
            if current is not None and current >= version:
                return
            try:
                self._write(self.name(code), str(version))
            except OSError:
                self.remove(code)
            self._prune_now_and_then()

    def current(self, code: str, version: Callable[[], int | None]) -> int | None:
        """The number a page should compare with, read BEFORE the page reads the class (so a change after this read
        always leaves a different number in the file). With no file yet (a new server, or a class made before
        it), the file is made from `version()`, the store's number now. None: no file can be had here (the page
        then polls the server, as before)."""
        found = self.read(code)
        if found is not None:
            return found
        with self._lock:
            found = self.read(code)
            if found is None:
                now = version()
                if now is None:
                    return None
                try:
                    self._write(self.name(code), str(now))
                except OSError:
                    return None
                found = now
        return found

    def remove(self, code: str) -> None:
        """Class `code`'s number and its students' result pages."""
        with contextlib.suppress(OSError):
            (self.folder / self.name(code)).unlink()
        with contextlib.suppress(OSError):
            for path in self.folder.glob(f"{self.name(code)[: -len(SUFFIX)]}-*{PAGE_SUFFIX}"):
                with contextlib.suppress(OSError):
                    path.unlink()

    def prune(self, now: float | None = None) -> int:
        """Delete files untouched for longer than a class lives (their classes are gone); returns how many."""
        now = time.time() if now is None else now
        gone = 0
        with contextlib.suppress(OSError):
            for path in self.folder.glob(f"*{SUFFIX}"):  # the numbers and the students' result pages
                with contextlib.suppress(OSError):
                    if now - path.stat().st_mtime > self.max_age_s:
                        path.unlink()
                        gone += 1
        return gone

    def _prune_now_and_then(self) -> None:
        if time.monotonic() - self._pruned_at > PRUNE_EVERY_S:
            self._pruned_at = time.monotonic()
            self.prune()

    def _write(self, name: str, text: str) -> None:
        """Atomically: a temporary file in the same folder, then a rename over the old one (a reader sees the old
        text or the new one, never a part)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=SUFFIX)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, self.folder / name)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # gone after the rename; left only when the write failed
