"""The target (and draft) model: loading a pair, the lean Llama forward, KV caches, CUDA graphs, the EAGLE head.

Layer: imports nothing from `drafters`, `decoding`, `bench` or `roofline` (tests/engine/test_layout.py).
"""
