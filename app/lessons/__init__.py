"""The Lessons page (lessons.py) and everything only it and the lesson recorder (scripts/record/record_lessons.py)
use: one module per lesson, l<N>_<name>.py, each declaring its RECORD; the registry that finds them (registry.py);
and what they share (kit/)."""
