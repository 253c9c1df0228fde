"""A class session's figures and text (issue 29): links, the QR code, the class's predictions, answer counts.

Pure functions (no streamlit): values in, URL / SVG / plotly figure / table rows / Markdown out. Nicknames are
untrusted (anyone can join with any text): they leave here only as escaped Markdown (app/views/safe.py).
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit, urlunsplit

import plotly.graph_objects as go
import segno

from app.views.safe import md_escape

MINE_COLOR = "#b8006b"
RESULT_COLOR = "#0a7d32"
CLASS_COLOR = "#1f4fd1"
PAGES = ("playground", "lessons", "sweep", "predictor", "replay")  # the URL paths of app/main.py's pages


def lessons_url(page_url: str, code: str, token: str | None = None) -> str:
    """The Lessons page's link for class `code` (`…/lessons?class=CODE`), from the URL of the page the teacher
    has open; with `token`, the teacher's private link (`…&desk=TOKEN`: never `teacher`, the Lessons page's
    teacher-mode toggle, whose link notice would repeat the token)."""
    parts = urlsplit(page_url)
    head, _, last = parts.path.rstrip("/").rpartition("/")
    base = head if last in PAGES else f"{head}/{last}" if last else head
    path = f"{base}/lessons"
    query = {"class": code} if token is None else {"class": code, "desk": token}
    return urlunsplit((parts.scheme, parts.netloc, path, urlencode(query), ""))


def qr_svg(url: str, scale: int = 5) -> str:
    """`url` as a QR code, one SVG image (error correction M: readable from the back of a room on a projector)."""
    return segno.make(url, error="m", micro=False).svg_inline(scale=scale, dark="#000", light="#fff", border=2)


def count_label(n: int, what: str = "prediction") -> str:
    """'1 prediction', '3 predictions'."""
    return f"{n} {what}{'' if n == 1 else 's'}"


def predictions_figure(values: list[float], unit: str = "", mine: float | None = None, result: float | None = None) -> go.Figure:
    """The class's predictions as a strip (one dot each, stacked where equal) over a histogram; the student's own
    guess and the measured result as vertical lines when given. The title is the count ('N predictions')."""
    fig = go.Figure()
    if values:
        fig.add_histogram(
            x=values,
            name="predictions",
            marker_color=CLASS_COLOR,
            opacity=0.35,
            nbinsx=min(20, max(5, len(values))),
            yaxis="y",
            hovertemplate="%{y} in %{x}<extra></extra>",
        )
        seen: dict[float, int] = {}
        ys = []
        for v in values:
            seen[v] = seen.get(v, 0) + 1
            ys.append(seen[v])
        fig.add_scatter(
            x=values,
            y=ys,
            mode="markers",
            name="one student",
            marker={"color": CLASS_COLOR, "size": 9},
            yaxis="y2",
            hovertemplate=f"%{{x:.3g}} {unit}<extra></extra>",
        )
    for x, label, color in ((mine, "your guess", MINE_COLOR), (result, "measured", RESULT_COLOR)):
        if x is not None:
            fig.add_vline(
                x=x,
                line={"color": color, "width": 3, "dash": "dash" if label == "your guess" else "solid"},
                annotation_text=label,
                annotation_font_color=color,
            )
    fig.update_layout(
        title=count_label(len(values)),
        height=260,
        margin={"l": 40, "r": 20, "t": 40, "b": 40},
        showlegend=False,
        bargap=0.05,
        xaxis_title=unit or None,
        yaxis={"title": "students", "rangemode": "tozero"},
        yaxis2={"overlaying": "y", "visible": False, "rangemode": "tozero"},
    )
    return fig


def answer_rows(counts: dict[int, dict[int, int]], questions: list[tuple[str, list[str]]]) -> list[dict]:
    """One row per (question, option): the option's text, how many chose it, the share of that question's
    answers, and the question (last: its long text would push the counts out of a narrow table).
    `questions` = [(question text, [option texts])], question 1 first; counts from the store."""
    rows = []
    for q, (question, options) in enumerate(questions, start=1):
        got = counts.get(q, {})
        total = sum(got.values())
        for o, option in enumerate(options):
            n = got.get(o, 0)
            share = f"{n / total:.0%}" if total else "–"
            rows.append({"answer": option, "students": n, "share": share, "question": f"{q}. {question}"})
    return rows


def roster_markdown(nicknames: list[str], shown: int = 40) -> str:
    """'Joined: Ann, Bob and 3 more without a nickname' as Markdown in which each nickname is plain text."""
    named = [md_escape(n, 24) for n in nicknames if n]
    anonymous = len(nicknames) - len(named)
    if not nicknames:
        return "No students have joined yet."
    parts = named[:shown]
    if len(named) > shown:
        parts.append(f"{len(named) - shown} more")
    if anonymous:
        parts.append(f"{anonymous} without a nickname")
    return f"Joined ({len(nicknames)}): " + ", ".join(parts)
