"""SpecLab's entry point: page configuration and navigation only.

Each page lives in app/app_pages/. The folder is deliberately not called "pages/": next to the entry
script that name switches Streamlit to its older automatic multipage mode on direct links.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run app/main.py` puts only app/ on the path; pages import engine and app
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

st.set_page_config(page_title="SpecLab", page_icon="⚡", layout="wide")
pages = [
    st.Page(str(ROOT / "app" / "app_pages" / "playground.py"), title="Playground", icon="🏁", default=True),
    st.Page(str(ROOT / "app" / "app_pages" / "lessons.py"), title="Lessons", icon="🎓"),
    st.Page(str(ROOT / "app" / "app_pages" / "sweep.py"), title="Sweep", icon="📈"),
    st.Page(str(ROOT / "app" / "app_pages" / "replay.py"), title="Replay", icon="📼"),
]
st.navigation(pages).run()
