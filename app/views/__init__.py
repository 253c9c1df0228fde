"""Pure views: Trace / Step lists -> plotly Figures, HTML strings and metric dicts.

Nothing here calls streamlit, so every view is unit-testable on a fixture trace (tests/app/test_views.py).
"""
