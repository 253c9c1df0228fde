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
