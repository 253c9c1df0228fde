"""What one run did: the record types and summary (records.py), the `Trace` and its JSON file (file.py),
the strict reader of untrusted trace files (loader.py) and achieved-utilisation maths (achieved.py).

Layer: imports nothing from `model`, `drafters`, `decoding` or `bench`.
"""
