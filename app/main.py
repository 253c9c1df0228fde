"""SpecLab's entry point: page configuration, navigation, and the glossary every page shares.

Each page lives in its own folder, named after it (app/sweep/sweep.py: the URL stays /sweep), beside the code
only that page uses; what pages share is below them (app/common/, app/views/, app/classroom/). No folder is
called "pages/": next to the entry script that name switches Streamlit to its older automatic multipage mode
on direct links. The project is installed (`pip install -e .`), so pages import `app` and `engine` without path edits.
"""

import os
from pathlib import Path

import pandas  # noqa: F401  (imported whole before any session's thread builds a figure: plotly reads a half-imported pandas from sys.modules)
import streamlit as st

from app.common import a11y, resources

APP = Path(__file__).resolve().parent
GLOSSARY = Path(__file__).resolve().parents[1] / "lessons" / "glossary.md"

st.set_page_config(page_title="SpecLab", page_icon="⚡", layout="wide")
st.html(a11y.CSS)  # captions at AA contrast (a style-only st.html takes no room on the page)
pages = [
    st.Page(str(APP / "playground" / "playground.py"), title="Playground", icon=":material/sports_score:", default=True),
    st.Page(str(APP / "lessons" / "lessons.py"), title="Lessons", icon=":material/school:"),
    st.Page(str(APP / "sweep" / "sweep.py"), title="Sweep", icon=":material/grid_on:"),
    st.Page(str(APP / "benchmarks" / "benchmarks.py"), title="Benchmarks", icon=":material/leaderboard:"),
    st.Page(str(APP / "predictor" / "predictor.py"), title="Predictor", icon=":material/calculate:"),
    st.Page(str(APP / "replay" / "replay.py"), title="Replay", icon=":material/replay:"),
    st.Page(str(APP / "serving" / "serving.py"), title="Serving engines", icon=":material/dns:"),
]
if os.environ.get(resources.PRELOAD, "1") != "0":
    from app.lessons.registry import preparations

    # the default pair, the probe and the lessons' preparations, once in the background: no visitor's first run waits for them
    resources.preload(_then=tuple(preparations()))
page = st.navigation(pages)
with st.sidebar.expander("Glossary: α, c, tokens per pass, ridge point, …", icon=":material/menu_book:"):
    try:
        st.markdown(GLOSSARY.read_text(encoding="utf-8"))
    except OSError as exc:
        st.error(f"The glossary could not be read ({exc.strerror or exc}).")
page.run()
