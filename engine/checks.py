"""The checks every file SpecLab reads back goes through, stated once: a hardened JSON parse and field checkers.

Traces (engine/trace/loader.py), device recordings (engine/roofline/device_recordings.py), recorded pass
reports (engine/roofline/recordings.py) and lesson recordings (app/common/measurement.py) are untrusted
input. Each format makes one `Checker`: the error type it raises and the prefix of its messages. Then
- `Checker.parse` parses JSON bytes with the caps checked before parsing: size, bracket nesting, integer
  digits, and no NaN or Infinity;
- `Checker.obj/list/int/num/str/bool/choice/ids/scalar` check one field each and return it;
- `Checker.spec` walks a small declarative spec (see `Checker.spec`) with those same checkers.
Every refusal is one line naming the field, e.g.
"malformed trace: steps[12].seqs[3].num_accepted must be between 0 and 4; got 9".
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

MAX_NESTING = 64  # the deepest format nests 6 (a trace's steps[i].seqs[j].drafted[k]); deeper is refused unparsed
MAX_INT_DIGITS = 30
SPEC_MAX_LIST = 512  # a spec list `[item]` holds at most this many; `[item, n]` at most n
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # a JSON string, escapes included
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP = np.zeros(256, np.int8)
_BRACKET_STEP[list(b"[{")] = 1
_BRACKET_STEP[list(b"]}")] = -1
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MISSING = object()


_KEYSETS: dict[tuple[str, ...], frozenset[str]] = {}
_NOTICED: set[str] = set()


def notice(text: str) -> None:
    """One line on stderr for a file that was ignored (corrupt, foreign), once per process for the same text."""
    if text not in _NOTICED:
        _NOTICED.add(text)
        print(f"speclab: {text}", file=sys.stderr)


def _keyset(keys: tuple[str, ...]) -> frozenset[str]:
    found = _KEYSETS.get(keys)
    if found is None:
        found = _KEYSETS[keys] = frozenset(keys)
    return found


def show(value) -> str:
    """A short, one-line rendering of an offending value for an error message."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _max_depth(brackets: bytes) -> int:
    """The deepest running depth of a string of bracket bytes (0 for none)."""
    if not brackets:
        return 0
    return int(np.cumsum(_BRACKET_STEP[np.frombuffer(brackets, np.uint8)], dtype=np.int64).max())


def nested_too_deep(raw: bytes) -> bool:
    """Does bracket nesting pass MAX_NESTING (brackets inside strings not counted)?

    Works on the UTF-8 bytes: every byte but the brackets is dropped and the running depth is a cumulative
    sum (numpy). Only where that count passes the cap are strings cut out first (their brackets are text),
    since the regex costs more than the parse. The fast count can also be lowered by closing brackets inside
    strings; a file that hides real nesting that way still meets the parser's own recursion guard
    (RecursionError, refused in `Checker.parse`) and the format's checks, which have no place for it.
    """
    if _max_depth(raw.translate(None, _NOT_BRACKETS)) <= MAX_NESTING:
        return False
    return _max_depth(_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)) > MAX_NESTING


@dataclass(frozen=True)
class Checker:
    """The checks of one file format: refusals are `error(f"{prefix}: {field} {rule}; got {value}")`.

    foreign: the prefix for bytes that are not this format at all (not UTF-8, not JSON); default `prefix`.
    noun: what the file is called in the size refusal ("trace file too large: ...").
    max_text: the longest string a field may hold (None: no cap beyond the file's)."""

    error: type[Exception]
    prefix: str
    foreign: str = ""
    noun: str = "file"
    max_text: int | None = None

    def fail(self, where: str, what: str, value=_MISSING) -> NoReturn:
        got = "" if value is _MISSING else f"; got {show(value)}"
        raise self.error(f"{self.prefix}: {where} {what}{got}")

    # --- parsing ---------------------------------------------------------------------------------
    def too_big(self, size: int, max_bytes: int) -> Exception:
        return self.error(f"{self.noun} too large: {size:,} bytes (at most {max_bytes:,})")

    def parse(self, raw: bytes | str, max_bytes: int, name: str | None = None):
        """Parse JSON with limits: size, nesting depth, integer digits; NaN and Infinity refused."""
        where = f"{name} is" if name else "the file is"
        foreign = self.foreign or self.prefix
        if len(raw) > max_bytes:
            raise self.too_big(len(raw), max_bytes)
        raw = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
        raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark, as some editors save JSON: not part of it
        if nested_too_deep(raw):
            raise self.error(f"{self.prefix}: JSON nested more than {MAX_NESTING} levels deep")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.error(f"{foreign}: {where} not UTF-8 text") from None
        try:
            return json.loads(text, parse_int=self._parse_int, parse_float=self._parse_float, parse_constant=self._parse_constant)
        except json.JSONDecodeError as exc:
            raise self.error(f"{foreign}: {where} not valid JSON ({exc})") from None
        except RecursionError:
            raise self.error(f"{self.prefix}: JSON nested too deep") from None

    def _parse_int(self, text: str) -> int:
        if len(text.lstrip("-")) > MAX_INT_DIGITS:
            raise self.error(f"{self.prefix}: an integer has {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
        return int(text)

    def _parse_float(self, text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise self.error(f"{self.prefix}: the number {text[:20]} is out of range")
        return value

    def _parse_constant(self, text: str) -> NoReturn:
        raise self.error(f"{self.prefix}: {text} is not a number this file may hold (JSON has no NaN or Infinity)")

    # --- one field each ----------------------------------------------------------------------------
    def obj(self, value, where: str, required: tuple[str, ...] = (), optional: tuple[str, ...] = (), open: bool = False) -> dict:
        """An object with all of `required`, and besides them only `optional` keys (any keys if `open`)."""
        if not isinstance(value, dict):
            self.fail(where, "must be an object", value)
        if len(value) == len(required) and value.keys() == _keyset(required):  # the common case, checked in C
            return value
        missing = [k for k in required if k not in value]
        if missing:
            raise self.error(f"{self.prefix}: {where} is missing {', '.join(missing)}")
        if not open:
            unknown = sorted(k for k in value if k not in required and k not in optional)
            if unknown:
                raise self.error(f"{self.prefix}: {where} has unknown field {show(unknown[0])}")
        return value

    def list(self, value, where: str, max_len: int, min_len: int = 0) -> list:
        if not isinstance(value, list):
            self.fail(where, "must be a list", value)
        if len(value) > max_len:
            raise self.error(f"{self.prefix}: {where} has {len(value):,} entries (at most {max_len:,})")
        if len(value) < min_len:
            self.fail(where, f"must list at least {min_len}", value)
        return value

    def int(self, value, where: str, low: int = 0, high: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(where, "must be an integer", value)
        if value < low or (high is not None and value > high):
            self.fail(where, f"must be between {low} and {high}" if high is not None else f"must be >= {low}", value)
        return value

    def num(self, value, where: str, low: float = 0.0, high: float | None = None) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.fail(where, "must be a finite number", value)
        if value < low or (high is not None and value > high):
            self.fail(where, f"must be between {low:g} and {high:g}" if high is not None else f"must be >= {low:g}", value)
        return float(value)

    def positive(self, value, where: str) -> float:
        """A finite number > 0."""
        if self.num(value, where) <= 0:
            self.fail(where, "must be > 0", value)
        return float(value)

    def opt_num(self, value, where: str, low: float = 0.0, high: float | None = None) -> float | None:
        return None if value is None else self.num(value, where, low, high)

    def str(self, value, where: str, pattern: re.Pattern | None = None, what: str = "") -> str:
        """A string within the format's length cap that page, file and socket can carry (no lone surrogate);
        with `pattern`, one that matches it (`what` says what that is, for the message)."""
        if not isinstance(value, str) or (self.max_text is not None and len(value) > self.max_text):
            self.fail(where, "must be a string" + (f" of at most {self.max_text} characters" if self.max_text else ""), value)
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate (JSON "\\ud800")
                self.fail(where, "must be valid Unicode text (it holds a lone surrogate)", value)
        if pattern is not None and not pattern.match(value):
            self.fail(where, f"must be {what or 'a string matching ' + pattern.pattern}", value)
        return value

    def opt_str(self, value, where: str) -> str | None:
        return None if value is None else self.str(value, where)

    def bool(self, value, where: str) -> bool:
        if not isinstance(value, bool):
            self.fail(where, "must be true or false", value)
        return value

    def choice(self, value, where: str, allowed: tuple[str, ...]) -> str:
        if not isinstance(value, str) or value not in allowed:
            self.fail(where, f"must be one of {', '.join(allowed)}", value)
        return value

    def ids(self, value, where: str, max_len: int) -> list[int]:
        """A list of token ids (integers >= 0); a plainly valid one is checked in one pass without naming each entry."""
        ids = self.list(value, where, max_len)
        if all(type(v) is int and v >= 0 for v in ids):
            return ids
        return [self.int(v, f"{where}[{i}]") for i, v in enumerate(ids)]

    def scalar(self, value, where: str):
        """A string, number, true/false or null (a free-form fact, never a container)."""
        if isinstance(value, str):
            return self.str(value, where)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, (int, float)):
            return self.num(value, where, low=-math.inf) if isinstance(value, float) else value
        self.fail(where, "must be a string, number, true/false or null", value)

    # --- a declarative spec ------------------------------------------------------------------------
    def spec(self, value, spec, where: str) -> None:
        """Check `value` against `spec` (raise naming the field); specs, for formats read as plain data:

        "num" a finite number (any sign), "num+" one >= 0, "num?" / "num+?" or null; "int" an integer
        (|v| <= 10**12), "nat" one >= 0; "str", "str?" (or null); "bool"; "date" (YYYY-MM-DD); a tuple of
        strings: one of them; a compiled pattern: a string matching it; [item] a list of at most
        SPEC_MAX_LIST items, [item, n] of at most n; {"*": item} an object of identifier keys, each an item;
        any other dict: an object with exactly these keys, where a key ending in "?" may be absent and a key
        "..." lets other keys through unread."""
        if isinstance(spec, str):
            self._leaf(value, spec, where)
        elif isinstance(spec, tuple):
            self.choice(value, where, spec)
        elif isinstance(spec, re.Pattern):
            self.str(value, where, spec)
        elif isinstance(spec, list):
            for i, item in enumerate(self.list(value, where, spec[1] if len(spec) > 1 else SPEC_MAX_LIST)):
                self.spec(item, spec[0], f"{where}[{i}]")
        elif "*" in spec:
            if not isinstance(value, dict) or len(value) > SPEC_MAX_LIST:
                self.fail(where, f"must be an object of at most {SPEC_MAX_LIST} fields", value)
            for key, item in value.items():
                if not _IDENT.match(key):
                    self.fail(where, f"has a key that is not a plain name ({key[:20]!r})")
                self.spec(item, spec["*"], f"{where}.{key}")
        else:
            known = {k.rstrip("?"): s for k, s in spec.items() if k != "..."}
            required = tuple(k for k in spec if not k.endswith("?") and k != "...")
            self.obj(value, where, required, tuple(known), open="..." in spec)
            for key, item in value.items():
                if key in known:
                    self.spec(item, known[key], f"{where}.{key}")

    def _leaf(self, value, spec: str, where: str) -> None:
        kind = spec.rstrip("?")
        if value is None and spec.endswith("?"):
            return
        if kind in ("num", "num+"):
            self.num(value, where, -math.inf if kind == "num" else 0.0)
        elif kind in ("int", "nat"):
            self.int(value, where, -(10**12) if kind == "int" else 0, 10**12)
        elif kind == "str":
            self.str(value, where)
        elif kind == "bool":
            self.bool(value, where)
        elif kind == "date":
            self.str(value, where, _DATE, "a date YYYY-MM-DD")
        else:  # a bug in the spec, not in the data
            raise TypeError(f"unknown spec {spec!r}")
