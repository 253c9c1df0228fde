"""Class sessions (issue 29): one teacher, a class of students, one shared run per lesson.

store.py keeps classes in SQLite (standard library only; no streamlit, no torch); panel.py draws the
teacher's control desk and the student's follow view with Streamlit; the pure figures and HTML are in
app/views/classroom.py.
"""
