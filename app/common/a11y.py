"""Page-wide accessibility fixes to Streamlit's own styling (issue 30), injected once by app/main.py.

WCAG 2.1 AA asks for text contrast of at least 4.5:1. Streamlit draws every caption (st.caption, and the
captions of charts and metrics) at 60% opacity: its grey comes out about 3.9:1 on white, and a link or inline
code inside a caption fades to about 3:1. Here captions are drawn solid in a grey of 7:1 instead, so links and
code in them keep their own (AA) colours. A disabled widget's label is drawn in a light grey (2.3:1); WCAG
exempts inactive controls, but a reader still needs to read what the control is and why it is off, so it gets
a grey of 5:1, still lighter than an active label. axe-core checks every page in tests/app/test_browser.py.
"""

CAPTION_GREY = "#55575f"  # 7.2:1 on white, 6.4:1 on Streamlit's light grey (#f0f2f6)
DISABLED_GREY = "#6b6d73"  # 5.2:1 on white

CSS = f"""<style>
[data-testid="stCaptionContainer"] {{ opacity: 1 !important; color: {CAPTION_GREY}; }}
label[data-testid="stWidgetLabel"][disabled], label[data-testid="stWidgetLabel"][disabled] p {{ color: {DISABLED_GREY}; }}
</style>"""


# --- text contrast on charts (issue 53, item 7) ----------------------------------------------------------------------
AA_TEXT = 4.5  # WCAG 2.1 AA, normal-size text
PLOT_BACKGROUNDS = ("#ffffff", "#e5ecf6")  # Streamlit's chart background (the page's white) and plotly's own template's


def _rgb(colour: str) -> tuple[int, int, int]:
    h = colour.strip().lstrip("#")
    if len(h) == 3:
        h = "".join(c * 2 for c in h)
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def luminance(colour: str) -> float:
    """WCAG relative luminance of a #rrggbb colour."""

    def lin(c: int) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(c) for c in _rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg: str, bg: str = "#ffffff") -> float:
    """WCAG contrast ratio of two #rrggbb colours (1 to 21)."""
    hi, lo = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def readable(colour: str, backgrounds: tuple[str, ...] = PLOT_BACKGROUNDS, ratio: float = AA_TEXT) -> str:
    """The colour itself where text in it reads at `ratio` on every background, else the same hue darkened in steps of
    5% until it does: a series keeps its hue in its labels (an orange line's label stays orange, dark enough to read)."""
    r, g, b = _rgb(colour)
    for step in range(21):
        f = 1 - 0.05 * step
        out = f"#{round(r * f):02x}{round(g * f):02x}{round(b * f):02x}"
        if all(contrast(out, bg) >= ratio for bg in backgrounds):
            return out
    return "#000000"
