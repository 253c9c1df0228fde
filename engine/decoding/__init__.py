"""The decode loop: prefill, then per step 1 draft, 2 verify, 3 accept, 4 roll back (decode.py); the
per-sequence state (sequence.py), depth policies (policies.py), the measured pass-cost curve the
load-aware policies read (passcurve.py) and lossless draft-tree verification (verify_tree.py).

Layer: imports `model`, `drafters`, `trace`; nothing from `bench` or `roofline`.
"""
