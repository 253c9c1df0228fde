"""What a class session accepts from anyone: codes, lesson keys, nicknames, predictions, secrets, and the
limits a public Space puts on them (app/classroom/store.py explains the bits behind each). Every refusal is a
ClassroomError with one line for the page."""

from __future__ import annotations

import hashlib
import math
import numbers
import re
import secrets
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from engine.formats import data_dir

DB_NAME = "classes.sqlite3"
CODE_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32: no I, L, O, U
CODE_LENGTH = 10  # 10 x 5 = 50 bits
CODE_BITS = CODE_LENGTH * 5
TOKEN_BYTES = 32  # 256 bits
STUDENT_ID_BYTES = 12  # 96 bits
_LESSON = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SECRET = re.compile(r"[A-Za-z0-9_-]{1,128}")


class ClassroomError(ValueError):
    """Any bad input or refused request; str(exc) is one line a page can show as it is."""


class ClassGone(ClassroomError):
    """No class with that code is running: a wrong code, or a class that ended (its teacher ended it, or it expired)."""


@dataclass(frozen=True)
class Limits:
    """The caps (see the module docstring for why these numbers)."""

    class_life_s: float = 12 * 3600.0
    classes_per_hour: int = 30
    students_per_class: int = 300
    rows_per_class: int = 20_000
    nickname_chars: int = 24
    result_bytes: int = 1_000_000
    prediction_abs_max: float = 1e6
    joins_per_client_per_minute: int = 60  # a school's class often shares one public address (NAT): 30+ students
    # joining in the same minute all come from it (issue 41); wrong codes stay capped globally (failed_joins_per_minute)
    failed_joins_per_minute: int = 120
    max_question: int = 50
    max_option: int = 25


def default_data_dir() -> Path:
    """The engine's data folder (engine/formats.py, `data_dir`: $SPECLAB_DATA, else a Space's /data/speclab, else the
    cache folder), where the pass curves and goodput's state are kept too."""
    return data_dir()


# --- input checks: each returns the clean value or raises ClassroomError --------------------------------------
def normalize_code(text: object) -> str:
    """A class code as typed or linked: case, spaces and dashes ignored; O read as 0, I and L as 1."""
    if not isinstance(text, str) or len(text) > 40:
        raise ClassroomError("That is not a class code (codes are 10 letters and digits).")
    flat = re.sub(r"[\s-]", "", text).upper().translate(str.maketrans("OIL", "011"))
    if len(flat) != CODE_LENGTH or any(ch not in CODE_ALPHABET for ch in flat):
        raise ClassroomError("That is not a class code (codes are 10 letters and digits).")
    return flat


def lesson_key(lesson: object) -> str:
    """A lesson as the store keys it: a number (1, 2, …) or a short name of letters, digits, '_', '.', '-'."""
    if isinstance(lesson, numbers.Integral) and not isinstance(lesson, bool) and 0 <= lesson <= 10_000:
        return str(int(lesson))
    if isinstance(lesson, str) and _LESSON.fullmatch(lesson):
        return lesson
    raise ClassroomError("That is not a lesson this class knows.")


def clean_nickname(text: object, max_chars: int) -> str:
    """An optional nickname as plain text: whitespace collapsed, no control or format characters, at most
    `max_chars` characters ('' when none is given)."""
    if text is None:
        return ""
    if not isinstance(text, str):
        raise ClassroomError("A nickname must be text.")
    flat = " ".join(text.split())
    if any(unicodedata.category(ch).startswith("C") for ch in flat):
        raise ClassroomError("A nickname cannot hold control characters.")
    if len(flat) > max_chars:
        raise ClassroomError(f"Nicknames are at most {max_chars} characters; this one has {len(flat)}.")
    return flat


def prediction_value(value: object, abs_max: float) -> float:
    """A prediction as a finite float with |x| <= abs_max (numbers, or text that is one number)."""
    if isinstance(value, bool):
        raise ClassroomError("A prediction must be a number.")
    if isinstance(value, str) and len(value) <= 40:
        try:
            value = float(value.strip())
        except ValueError:
            raise ClassroomError("A prediction must be a number.") from None
    if not isinstance(value, numbers.Real):
        raise ClassroomError("A prediction must be a number.")
    number = float(value)
    if not math.isfinite(number):
        raise ClassroomError("A prediction must be a finite number (not NaN or infinity).")
    if abs(number) > abs_max:
        raise ClassroomError(f"A prediction must lie between -{abs_max:g} and {abs_max:g}.")
    return number


def _small_int(value: object, low: int, high: int, what: str) -> int:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and low <= value <= high:
        return int(value)
    raise ClassroomError(f"That is not a {what} of this lesson.")


def _secret(value: object, what: str) -> str:
    if isinstance(value, str) and _SECRET.fullmatch(value):
        return value
    raise ClassroomError(f"That {what} is not valid for this class.")


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- the store ---------------------------------------------------------------------------------------------
def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
