"""What every page shares: load the model pair or say in one sentence why not, and report a failure.

No page shows a traceback (docs/design.md §5: one clear line, the traceback goes to the server log). Pages
catch the errors the engine documents (ConfigError, ModelLoadError, TraceError, ValueError, OSError,
RuntimeError) and hand them to `show_failure`; `last_resort` is the one guard that catches anything,
around drawing results (a replayed trace comes from an untrusted file).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Mapping

import streamlit as st

from app.common import drafters, resources
from app.common.hub_fetch import VramRefusal
from app.common.url_keys import BOUND
from engine import ConfigError, ModelLoadError

log = logging.getLogger("speclab.app")

# What loading a pair can raise: the engine's own refusals, missing or unreadable files, and torch's
# errors (out of memory, unsupported dtype on this device) which are RuntimeErrors.
LOAD_ERRORS = (ModelLoadError, ConfigError, OSError, RuntimeError)
ERROR_ICON = ":material/error:"


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The exception's message as one short line (torch errors can span many lines)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def show_failure(what: str, exc: BaseException, fix: str = "") -> None:
    """Log the traceback and show one line: '<what> (<Type>: <message>). <fix>'."""
    log.error("%s", what, exc_info=exc)
    st.error(f"{what} ({type(exc).__name__}: {one_line(exc)})." + (f" {fix}" if fix else ""), icon=ERROR_ICON)


@contextlib.contextmanager
def last_resort(what: str, fix: str = ""):
    """`with last_resort("Could not draw these traces"):` any exception in the body becomes one line on
    the page and a traceback in the log. The app's only catch-all: use it around drawing results (which
    may come from an uploaded file), never around engine calls: those raise documented errors."""
    try:
        yield
    except Exception as exc:  # the one catch-all (see the docstring)
        show_failure(what, exc, fix)


def _same(text, value) -> bool:
    """Does the URL text `text` say the widget value `value` (as Streamlit writes it into the URL)? A multiselect's
    value is a list and its URL text the list of its repeated parameter's values."""
    if isinstance(value, (list, tuple)):
        texts = text if isinstance(text, list) else [text]
        return len(texts) == len(value) and all(_same(t, v) for t, v in zip(texts, value))
    if isinstance(text, list):
        text = text[-1] if text else ""
    if isinstance(value, bool):
        return text.strip().lower() == str(value).lower()
    if isinstance(value, (int, float)):
        try:
            return math.isclose(float(text), float(value), rel_tol=1e-9, abs_tol=1e-9)
        except ValueError:
            return False
    return text == str(value)


def _shown(value, limit: int = 40) -> str:
    """A value as inline code that no URL text can break out of (no backticks, no newlines, short)."""
    text = " ".join(str(value).replace("`", "'").split())
    if not text:  # an empty value (a multi-select left with none): a word, not two lone backticks
        return "none"
    return "`" + (text if len(text) <= limit else text[: limit - 1] + "…") + "`"


def url_fallbacks(raw: Mapping[str, str], values: Mapping[str, object], labels: Mapping[str, str]) -> list[str]:
    """One notice per link parameter the page could not use.

    raw: the query string as the page received it (st.query_params.to_dict(), read before any bound widget
    is drawn; a multiselect's key maps to st.query_params.get_all(key)); values: what each bound widget holds
    now, by key. Streamlit ignores a value that is not a valid option or is out of range (and rounds one that
    is off the widget's step), so a widget whose value does not say the URL's text is one where the link was
    not followed: say so, and what is used instead.
    """
    notices = []
    for key, value in values.items():
        if key in raw and not _same(raw[key], value):
            shown = ("on" if value else "off") if isinstance(value, bool) else value
            shown = ", ".join(map(str, shown)) if isinstance(shown, (list, tuple)) else shown
            said = ", ".join(map(str, raw[key])) if isinstance(raw[key], list) else raw[key]
            notices.append(
                f"The link gave **{labels.get(key, key)}** the value {_shown(said)}, which this page cannot use; it uses "
                f"{_shown(shown)} instead."
            )
    return notices


def link_notices(page: str, raw: Mapping[str, str]) -> list[str]:
    """The notices for the link parameters `page` could not use: every key the registry (app/common/url_keys.py) binds
    for it and this script run drew, compared with the query string `raw` read before the widgets were drawn."""
    keys = BOUND[page]
    values = {key: st.session_state[key] for key in keys if key in st.session_state}
    return url_fallbacks(raw, values, keys)


def ready_label(pair) -> str:
    """'Ready: <target> · draft model: <name> · EAGLE head: none · cpu bfloat16', from the pair's own drafter list."""
    return f"Ready: {pair.target_name} · {drafters.loaded_names(pair)} · {pair.device.type} {pair.dtype_name}"


def download_progress(status):
    """on_progress for a hub download (app/common/hub_fetch.py): a progress bar in the loading status, made at the
    first report (a pair already downloaded shows none)."""
    bar = []

    def report(repo: str, done: int, total: int) -> None:
        if not bar:
            status.update(label=f"Downloading {repo} from the Hugging Face Hub (other visitors' runs go on meanwhile)…", expanded=True)
            bar.append(status.progress(0.0))
        text = f"{repo}: {done / 1e9:.2f} of {total / 1e9:.2f} GB" if total else f"{repo}: finding the files…"
        bar[0].progress(min(done / total, 1.0) if total else 0.0, text=text)

    return report


def load_pair_or_error(preset_key: str = "embedded", dtype: str = "auto", *, with_probe: bool = False):
    """Load the server-wide cached pair (and, with_probe, this machine's measured peaks) under a status line.

    Returns (pair, probe) - probe None unless with_probe - or None after showing one sentence that says
    what failed and how to fix it; the page then stops or skips its runs.
    """
    preset = resources.PRESETS[preset_key]
    label = "Loading the model pair and probing this machine…" if with_probe else "Loading the model pair…"
    try:
        with st.status(label, expanded=False) as status:
            pair = resources.get_pair(preset_key, dtype, on_progress=download_progress(status))
            probe = resources.get_probe(pair.device.type, pair.dtype_name) if with_probe else None
            status.update(label=ready_label(pair), state="complete")
            if probe is not None:
                st.write(
                    f"Device: {probe.device_name}; measured peaks {probe.peak_bandwidth / 1e9:.0f} GB/s, "
                    f"{probe.peak_flops / 1e9:.0f} GFLOP/s; ridge point {probe.ridge_point:.0f} FLOP/byte."
                )
            for warning in pair.warnings:
                st.write(f"⚠️ {warning}")
    except VramRefusal as exc:  # one line: the pair, its need and the free GPU memory
        st.error(str(exc), icon=":material/memory:")
        return None
    except LOAD_ERRORS as exc:
        # The engine's own messages name their fix (e.g. how to install the embedded model).
        fix = "Fix: choose the embedded pair." if preset.hub else ""
        show_failure(f"Could not load the model pair '{preset.label}'", exc, fix)
        return None
    return pair, probe
