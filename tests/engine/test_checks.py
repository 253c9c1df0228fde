"""engine/checks.py: the one set of checkers every file SpecLab reads back goes through.

Each checker returns the value it accepts and refuses anything else with one line of the format's error
type, starting with the format's prefix and naming the field; the parse refuses the caps before parsing."""

from __future__ import annotations

import math
import re

import pytest

from engine.checks import MAX_NESTING, Checker


class FormatError(ValueError):
    pass


CHECK = Checker(FormatError, "malformed thing", foreign="not a thing", noun="thing file", max_text=10)


def refused(call) -> str:
    with pytest.raises(FormatError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message, message
    return message


def test_each_field_checker_returns_what_it_accepts():
    assert CHECK.int(3, "a", 0, 4) == 3 and CHECK.num(2, "a") == 2.0 and isinstance(CHECK.num(2, "a"), float)
    assert CHECK.opt_num(None, "a") is None and CHECK.positive(0.5, "a") == 0.5
    assert CHECK.str("abc", "a") == "abc" and CHECK.opt_str(None, "a") is None and CHECK.bool(False, "a") is False
    assert CHECK.choice("x", "a", ("x", "y")) == "x" and CHECK.ids([0, 5], "a", 3) == [0, 5]
    assert CHECK.obj({"k": 1}, "a", ("k",)) == {"k": 1} and CHECK.list([1], "a", 1) == [1]
    assert [CHECK.scalar(v, "a") for v in ("s", None, True, 3, -1.5)] == ["s", None, True, 3, -1.5]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: CHECK.int(9, "steps[12].seqs[3].num_accepted", 0, 4),
            "malformed thing: steps[12].seqs[3].num_accepted must be between 0 and 4; got 9",
        ),
        (lambda: CHECK.int(True, "n"), "malformed thing: n must be an integer; got True"),
        (lambda: CHECK.int(-1, "n"), "malformed thing: n must be >= 0; got -1"),
        (lambda: CHECK.num(math.nan, "x"), "malformed thing: x must be a finite number; got nan"),
        (lambda: CHECK.num(2.0, "x", 0.0, 1.0), "malformed thing: x must be between 0 and 1; got 2.0"),
        (lambda: CHECK.positive(0, "x"), "malformed thing: x must be > 0; got 0"),
        (lambda: CHECK.str(5, "s"), "malformed thing: s must be a string of at most 10 characters; got 5"),
        (lambda: CHECK.str("x" * 11, "s"), "malformed thing: s must be a string of at most 10 characters"),
        (lambda: CHECK.str("\ud800", "s"), "malformed thing: s must be valid Unicode text (it holds a lone surrogate)"),
        (lambda: CHECK.str("ab", "s", re.compile(r"^a$"), "one a"), "malformed thing: s must be one a; got 'ab'"),
        (lambda: CHECK.bool(0, "b"), "malformed thing: b must be true or false; got 0"),
        (lambda: CHECK.choice("z", "c", ("x", "y")), "malformed thing: c must be one of x, y; got 'z'"),
        (lambda: CHECK.ids([1, -2], "out", 5), "malformed thing: out[1] must be >= 0; got -2"),
        (lambda: CHECK.ids([1, 2, 3], "out", 2), "malformed thing: out has 3 entries (at most 2)"),
        (lambda: CHECK.list({}, "l", 2), "malformed thing: l must be a list; got an object"),
        (lambda: CHECK.list([], "l", 2, min_len=1), "malformed thing: l must list at least 1; got a list of 0"),
        (lambda: CHECK.obj([], "o", ("k",)), "malformed thing: o must be an object; got a list of 0"),
        (lambda: CHECK.obj({}, "o", ("k", "j")), "malformed thing: o is missing k, j"),
        (lambda: CHECK.obj({"k": 1, "evil": 2}, "o", ("k",)), "malformed thing: o has unknown field 'evil'"),
        (lambda: CHECK.scalar([1], "m"), "malformed thing: m must be a string, number, true/false or null; got a list of 1"),
    ],
)
def test_each_refusal_is_one_line_naming_the_field(call, message):
    assert message in refused(call)


def test_an_open_object_lets_other_keys_through():
    assert CHECK.obj({"k": 1, "extra": 2}, "o", ("k",), open=True) == {"k": 1, "extra": 2}


SPEC = {
    "name": "str",
    "when": "date",
    "kind": ("a", "b"),
    "file": re.compile(r"^[a-z]+\.json$"),
    "rows": [{"n": "nat", "x": "num", "y?": "num?"}, 2],
    "facts": {"*": "str?"},
    "flag?": "bool",
    "open": {"k": "int", "...": None},
}
GOOD = {
    "name": "x",
    "when": "2026-12-01",
    "kind": "a",
    "file": "t.json",
    "rows": [{"n": 1, "x": -2.5}],
    "facts": {"target": "t", "draft": None},
    "open": {"k": -3, "anything": [1, {"z": 2}]},
}


def test_a_spec_accepts_what_fits():
    CHECK.spec(GOOD, SPEC, "rec")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"when": "yesterday"}, "rec.when must be a date YYYY-MM-DD; got 'yesterday'"),
        ({"kind": "c"}, "rec.kind must be one of a, b; got 'c'"),
        ({"file": "../x.json"}, "rec.file must be a string matching"),
        ({"rows": [{"n": -1, "x": 0}]}, "rec.rows[0].n must be between 0 and 1000000000000; got -1"),
        ({"rows": [{"n": 1, "x": 0, "z": 1}]}, "rec.rows[0] has unknown field 'z'"),
        ({"rows": [{"n": 1, "x": 0}] * 3}, "rec.rows has 3 entries (at most 2)"),
        ({"facts": {"<b>": "x"}}, "rec.facts has a key that is not a plain name ('<b>')"),
        ({"facts": {"a": 1}}, "rec.facts.a must be a string"),
        ({"flag": "yes"}, "rec.flag must be true or false"),
        ({"open": {}}, "rec.open is missing k"),
        ({"name": None}, "rec.name must be a string"),
    ],
)
def test_a_spec_refuses_naming_the_field(change, message):
    assert message in refused(lambda: CHECK.spec(GOOD | change, SPEC, "rec"))


def test_an_unknown_spec_is_a_bug_not_bad_data():
    with pytest.raises(TypeError, match="unknown spec"):
        CHECK.spec(1, "float", "x")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"[" * (MAX_NESTING + 1) + b"]" * (MAX_NESTING + 1), f"malformed thing: JSON nested more than {MAX_NESTING} levels deep"),
        (b"[" + b"9" * 31 + b"]", "malformed thing: an integer has 31 digits (at most 30)"),
        (b"[1e999]", "malformed thing: the number 1e999 is out of range"),
        (b"[NaN]", "malformed thing: NaN is not a number this file may hold (JSON has no NaN or Infinity)"),
        (b"[-Infinity]", "malformed thing: -Infinity is not a number"),
        (b'["\xff"]', "not a thing: the file is not UTF-8 text"),
        (b"[1,", "not a thing: the file is not valid JSON"),
        (b" " * 1001, "thing file too large: 1,001 bytes (at most 1,000)"),
    ],
)
def test_the_parse_refuses_past_its_caps_in_one_line(raw, message):
    assert message in refused(lambda: CHECK.parse(raw, 1000))


def test_the_parse_names_the_file_and_reads_what_fits():
    assert "not a thing: x.json is not valid JSON" in refused(lambda: CHECK.parse(b"{", 100, "x.json"))
    assert CHECK.parse('{"a": [1, 2.5, "[[[[["]}', 100) == {"a": [1, 2.5, "[[[[["]}
    deep_text = '["' + "[" * 200 + '"]'  # brackets inside a string are text, not nesting
    assert CHECK.parse(deep_text, 1000) == ["[" * 200]
