"""A serving engine measured from outside: a bounded OpenAI-compatible client (client.py), the
speculative-decoding counters of llama.cpp, vLLM and SGLang read from their Prometheus /metrics (metrics.py), and the
concurrency sweep that sets plain against speculative serving (sweep.py), behind `python -m engine serve-bench`."""
