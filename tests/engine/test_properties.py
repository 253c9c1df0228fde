"""Property-based tests (hypothesis) for the two doors untrusted input comes through: the trace loader
and DecodeConfig (issue 21).

- Any bytes, any JSON document, and any one-field mutation of a real trace either load or are refused
  with one TraceError line; nothing else escapes.
- What loads satisfies the invariants the views rely on (finite, in-range numbers; indices inside their
  lists; valid Unicode), and survives a save/load round trip unchanged.
- The loader's fast paths (plainly valid steps, rows and draft tokens) decide exactly as the checked
  path does: same Trace, or the same refusal.
- DecodeConfig either builds a config whose fields are in their documented ranges, or raises ConfigError.
Kept fast: modest max_examples, no deadline (the machine is shared).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from engine import ConfigError, DecodeConfig, Trace, TraceError  # noqa: E402
from engine.options import MAX_DEPTH, MAX_SEED, MAX_TEMPERATURE  # noqa: E402
from engine.trace import loader as trace_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BASE = json.loads((ROOT / "assets" / "traces" / "ngram-copy-spec.json").read_text(encoding="utf-8"))
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# JSON values, including the awkward ones: huge and negative integers, floats of every size, lone
# surrogates and markup in strings, and nesting.
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | st.sampled_from(["</script>", "![x](http://e.example/a.png)", "\ud800", "NaN"])
)
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12
)


def _paths(data, path=()):
    """Every path into the JSON tree (a trace has a few thousand)."""
    yield path
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _paths(value, (*path, i))


PATHS = list(_paths(BASE))[1:]


def _mutate(path, value):
    data = copy.deepcopy(BASE)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


def _encode(data) -> bytes:
    """JSON bytes as a file would hold them (a lone surrogate travels as its \\ud800 escape)."""
    return json.dumps(data).encode()


def _load(raw: bytes):
    """The loader's verdict: a Trace, or the refusal's one line. Anything else fails the test."""
    try:
        return Trace.from_json_bytes(raw)
    except TraceError as exc:
        message = str(exc)
        assert message and "\n" not in message
        return message


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_invariants(trace: Trace) -> None:
    """What the views assume of every loaded trace."""
    n = len(trace.sequences)
    assert _finite(trace.summary["wall_s"]) and trace.summary["wall_s"] > 0
    for step in trace.steps:
        assert 0 <= step.t_start_s <= step.t_end_s < math.inf and 0 <= step.depth <= MAX_DEPTH and step.batch >= 1
        assert all(_finite(getattr(step, k)) and getattr(step, k) >= 0 for k in trace_module._STEP_NUMBERS)
        for row in step.seqs:
            assert 0 <= row.seq < n and 0 <= row.num_accepted <= len(row.drafted) <= MAX_DEPTH
            assert 0 <= row.next_prob <= 1 and isinstance(row.next_text, str)
            row.next_text.encode("utf-8")  # valid Unicode: no lone surrogate reaches a page
            for i, token in enumerate(row.drafted):
                assert token.accepted == (i < row.num_accepted) and 0 <= token.draft_prob <= 1 >= token.target_prob >= 0
                token.text.encode("utf-8")
    for value in list(trace.meta.values()) + list(trace.summary.values()):
        if isinstance(value, str):
            value.encode("utf-8")
        elif isinstance(value, float):
            assert math.isfinite(value)


@FAST
@given(st.binary(max_size=300))
def test_any_bytes_load_or_are_refused(raw):
    _load(raw)


@FAST
@given(JSON)
def test_any_json_document_loads_or_is_refused(doc):
    _load(_encode(doc))


@FAST
@given(st.sampled_from(PATHS), JSON)
def test_any_one_field_mutation_loads_or_is_refused_and_what_loads_is_sound(path, value):
    verdict = _load(_encode(_mutate(path, value)))
    if isinstance(verdict, Trace):
        _check_invariants(verdict)
        again = Trace.from_json_bytes(json.dumps(verdict.to_dict(), allow_nan=False).encode())  # round trip
        assert again.to_dict() == verdict.to_dict()


@FAST
@given(st.sampled_from(PATHS), JSON)
def test_fast_paths_decide_as_the_checked_path(path, value):
    raw = _encode(_mutate(path, value))
    fast = _load(raw)
    saved = trace_module._fast_step, trace_module._fast_seq_step, trace_module._fast_draft
    try:
        trace_module._fast_step = trace_module._fast_seq_step = trace_module._fast_draft = lambda *a: False
        checked = _load(raw)
    finally:
        trace_module._fast_step, trace_module._fast_seq_step, trace_module._fast_draft = saved
    if isinstance(fast, Trace):
        assert isinstance(checked, Trace) and fast.to_dict() == checked.to_dict()
    else:
        assert fast == checked


OPTION_VALUES = {
    "mode": st.sampled_from(["autoregressive", "speculative"]) | JSON,
    "depth": st.integers(-3, MAX_DEPTH + 3) | JSON,
    "drafter": st.sampled_from(["model", "ngram", "eagle"]) | JSON,
    "policy": st.sampled_from(["fixed", "off_above_batch", "heuristic", "batch_table", "goodput"]) | JSON,
    "disable_by_batch_size": st.integers(-2, 64) | JSON,
    "temperature": st.floats(-1, MAX_TEMPERATURE * 2) | st.floats() | JSON,
    "top_p": st.floats(-0.5, 1.5) | st.floats() | JSON,
    "max_new_tokens": st.integers(-2, 2**40) | JSON,
    "seed": st.integers(-(2**64), 2**64) | JSON,
    "ngram_size": st.integers(-1, 10) | JSON,
    "confidence_threshold": st.floats(-0.5, 1.5) | st.floats() | JSON,
    "batch_table": st.none() | st.lists(st.lists(st.integers(-2, 40), min_size=2, max_size=4), max_size=4) | JSON,
}


@FAST
@given(st.fixed_dictionaries({}, optional=OPTION_VALUES))
def test_decode_config_is_in_range_or_refused(options):
    try:
        cfg = DecodeConfig(**options)
    except ConfigError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert cfg.mode in ("autoregressive", "speculative") and cfg.drafter in ("model", "ngram", "eagle")
    assert 0 <= cfg.depth <= MAX_DEPTH and 0 <= cfg.seed <= MAX_SEED and cfg.max_new_tokens >= 1
    assert _finite(cfg.temperature) and 0 <= cfg.temperature <= MAX_TEMPERATURE
    assert _finite(cfg.top_p) and 0 < cfg.top_p <= 1
    assert _finite(cfg.confidence_threshold) and 0 <= cfg.confidence_threshold <= 1
    assert 1 <= cfg.ngram_size <= 8 and cfg.disable_by_batch_size >= 1
    if cfg.batch_table is not None:
        assert all(1 <= low <= high and 0 <= k <= MAX_DEPTH for low, high, k in cfg.batch_table)
    assert DecodeConfig.from_dict(cfg.to_dict()) == cfg  # what a trace records rebuilds the same config
