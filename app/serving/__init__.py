"""The Serving engines page (serving.py): a real serving engine measured from outside."""
