"""Untrusted text (from an uploaded trace) made safe for st.markdown / st.error / st.info.

Streamlit renders Markdown in those calls, so a trace field holding `![b](http://x)` would load an
image and `[text](http://x)` would draw a link. `md_text` shows a value as inline code (nothing inside
a code span is rendered); `md_escape` backslash-escapes every ASCII punctuation character (CommonMark
§2.4) for prose such as an error message, and breaks URLs and e-mail addresses so that GFM does not autolink
them. Both also flatten the text to one line and cap its length.
"""

from __future__ import annotations

import re
import string

MAX_CHARS = 300
_ESCAPES = str.maketrans({ch: "\\" + ch for ch in string.punctuation})


def one_line(text: object, max_chars: int = MAX_CHARS) -> str:
    """`text` as one line of at most `max_chars` characters (whitespace runs collapsed)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= max_chars else flat[: max_chars - 1] + "…"


def md_text(text: object, max_chars: int = MAX_CHARS) -> str:
    """Show `text` literally in Markdown, as inline code; backticks (which would end the span) become ʼ."""
    flat = one_line(text, max_chars).replace("`", "ʼ")
    return f"`{flat}`" if flat.strip() else ""


# GFM's autolink literals (mdast-util-gfm-autolink-literal, which Streamlit's Markdown uses) turn "http://…",
# "www.…" and "name@host.tld" in *text* into links after the backslash escapes are resolved, so escaping cannot
# stop them (a real-browser test found `[x](http://…)` drawn as a link). A word joiner (U+2060, invisible) after
# "http"/"www" and before "@" breaks the patterns without changing what the reader sees.
_AUTOLINK = re.compile(r"(?i)(https?|www|ftp)(?=[:.])|(?=@)")
WORD_JOINER = "\u2060"


def md_escape(text: object, max_chars: int = MAX_CHARS) -> str:
    """Show `text` literally in Markdown prose: every ASCII punctuation character backslash-escaped, and no
    URL or e-mail address left for the autolinker."""
    flat = _AUTOLINK.sub(lambda m: (m.group(1) or "") + WORD_JOINER, one_line(text, max_chars))
    return flat.translate(_ESCAPES)
