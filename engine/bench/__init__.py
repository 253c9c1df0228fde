"""The benchmark harness behind `python -m engine bench` (harness.py) and its prompt sets (prompts.py).

Layer: the top of the runtime: it may import everything below it; nothing in the runtime imports it.
"""
