"""Every URL-bound widget of every page survives any query string (issue 21).

The keys come from the registry (app/common/url_keys.py), so a key a page binds later is fuzzed without
editing this file. For each hostile value, one AppTest run sets every bound key of a page to it (and
a second run with the custom prompt for the free-text values, so the keys drawn only then are reached): the page must render
without an exception, show no traceback, and show a notice naming each widget whose value is not
the link's (Streamlit resets it to the default, or clamps it). Notices show the link's text as
inline code, so Markdown in it is never rendered.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlencode

import pytest

from app.lessons.registry import EXPERIMENTS

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from app.common.page_helpers import _same  # noqa: E402
from app.common.url_keys import BOUND, LINK_ONLY, PAGE_FILES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
CUSTOM = "✏️ Custom text…"
WIDGET_KINDS = (
    "slider",
    "select_slider",
    "selectbox",
    "radio",
    "toggle",
    "checkbox",
    "number_input",
    "text_input",
    "text_area",
    "multiselect",
)
HOSTILE = {
    "inf": "inf",
    "-inf": "-inf",
    "nan": "nan",
    "1e309": "1e309",
    "30 digits": "9" * 30,
    "-30 digits": "-" + "9" * 30,
    "negative": "-4",
    "empty": "",
    "unicode": "ünï ✓ 🙂 ٣",
    "lone surrogate %ED%A0%80": b"\xed\xa0\x80",
    "long": "x" * 20_000,
    "repeated key": ["3", "5"],
    "markdown image": "![b](http://evil.example/x.png)",
    "markdown link": "[click](http://evil.example)",
    "html": "<script>window.__pwned=1</script><img src=x>",
    "backticks": "`a` ``b``\n**c**",
    "hex": "0x10",
    "bool text": "True",
    "padded": " 1 ",
}
TEXT_CASES = ("empty", "unicode", "lone surrogate %ED%A0%80", "long", "markdown image", "html", "backticks")  # free text
LESSON_KNOBS = [e.knobs for e in EXPERIMENTS.values()]  # in lesson order
TRIED = []  # (page, case, keys) for the closing tally


def _texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def _link_text(value, multi: bool = False):
    """What the page reads for this value: the server parses the query string as Streamlit does."""
    parsed = parse_qs(urlencode({"k": value}, doseq=True), keep_blank_values=True)["k"]
    return parsed if multi else parsed[-1]  # a multiselect reads every repeated value, other widgets the last


def _widgets(at) -> dict:
    return {w.key: w for kind in WIDGET_KINDS for w in getattr(at, kind) if w.key}


def _outside_code(text: str) -> str:
    return re.sub(r"`[^`\n]*`", "", text)


def _check(at, page: str, params: dict, case: str) -> None:
    assert not at.exception, (case, [e.value for e in at.exception])
    everything = "\n".join(_texts(getattr(at, kind)) for kind in ("markdown", "warning", "error", "info", "caption"))
    assert "Traceback" not in everything and 'File "' not in everything, case
    notices = _texts(at.warning)
    widgets = _widgets(at)
    for key, label in BOUND[page].items():
        if key not in params or key not in widgets:
            continue
        multi = type(widgets[key]).__name__ == "Multiselect"
        if not _same(_link_text(params[key], multi), widgets[key].value):
            assert f"**{label}**" in notices, (case, key, widgets[key].value)
    for warning in at.warning:  # the link's text is inline code: no link, image or markup is rendered from it
        assert "](" not in _outside_code(warning.value) and "<" not in _outside_code(warning.value), (case, warning.value)


def _run(page: str, params: dict) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=300)
    for key, value in params.items():
        at.query_params[key] = value
    if PAGE_FILES[page] != "playground/playground.py":  # the default page opens without switching
        at.switch_page(PAGE_FILES[page])
    return at.run()


@pytest.mark.parametrize("page", sorted(BOUND))
@pytest.mark.parametrize("case", list(HOSTILE))
def test_every_bound_key_survives_a_hostile_value(page, case):
    value = HOSTILE[case]
    params = {key: value for key in BOUND[page]}
    if page == "lessons":  # each lesson draws only its own knobs: the cases take the lessons in turn
        params["lesson"] = str(list(HOSTILE).index(case) % len(LESSON_KNOBS) + 1)
    at = _run(page, params)
    _check(at, page, params, case)
    TRIED.append((page, case, len(params)))
    if page == "playground" and case in TEXT_CASES:  # keys drawn only for a custom prompt ("text"): free text
        params = {key: value for key in BOUND[page]} | {"prompt": CUSTOM}
        at = _run(page, params)
        _check(at, page, params, case + " (custom prompt)")
        assert "text" not in params or "text" in _widgets(at)
        TRIED.append((page, case + " custom", len(params)))


def test_the_registry_is_what_the_pages_bind():
    """Every bound key is registered (pages bind through url_keys.bound only) and every registered key is drawn."""
    for path in (ROOT / "app").rglob("*.py"):
        if path.name != "url_keys.py":
            assert "bind=" not in path.read_text(encoding="utf-8"), f"{path}: bind through app.common.url_keys.bound"
    for page in BOUND:
        runs = [{"lesson": str(n)} for n in range(1, len(LESSON_KNOBS) + 1)] if page == "lessons" else [{}]
        drawn = set()
        for params in runs:
            at = _run(page, params | ({"prompt": CUSTOM} if page == "playground" else {}))
            drawn |= {key for key, w in _widgets(at).items() if getattr(w.proto, "query_param_key", "") == key}
        assert drawn == set(BOUND[page]), (page, drawn ^ set(BOUND[page]))


def test_the_lessons_registry_is_the_experiments_knobs():
    """The registry lists each lesson experiment's knobs under the labels the experiments give them."""
    knobs = {k.key: k.label for knobs in LESSON_KNOBS for k in knobs}
    assert BOUND["lessons"] == {"teacher": "Teacher mode"} | knobs


@pytest.fixture
def class_store(tmp_path, monkeypatch):
    """A fresh class-session store file (the Lessons page opens it for `?class=`)."""
    from app.common import resources

    monkeypatch.setenv("SPECLAB_DATA", str(tmp_path))
    resources.classroom_store.clear()
    yield
    resources.classroom_store.clear()


@pytest.mark.parametrize("case", list(HOSTILE))
def test_the_class_link_parameters_survive_a_hostile_value(case, class_store):
    """`class` and the teacher's `desk` token are read without a widget: any value is one notice, never echoed
    outside inline code, never a traceback; the token leaves the address bar and no notice repeats it."""
    value = HOSTILE[case]
    params = {key: value for key in LINK_ONLY["lessons"] if key != "lesson"} | {"lesson": "1"}
    at = _run("lessons", params)
    _check(at, "lessons", params, case)
    assert "desk" not in at.query_params and "classroom_seat" not in at.session_state
    said = _link_text(value)
    if len(said) > 3:
        assert said not in _outside_code(_texts(at.warning) + _texts(at.markdown)), case
    assert not any("Teacher mode" in w.value for w in at.warning), case  # the token is not the teacher-mode toggle


def test_link_only_parameters_are_no_widgets_keys():
    for page, keys in LINK_ONLY.items():
        assert not set(keys) & set(BOUND[page]), page
