"""SpecLab's Streamlit app (entry point: app/main.py)."""
