"""The roofline predictor: named GPUs (gpus.py), real model shapes (architectures.py), the model of one
pass and of speculative speedup (predictor.py), and recorded pass reports read back (recordings.py,
device_recordings.py). A model, not a measurement: used by the app's Predictor and by scripts.

Layer: imports nothing from `model`, `drafters`, `decoding` or `bench`.
"""
