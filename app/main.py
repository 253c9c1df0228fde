"""SpecLab's entry point: page configuration and navigation only.

Each page lives in app/app_pages/. The folder is deliberately not called "pages/": next to the entry
script that name switches Streamlit to its older automatic multipage mode on direct links. The
project is installed (`pip install -e .`), so pages import `app` and `engine` without path edits.
"""

from pathlib import Path

import streamlit as st

PAGES = Path(__file__).resolve().parent / "app_pages"

st.set_page_config(page_title="SpecLab", page_icon="⚡", layout="wide")
pages = [
    st.Page(str(PAGES / "playground.py"), title="Playground", icon="🏁", default=True),
    st.Page(str(PAGES / "lessons.py"), title="Lessons", icon="🎓"),
    st.Page(str(PAGES / "sweep.py"), title="Sweep", icon="📈"),
    st.Page(str(PAGES / "predictor.py"), title="Predictor", icon="🧮"),
    st.Page(str(PAGES / "replay.py"), title="Replay", icon="📼"),
]
st.navigation(pages).run()
