"""The strict trace loader: hostile or corrupt trace files are refused with one clear TraceError line.

Each case mutates one field of a real shipped trace (assets/traces/ngram-copy-spec.json); the loader
must refuse it with a message naming that field, and never raise anything but TraceError.
"""

from __future__ import annotations

import copy
import glob
import json
import math
import random
from pathlib import Path

import pytest

from engine import Trace, TraceError
from engine.trace import loader as trace_module

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "assets" / "traces" / "ngram-copy-spec.json"
BASE = json.loads(SAMPLE.read_text(encoding="utf-8"))
ROW = ["steps", 1, "seqs", 0]  # a decode row that drafted 4 tokens and accepted 2
TOKEN = [*ROW, "drafted", 0]
DELETE = object()


def mutated(path: list, value) -> dict:
    data = copy.deepcopy(BASE)
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


def refused(data) -> str:
    raw = json.dumps(data).encode()
    with pytest.raises(TraceError) as info:
        Trace.from_json_bytes(raw)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message, message
    return message


CASES = [
    # top level
    (["schema"], "speclab.trace/3", "unsupported trace schema"),
    (["steps"], {"0": 1}, "steps must be a list"),
    (["sequences"], "abc", "sequences must be a list"),
    (["summary"], DELETE, "missing summary"),
    # meta
    (["meta"], [1, 2], "meta must be an object"),
    (["meta"], "a string", "meta must be an object"),
    (["meta", "device_name"], 42, "meta.device_name must be a string"),
    (["meta", "draft_name"], ["x"], "meta.draft_name must be a string"),
    (["meta", "extra"], {"a": 1}, "meta.extra must be a string, number"),
    (["meta", "probe"], "fast", "meta.probe must be an object"),
    (["meta", "probe", "peak_flops"], -1.0, "meta.probe.peak_flops must be >= 0"),
    # summary
    (["summary", "dtype"], 16, "summary.dtype must be a string"),
    (["summary", "wall_s"], -2.5, "summary.wall_s must be >= 0"),
    (["summary", "wall_s"], 0, "summary.wall_s must be > 0"),
    (["summary", "wall_s"], "2.6", "summary.wall_s must be a finite number"),
    (["summary", "new_tokens"], 9.5, "summary.new_tokens must be an integer"),
    (["summary", "acceptance_rate"], 1.5, "summary.acceptance_rate must be between 0 and 1"),
    (["summary", "per_position_acceptance"], [0.1] * 17, "summary.per_position_acceptance has 17 entries"),
    (["summary", "wall_s"], DELETE, "summary is missing wall_s"),
    (
        ["summary", "new_tokens"],
        95,
        "summary.new_tokens must equal the tokens the steps emitted (96) and the sequences' output_ids hold (96)",
    ),
    (["steps"], [], "summary.new_tokens must equal the tokens the steps emitted (0)"),
    (["summary", "tokens_per_s"], None, "summary.tokens_per_s must be a finite number"),
    (["summary", "tokens_per_s"], DELETE, "summary is missing tokens_per_s"),
    (["summary", "ttft_s"], None, "summary.ttft_s must be a finite number"),
    (["summary", "other_cpu_s"], 1e9, "summary.other_cpu_s is more CPU time than 4,096 cores give in the run's wall_s"),
    # config
    (["config"], [], "config must be an object"),
    (["config", "mode"], "turbo", "config: mode must be one of"),
    (["config", "depth"], 99, "config: depth must be between 0 and 16"),
    (["config", "temperature"], "hot", "config: temperature"),
    (["config", "rm_rf"], True, "config: unknown decoding options: rm_rf"),
    (["config", "stop_at_eos"], "yes", "config.stop_at_eos must be true or false"),
    # sequences
    (["sequences", 0], "text", "sequences[0] must be an object"),
    (["sequences", 0, "prompt"], None, "sequences[0].prompt must be a string"),
    (["sequences", 1, "output_ids"], [1, -5], "sequences[1].output_ids[1] must be >= 0"),
    (["sequences", 0, "output_ids"], "1,2", "sequences[0].output_ids must be a list"),
    (["sequences", 0, "text"], 7, "sequences[0].text must be a string"),
    (["sequences", 0, "prompt_tokens"], -1, "sequences[0].prompt_tokens must be >= 0"),
    (["sequences", 0, "evil"], 1, "sequences[0] has unknown field 'evil'"),
    # steps
    (["steps", 3], [], "steps[3] must be an object"),
    (["steps", 3, "index"], -1, "steps[3].index must be >= 0"),
    (["steps", 3, "kind"], "verify", "steps[3].kind must be one of prefill, decode"),
    (["steps", 3, "depth"], 17, "steps[3].depth must be between 0 and 16"),
    (["steps", 3, "batch"], 0, "steps[3].batch must be between 1 and 4096"),
    (["steps", 3, "tokens_per_pass"], 0, "steps[3].tokens_per_pass must be >= 1"),
    (["steps", 3, "t_start_s"], -0.5, "steps[3].t_start_s must be >= 0"),
    (["steps", 3, "t_end_s"], 0.0, "steps[3].t_end_s must be >= t_start_s"),
    (["steps", 3, "verify_ms"], -1.0, "steps[3].verify_ms must be >= 0"),
    (["steps", 3, "draft_flops"], "many", "steps[3].draft_flops must be a finite number"),
    (["steps", 3, "util_pct"], 250.0, "steps[3].util_pct must be between 0 and 100"),
    (["steps", 3, "policy_ms"], -3.0, "steps[3].policy_ms must be >= 0"),
    (["steps", 3, "seqs"], {}, "steps[3].seqs must be a list"),
    (["steps", 3, "verify_ms"], DELETE, "steps[3] is missing verify_ms"),
    (["steps", 3, "exec"], "x", "steps[3] has unknown field 'exec'"),
    (["steps", 3, "seqs", 0, "seq"], -1, "steps[3].seqs[0].seq must be >= 0"),
    (["steps", 3, "seqs", 0, "seq"], 2, "steps[3].seqs[0].seq must index one of the trace's 2 sequences"),
    # one row
    ([*ROW, "num_accepted"], 9, "steps[1].seqs[0].num_accepted must be between 0 and 4; got 9"),
    ([*ROW, "num_accepted"], -1, "steps[1].seqs[0].num_accepted must be between 0 and 4"),
    ([*ROW, "num_accepted"], True, "steps[1].seqs[0].num_accepted must be an integer"),
    ([*ROW, "next_prob"], 1.5, "steps[1].seqs[0].next_prob must be between 0 and 1"),
    ([*ROW, "next_kind"], "bonus", "steps[1].seqs[0].next_kind must be 'correction'"),
    ([*ROW, "next_id"], -3, "steps[1].seqs[0].next_id must be >= 0"),
    ([*ROW, "next_text"], 12, "steps[1].seqs[0].next_text must be a string"),
    ([*ROW, "emitted"], [1, "2"], "steps[1].seqs[0].emitted[1] must be an integer"),
    ([*ROW, "finished"], 0, "steps[1].seqs[0].finished must be true or false"),
    ([*ROW, "drafted"], [BASE["steps"][1]["seqs"][0]["drafted"][0]] * 17, "steps[1].seqs[0].drafted has 17 entries"),
    # one drafted token
    ([*TOKEN, "text"], 5, "steps[1].seqs[0].drafted[0].text must be a string"),
    ([*TOKEN, "id"], "14870", "steps[1].seqs[0].drafted[0].id must be an integer"),
    ([*TOKEN, "draft_prob"], -0.1, "steps[1].seqs[0].drafted[0].draft_prob must be between 0 and 1"),
    ([*TOKEN, "target_prob"], 2.0, "steps[1].seqs[0].drafted[0].target_prob must be between 0 and 1"),
    ([*TOKEN, "accepted"], False, "steps[1].seqs[0].drafted[0].accepted must be true (num_accepted is 2)"),
    ([*TOKEN, "accepted"], "yes", "steps[1].seqs[0].drafted[0].accepted must be true or false"),
]


@pytest.mark.parametrize("path, value, message", CASES, ids=[f"{i}-{'.'.join(map(str, c[0]))}" for i, c in enumerate(CASES)])
def test_hostile_variant_is_refused_naming_the_field(path, value, message):
    text = refused(mutated(path, value))
    assert message in text, text


def test_the_unmutated_base_loads():
    trace = Trace.from_dict(copy.deepcopy(BASE))
    expected = copy.deepcopy(BASE)
    for step in expected["steps"]:  # recorded before policy_ms existed: it loads as 0.0
        step.setdefault("policy_ms", 0.0)
    assert trace.to_dict() == expected


def test_every_shipped_trace_loads():
    files = sorted(glob.glob(str(ROOT / "assets" / "traces" / "*.json")))
    files = [f for f in files if not f.endswith("index.json")]
    assert len(files) >= 4
    for path in files:
        trace = Trace.from_json(path)
        assert trace.steps and trace.summary["wall_s"] > 0


def test_older_trace_without_meta_or_policy_ms_loads():
    data = copy.deepcopy(BASE)
    data.pop("meta")
    for step in data["steps"]:
        step.pop("policy_ms", None)
    trace = Trace.from_dict(data)
    assert trace.meta == {} and all(s.policy_ms == 0.0 for s in trace.steps)


# --- parsing limits -----------------------------------------------------------------------------
def test_deep_nesting_is_refused_before_parsing():
    for raw in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 100_000 + b"1" + b"}" * 100_000):
        with pytest.raises(TraceError, match="nested more than 64 levels"):
            Trace.from_json_bytes(raw)


def test_brackets_inside_strings_do_not_count_as_nesting():
    data = mutated(["sequences", 0, "prompt"], "[[[{{{" * 50 + '"\\')
    assert Trace.from_dict(json.loads(json.dumps(data))).sequences[0]["prompt"].startswith("[[[")
    Trace.from_json_bytes(json.dumps(data).encode())


def test_huge_integer_is_refused():
    raw = json.dumps(BASE).replace('"new_tokens": 96', '"new_tokens": ' + "9" * 5000).encode()
    with pytest.raises(TraceError, match="5000 digits"):
        Trace.from_json_bytes(raw)


WALL = f'"wall_s": {json.dumps(BASE["summary"]["wall_s"])}'  # the shipped sample's own run time, as JSON writes it


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused(constant):
    raw = json.dumps(BASE).replace(WALL, f'"wall_s": {constant}').encode()
    assert constant.encode() in raw
    with pytest.raises(TraceError, match="JSON has no NaN or Infinity"):
        Trace.from_json_bytes(raw)


def test_float_overflow_is_refused():
    raw = json.dumps(BASE).replace(WALL, '"wall_s": 1e999').encode()
    with pytest.raises(TraceError, match="out of range"):
        Trace.from_json_bytes(raw)


def test_oversize_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_module, "MAX_FILE_BYTES", 1000)
    with pytest.raises(TraceError, match="too large"):
        Trace.from_json_bytes(b" " * 1001)
    path = tmp_path / "big.json"
    path.write_bytes(json.dumps(BASE).encode())
    with pytest.raises(TraceError, match="too large"):
        Trace.from_json(path)


def test_too_many_steps_are_refused(monkeypatch):
    monkeypatch.setattr(trace_module, "MAX_STEPS", 10)
    assert "steps has 38 entries (at most 10)" in refused(BASE)


def test_invalid_utf8_is_refused():
    with pytest.raises(TraceError, match="not UTF-8"):
        Trace.from_json_bytes(b'{"schema": "\xff"}')


# --- fuzz: any outcome is a Trace or a TraceError ----------------------------------------------
_HOSTILE = [None, True, False, -1, 0, 1, 17, 10**29, -(10**29), 0.5, -0.5, 1e308, "", "x", "![b](http://x)", [], [1], {}, {"a": 1}, [[[]]]]


def _nodes(data, path=()):
    yield path
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _nodes(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data[:3]):  # a few rows per list keep the walk short
            yield from _nodes(value, (*path, i))


def test_random_mutations_never_escape_as_other_exceptions():
    rng = random.Random(21)
    small = copy.deepcopy(BASE)
    small["steps"] = small["steps"][:6]
    kept = [sum(len(row["emitted"]) for step in small["steps"] for row in step["seqs"] if row["seq"] == i) for i in range(2)]
    for seq, n in zip(small["sequences"], kept):  # a shorter run: its outputs and summary agree with its steps
        seq["output_ids"] = seq["output_ids"][:n]
    small["summary"]["new_tokens"] = sum(kept)
    paths = [p for p in _nodes(small) if p]
    outcomes = {"loaded": 0, "refused": 0}
    for _ in range(500):
        data = copy.deepcopy(small)
        for _ in range(rng.randint(1, 3)):
            path = rng.choice(paths)
            node = data
            try:
                for key in path[:-1]:
                    node = node[key]
                if rng.random() < 0.15 and isinstance(node, dict):
                    node.pop(path[-1], None)
                else:
                    node[path[-1]] = copy.deepcopy(rng.choice(_HOSTILE))
            except (KeyError, IndexError, TypeError):
                continue  # an earlier mutation replaced a parent
        try:
            trace = Trace.from_json_bytes(json.dumps(data).encode())
        except TraceError as exc:
            assert "\n" not in str(exc)
            outcomes["refused"] += 1
            continue
        outcomes["loaded"] += 1
        for step in trace.steps:  # what loaded is safe to draw: finite, in range
            assert math.isfinite(step.step_ms) and step.step_ms >= 0
            for row in step.seqs:
                assert 0 <= row.num_accepted <= len(row.drafted) and 0 <= row.seq < len(trace.sequences)
    assert outcomes["refused"] > 300 and outcomes["loaded"] > 0, outcomes


def test_a_trace_saved_with_a_byte_order_mark_loads():
    """Some editors save UTF-8 with a byte-order mark; it is not part of the JSON, and the trace reads as without it."""
    raw = json.dumps(BASE).encode("utf-8")
    assert Trace.from_json_bytes(b"\xef\xbb\xbf" + raw).to_dict() == Trace.from_json_bytes(raw).to_dict()
