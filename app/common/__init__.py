"""What two or more pages share, below every page folder: page helpers, the cached resources and the
run lock, the URL registry, the trace-pair results, the step-through panel, lesson and sweep recordings'
schema (measurement.py). Never imports a page folder (tests/app/test_layout_app.py)."""
