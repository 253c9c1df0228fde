"""A class session's figures and text (issue 29): links, the QR code, the class's predictions, answer counts.

Pure functions (no streamlit): values in, URL / SVG / plotly figure / table rows / Markdown / HTML out. A student's
revealed result is plain HTML (result_html, table_html: the SVG as an image): 30 browsers drawing plotly at each Reveal
were most of a class's CPU on a 2-core server, and parsing Markdown with HTML in it the largest part of what was left
(issue 41). Nicknames are untrusted (anyone can join with any text): they leave here only as escaped Markdown
(app/views/safe.py) or escaped HTML.
"""

from __future__ import annotations

import base64
import html
import math
from urllib.parse import urlencode, urlsplit, urlunsplit

import plotly.graph_objects as go
import segno

from app.views.safe import md_escape, one_line

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


def answer_rows(counts: dict[int, dict[int, int]], questions: list[tuple[str, list[str], int]], mark: bool = False) -> list[dict]:
    """One row per (question, option): the option's text, how many chose it, the share of that question's answers, with
    `mark` (the answers are out) a mark on the right option, and the question, on its first option's row only.
    `questions` = [(question text, [option texts], the right option's index)], question 1 first; counts from the
    store."""
    rows = []
    for q, (question, options, right) in enumerate(questions, start=1):
        got = counts.get(q, {})
        total = sum(got.values())
        for o, option in enumerate(options):
            n = got.get(o, 0)
            share = f"{n / total:.0%}" if total else "–"
            row = {"answer": option, "students": n, "share": share} | ({"right answer": "✓" if o == right else ""} if mark else {})
            rows.append(row | {"question": f"{q}. {question}" if o == 0 else ""})  # last: its long text would push the counts out
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


# --- the student's light picture (issue 41): one small SVG, no plotly in 30 browsers at each Reveal -------------
SVG_W, SVG_H = 640, 210
_LEFT, _RIGHT, _TOP, _BOTTOM = 24, 24, 52, 34  # the plot's margins: two label rows above, the axis below
_DOT_R, _BUCKET_PX = 5, 11  # a dot's radius; guesses closer than a bucket stack in one column


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round tick values (1, 2 or 5 times a power of ten apart) covering [lo, hi]."""
    span = hi - lo
    if not math.isfinite(span) or span <= 0:
        return [lo]
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + n * step, 12) for n in range(int((hi - first) / step + 1e-9) + 1)]


def _x_range(points: list[float]) -> tuple[float, float]:
    lo, hi = min(points), max(points)
    pad = (hi - lo) * 0.08 or max(abs(lo) * 0.1, 0.5)
    return lo - pad, hi + pad


def _marker(x: float, label: str, row: int, color: str, dashed: bool, rightward: bool) -> str:
    """A vertical line at pixel x from label row `row` (0: the top one) down to the axis, its label beside it."""
    y = 16 + 16 * row
    anchor, dx = ("start", 4) if rightward else ("end", -4)
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    return (
        f'<line x1="{x:.1f}" y1="{y - 12}" x2="{x:.1f}" y2="{SVG_H - _BOTTOM}" stroke="{color}" stroke-width="3"{dash}/>'
        f'<text x="{x + dx:.1f}" y="{y}" text-anchor="{anchor}" fill="{color}" font-weight="bold">{label}</text>'
    )


def _markers(lines: list[tuple[float, str, str, bool]]) -> str:
    """The guess and result lines [(pixel x, label, color, dashed)] with labels that cross no line: a label reads to
    the right unless it would leave the picture; a label that reads across the other line goes in the top row, where
    the other line, starting in the second row, does not reach."""
    room = 150
    lines = sorted(lines)
    right = [x < SVG_W - _RIGHT - room for x, *_ in lines]
    if len(lines) == 2 and right[0] and not right[1] and lines[0][0] > _LEFT + room:
        right[0] = False  # both would read toward each other: the left one reads left
    toward = len(lines) == 2 and (right[0] or not right[1])
    rows = [0, 1] if len(lines) < 2 or (toward and right[0]) else [1, 0]
    return "".join(_marker(x, label, row, color, dashed, r) for (x, label, color, dashed), row, r in zip(lines, rows, right))


def predictions_svg(values: list[float], unit: str = "", mine: float | None = None, result: float | None = None) -> str:
    """The class's predictions as one small SVG image: a dot per student, equal (or nearly equal) guesses stacked, the
    student's own guess as a dashed line and the measured result as a solid one, each labelled with its value, over an
    axis in `unit`. What predictions_figure shows, for a page that must stay light (no plotly to load and draw)."""
    unit_text = html.escape(unit)
    points = [float(v) for v in values] + [x for x in (mine, result) if x is not None]
    if not points:
        points = [0.0, 1.0]
    lo, hi = _x_range(points)
    width = SVG_W - _LEFT - _RIGHT
    base = SVG_H - _BOTTOM

    def px(v: float) -> float:
        return _LEFT + (v - lo) / (hi - lo) * width

    stacks: dict[int, int] = {}
    for v in values:
        bucket = round(px(v) / _BUCKET_PX)
        stacks[bucket] = stacks.get(bucket, 0) + 1
    tallest = max(stacks.values(), default=1)
    step = min(2 * _DOT_R + 1, (base - _TOP - _DOT_R) / tallest)
    dots = [
        f'<circle cx="{bucket * _BUCKET_PX}" cy="{base - _DOT_R - 1 - n * step:.1f}" r="{_DOT_R}" fill="{CLASS_COLOR}" opacity=".75"/>'
        for bucket, count in stacks.items()
        for n in range(count)
    ]
    ticks = "".join(
        f'<line x1="{px(t):.1f}" y1="{base}" x2="{px(t):.1f}" y2="{base + 5}" stroke="#555"/>'
        f'<text x="{px(t):.1f}" y="{base + 18}" text-anchor="middle" fill="#333">{t:g}</text>'
        for t in nice_ticks(lo, hi)
    )
    marks = _markers(
        [
            (px(x), f"{label} {x:.3g}{unit_text}", color, label == "your guess")
            for x, label, color in ((result, "measured", RESULT_COLOR), (mine, "your guess", MINE_COLOR))
            if x is not None
        ]
    )
    what = count_label(len(values)) + (f" ({unit_text})" if unit_text else "")
    title = html.escape(predictions_title(values, unit, mine, result), quote=True)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {SVG_W} {SVG_H}" width="100%" style="max-width:{SVG_W}px" '
        f'role="img" aria-label="{title}" font-family="sans-serif" font-size="13"><title>{title}</title>'
        f'<line x1="{_LEFT}" y1="{base}" x2="{SVG_W - _RIGHT}" y2="{base}" stroke="#555"/>{ticks}{"".join(dots)}{marks}'
        f'<text x="{SVG_W - _RIGHT}" y="{SVG_H - 2}" text-anchor="end" fill="#555">{what}: one dot per student</text></svg>'
    )


def predictions_title(values: list[float], unit: str = "", mine: float | None = None, result: float | None = None) -> str:
    """What predictions_svg shows, in words (plain text: its title, and the image's alternative text)."""
    what = count_label(len(values)) + (f" ({unit})" if unit else "")
    return (
        f"{what}, one dot each"
        + (f"; your guess {mine:.3g}" if mine is not None else "")
        + (f"; measured {result:.3g}" if result is not None else "")
    )


def svg_image(svg: str, alt: str) -> str:
    """An SVG as an HTML image (a data: URL), `alt` escaped: what st.html keeps (its sanitizer drops inline SVG, keeps
    images) and what a browser draws with no Markdown to parse and no element per shape in the page."""
    data = base64.b64encode(svg.encode()).decode()
    return (
        f'<img src="data:image/svg+xml;base64,{data}" alt="{html.escape(one_line(alt, 400), quote=True)}" '
        f'style="display:block;width:100%;max-width:{SVG_W}px;height:auto;aspect-ratio:{SVG_W}/{SVG_H}" />'
    )


def result_html(values: list[float], unit: str = "", mine: float | None = None, result: float | None = None) -> str:
    """The class's result on a student's page (issue 41), one HTML block: the heading, the class's predictions with the
    student's guess and the measured result (predictions_svg, as an image), and their count."""
    picture = svg_image(predictions_svg(values, unit, mine, result), predictions_title(values, unit, mine, result))
    return (
        "<p><strong>The class's result</strong> (one run, for everyone)</p>"
        f"{picture}<p><strong>{count_label(len(values))}</strong> in the class</p>"
    )


def waiting_html() -> str:
    """The waiting frame (waiting_svg) as the image result_html's picture takes the place of."""
    return svg_image(waiting_svg(), WAITING_TEXT)


WAITING_TEXT = "The class's predictions and the result appear here when the teacher reveals them"


def waiting_svg() -> str:
    """The empty frame the class's picture (predictions_svg) fills at Reveal, the same size, drawn while the class
    waits: the page does not jump at Reveal, and each browser loads what draws an HTML Markdown block (a separate
    script, fetched and compiled on first use) while it waits, not all 30 browsers at once at Reveal (issue 41)."""
    text = WAITING_TEXT
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {SVG_W} {SVG_H}" width="100%" style="max-width:{SVG_W}px" '
        f'role="img" aria-label="{text}" font-family="sans-serif" font-size="13"><title>{text}</title>'
        f'<rect x="1" y="1" width="{SVG_W - 2}" height="{SVG_H - 2}" rx="8" fill="none" stroke="#bbb" stroke-dasharray="6 4"/>'
        f'<text x="{SVG_W / 2:g}" y="{SVG_H / 2:g}" text-anchor="middle" fill="#777">{text}</text></svg>'
    )


CELL = "border:1px solid #d6d6d9;padding:4px 10px;text-align:left"


def table_html(rows: list[dict]) -> str:
    """`rows` (dicts with the same keys) as one HTML table, every cell escaped text (a table the browser draws with no
    Markdown to parse and none of a data grid's weight)."""
    if not rows:
        return ""
    keys = list(rows[0])

    def cells(tag: str, values) -> str:
        return "".join(f'<{tag} style="{CELL}">{html.escape(one_line(v), quote=True)}</{tag}>' for v in values)

    body = "".join(f"<tr>{cells('td', (row.get(k, '') for k in keys))}</tr>" for row in rows)
    return (
        f'<table style="border-collapse:collapse;margin:0 0 1rem"><thead><tr>{cells("th", keys)}</tr></thead><tbody>{body}</tbody></table>'
    )
