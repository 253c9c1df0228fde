"""app/views/safe.py: trace text shown in st.markdown / st.error / st.info is never rendered as Markdown."""

from __future__ import annotations

import json

import pytest

from app.views.safe import md_escape, md_text, one_line
from engine import Trace, TraceError


def test_md_text_shows_markdown_literally():
    assert md_text("![b](http://x)") == "`![b](http://x)`"
    assert md_text("[text](http://x)") == "`[text](http://x)`"
    assert md_text("a`b``c") == "`aʼbʼʼc`"  # a backtick cannot close the span early
    assert md_text("two\nlines\r\n  here") == "`two lines here`"
    assert md_text("   ") == ""
    assert len(md_text("x" * 1000)) <= 302


def test_md_escape_escapes_every_markdown_character():
    assert md_escape("![b](http://x)") == "\\!\\[b\\]\\(http\u2060\\:\\/\\/x\\)"  # U+2060: see below
    assert md_escape("**bold** _i_ <img src=x> $x$ :red[y]") == (r"\*\*bold\*\* \_i\_ \<img src\=x\> \$x\$ \:red\[y\]")
    assert md_escape("plain words") == "plain words"
    assert one_line("a\n\nb", max_chars=3) == "a b"
    assert one_line("abcdef", max_chars=4) == "abc…"


def test_replay_error_text_is_one_escaped_line():
    from app.replay.replay import error_text  # noqa: PLC0415  (module imports streamlit; bare mode)

    raw = json.dumps({"schema": "![b](http://x)\n[text](http://x)"}).encode()
    with pytest.raises(TraceError) as info:
        Trace.from_json_bytes(raw)
    message = str(info.value)
    assert "![b](http://x)" in message
    shown = error_text(TraceError(message))
    assert "\n" not in shown and "](" not in shown and r"\]\(" in shown


def test_md_escape_leaves_nothing_for_the_autolinker():
    """GFM autolinks URLs and e-mail addresses in text even after backslash escapes (found by the real-browser
    test): a word joiner breaks each pattern, invisibly."""
    import re

    shown = md_escape("[click](http://evil.example/x) HTTPS://e.example www.evil.example mail me@evil.example")
    plain = shown.replace("\\", "")  # what the reader sees, escapes resolved
    assert not re.search(r"(?i)https?://|www\.|\w@\w", plain)
    assert plain.replace("\u2060", "") == "[click](http://evil.example/x) HTTPS://e.example www.evil.example mail me@evil.example"
