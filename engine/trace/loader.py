"""The strict reader of trace files ("speclab.trace/1"; "/2" adds each row's draft tree): JSON in, a Trace's parts out.

Traces are data, never executed or unpickled: anything that is not a trace of a known schema is refused
with one `TraceError` line naming the field. The rules are the small functions below, one per object
kind, written with the shared checkers of engine/checks.py; the most numerous objects (steps, rows, draft
tokens) also have a fast path that applies the same rules without building field names, and whatever it
does not accept takes the checked path for its message.
"""

from __future__ import annotations

import math

from engine.checks import Checker, show
from engine.config import DecodeConfig
from engine.options import MAX_DEPTH, MAX_TREE_NODES, ConfigError
from engine.trace.records import SCHEMA, SCHEMA_TREE, SCHEMAS, DraftToken, SeqStep, Step, TraceError, TreeRecord

# --- strict loading -------------------------------------------------------------------------------
# A trace file is untrusted input (Replay accepts uploads on a public Space). It is parsed with size,
# depth and number limits, then every field the app reads is checked for type, finiteness and range,
# one small function per object kind, with the shared checkers of engine/checks.py. Every refusal is one
# TraceError sentence naming the field, e.g.
# "malformed trace: steps[12].seqs[3].num_accepted must be between 0 and 4; got 9".
MAX_FILE_BYTES = (
    32 * 1024 * 1024
)  # = server.maxUploadSize (.streamlit/config.toml, in MiB); scripts/investigate/bench_replay.py times the worst pair
MAX_STEPS = 100_000
MAX_SEQUENCES = 4096
MAX_OUTPUT_TOKENS = 1_000_000  # output ids of one sequence
TRACE = Checker(TraceError, "malformed trace", foreign="not a SpecLab trace", noun="trace file")
_fail, _obj, _list, _int, _num, _opt_num = TRACE.fail, TRACE.obj, TRACE.list, TRACE.int, TRACE.num, TRACE.opt_num
_str, _opt_str, _bool, _choice, _ids, _scalar = TRACE.str, TRACE.opt_str, TRACE.bool, TRACE.choice, TRACE.ids, TRACE.scalar


def _too_big(size: int) -> str:
    return str(TRACE.too_big(size, MAX_FILE_BYTES))


def parse_json(raw: bytes | str, name: str | None = None):
    """Parse trace JSON with the caps of engine/checks.py and MAX_FILE_BYTES (read at call time)."""
    return TRACE.parse(raw, MAX_FILE_BYTES, name)


_DRAFT_KEYS = ("id", "text", "draft_prob", "target_prob", "accepted")
_DRAFT_SET = frozenset(_DRAFT_KEYS)


def _fast_draft(d, position: int, num_accepted: int) -> bool:
    """Is this draft token plainly valid by the rules of `_draft_token`?"""
    if type(d) is not dict or d.keys() != _DRAFT_SET:
        return False
    tid = d["id"]
    return (
        type(tid) is int
        and tid >= 0
        and _text(d["text"])
        and _fine(d["draft_prob"], 1.0)
        and _fine(d["target_prob"], 1.0)
        and d["accepted"] is (position < num_accepted)
    )


def _draft_token(raw, where: str, position: int, num_accepted: int) -> DraftToken:
    # The most numerous object in a trace: a fast path accepts a plainly valid token (the same rules as below,
    # without building the error messages' field names); anything else takes the checked path for its message.
    if _fast_draft(raw, position, num_accepted):
        return DraftToken(
            id=raw["id"],
            text=raw["text"],
            draft_prob=float(raw["draft_prob"]),
            target_prob=float(raw["target_prob"]),
            accepted=raw["accepted"],
        )
    d = _obj(raw, where, _DRAFT_KEYS)
    accepted = _bool(d["accepted"], f"{where}.accepted")
    if accepted != (position < num_accepted):
        _fail(f"{where}.accepted", f"must be {str(position < num_accepted).lower()} (num_accepted is {num_accepted})", accepted)
    return DraftToken(
        id=_int(d["id"], f"{where}.id"),
        text=_str(d["text"], f"{where}.text"),
        draft_prob=_num(d["draft_prob"], f"{where}.draft_prob", 0.0, 1.0),
        target_prob=_num(d["target_prob"], f"{where}.target_prob", 0.0, 1.0),
        accepted=accepted,
    )


_TREE_KEYS = ("parents", "ids", "texts", "q", "p", "accepted")


def _tree(raw, where: str, drafted: list[DraftToken], num_accepted: int) -> TreeRecord:
    """A row's draft tree: equal-length lists, parents before children, the accepted nodes one path from
    the root holding num_accepted nodes, and `drafted` showing that path (TreeRecord.shown)."""
    d = _obj(raw, where, _TREE_KEYS)
    parents = _list(d["parents"], f"{where}.parents", MAX_TREE_NODES)
    n = len(parents)
    if n == 0:
        _fail(f"{where}.parents", "must list at least one node", parents)
    for key in _TREE_KEYS[1:]:
        if len(_list(d[key], f"{where}.{key}", MAX_TREE_NODES)) != n:
            _fail(f"{where}.{key}", f"must have one entry per node ({n})", d[key])
    tree = TreeRecord(
        parents=[_int(v, f"{where}.parents[{i}]", -1, i - 1) for i, v in enumerate(parents)],
        ids=_ids(d["ids"], f"{where}.ids", MAX_TREE_NODES),
        texts=[_str(v, f"{where}.texts[{i}]") for i, v in enumerate(d["texts"])],
        q=[_num(v, f"{where}.q[{i}]", 0.0, 1.0) for i, v in enumerate(d["q"])],
        p=[_num(v, f"{where}.p[{i}]", 0.0, 1.0) for i, v in enumerate(d["p"])],
        accepted=[_bool(v, f"{where}.accepted[{i}]") for i, v in enumerate(d["accepted"])],
    )
    if tree.depth > MAX_DEPTH:
        _fail(f"{where}.parents", f"must make a tree at most {MAX_DEPTH} deep", tree.depth)
    path = tree.path()
    expected = [-1] + path[:-1] if path else []
    if [tree.parents[i] for i in path] != expected:
        _fail(f"{where}.accepted", "must mark one path from the root (each accepted node's parent accepted)", path)
    if len(path) != num_accepted:
        _fail(f"{where}.accepted", f"must mark num_accepted ({num_accepted}) nodes", len(path))
    if [t.id for t in drafted] != [tree.ids[i] for i in tree.shown()]:
        _fail(f"{where}", "must be the tree whose path (and best rejected child) `drafted` shows", [t.id for t in drafted])
    return tree


_SEQ_STEP_KEYS = ("seq", "drafted", "num_accepted", "next_id", "next_text", "next_prob", "next_kind", "emitted", "finished")
_SEQ_STEP_SET = frozenset(_SEQ_STEP_KEYS)


def _fine(value, high: float = math.inf) -> bool:
    """Fast-path number check: an int or float (not a bool), 0 <= value <= high, finite (NaN fails every test)."""
    return (type(value) is float or type(value) is int) and 0 <= value <= high and value < math.inf


def _fine_ids(value, max_len: int) -> bool:
    return type(value) is list and len(value) <= max_len and all(type(v) is int and v >= 0 for v in value)


def _text(value) -> bool:
    return type(value) is str and value.isascii()


def _fast_seq_step(d, n_sequences: int) -> bool:
    """Is this row plainly valid by the rules of `_seq_step` (its draft tokens are checked on their own)?"""
    if type(d) is not dict or d.keys() != _SEQ_STEP_SET:
        return False
    seq, drafted, num_accepted = d["seq"], d["drafted"], d["num_accepted"]
    if not (
        type(seq) is int
        and 0 <= seq < n_sequences
        and type(drafted) is list
        and len(drafted) <= MAX_DEPTH
        and type(num_accepted) is int
        and 0 <= num_accepted <= len(drafted)
    ):
        return False
    kind = "plain" if not drafted else "bonus" if num_accepted == len(drafted) else "correction"
    next_id = d["next_id"]
    return (
        d["next_kind"] == kind
        and type(next_id) is int
        and next_id >= 0
        and _text(d["next_text"])
        and _fine(d["next_prob"], 1.0)
        and _fine_ids(d["emitted"], MAX_DEPTH + 1)
        and type(d["finished"]) is bool
    )


def _seq_step(raw, where: str, n_sequences: int, trees: bool = False) -> SeqStep:
    if _fast_seq_step(raw, n_sequences):  # the common case; anything else takes the checked path for its message
        d = raw
        num_accepted, drafted = d["num_accepted"], d["drafted"]
        return SeqStep(
            seq=d["seq"],
            drafted=[_draft_token(t, f"{where}.drafted[{i}]", i, num_accepted) for i, t in enumerate(drafted)],
            num_accepted=num_accepted,
            next_id=d["next_id"],
            next_text=d["next_text"],
            next_prob=float(d["next_prob"]),
            next_kind=d["next_kind"],
            emitted=d["emitted"],
            finished=d["finished"],
        )
    d = _obj(raw, where, _SEQ_STEP_KEYS, optional=("tree",) if trees else ())
    seq = _int(d["seq"], f"{where}.seq")
    if seq >= n_sequences:
        _fail(f"{where}.seq", f"must index one of the trace's {n_sequences} sequences", seq)
    drafted = _list(d["drafted"], f"{where}.drafted", MAX_DEPTH)
    num_accepted = _int(d["num_accepted"], f"{where}.num_accepted", 0, len(drafted))
    tokens = [_draft_token(t, f"{where}.drafted[{i}]", i, num_accepted) for i, t in enumerate(drafted)]
    kind = "plain" if not drafted else "bonus" if num_accepted == len(drafted) else "correction"
    if d["next_kind"] != kind:
        _fail(f"{where}.next_kind", f"must be {kind!r} ({num_accepted} of {len(drafted)} drafts accepted)", d["next_kind"])
    tree = None if d.get("tree") is None else _tree(d["tree"], f"{where}.tree", tokens, num_accepted)
    return SeqStep(
        seq=seq,
        drafted=tokens,
        num_accepted=num_accepted,
        next_id=_int(d["next_id"], f"{where}.next_id"),
        next_text=_str(d["next_text"], f"{where}.next_text"),
        next_prob=_num(d["next_prob"], f"{where}.next_prob", 0.0, 1.0),
        next_kind=kind,
        emitted=_ids(d["emitted"], f"{where}.emitted", MAX_DEPTH + 1),
        finished=_bool(d["finished"], f"{where}.finished"),
        tree=tree,
    )


_STEP_NUMBERS = ("draft_ms", "verify_ms", "overhead_ms", "target_flops", "draft_flops", "target_bytes", "draft_bytes", "flops_wasted")
_STEP_KEYS = ("index", "kind", "depth", "batch", "tokens_per_pass", "t_start_s", "t_end_s", *_STEP_NUMBERS)


_STEP_REQUIRED = frozenset(_STEP_KEYS)
_STEP_ALLOWED = _STEP_REQUIRED | {"util_pct", "policy_ms", "seqs"}
_STEP_ALLOWED_TREE = _STEP_ALLOWED | {"tree_nodes"}  # a /2 trace's tree steps say how many nodes each row verified


def _fast_step(d, trees: bool) -> bool:
    """Is this step (without its rows) plainly valid by the rules of `_step`?"""
    if type(d) is not dict or not (_STEP_REQUIRED <= d.keys() <= (_STEP_ALLOWED_TREE if trees else _STEP_ALLOWED)):
        return False
    index, depth, batch, tpp, util = d["index"], d["depth"], d["batch"], d["tokens_per_pass"], d.get("util_pct")
    nodes = d.get("tree_nodes")
    return (
        (nodes is None or (type(nodes) is int and 1 <= nodes <= MAX_TREE_NODES and tpp == batch * (nodes + 1)))
        and type(index) is int
        and index >= 0
        and d["kind"] in ("prefill", "decode")
        and type(depth) is int
        and 0 <= depth <= MAX_DEPTH
        and type(batch) is int
        and 1 <= batch <= MAX_SEQUENCES
        and type(tpp) is int
        and tpp >= 1
        and _fine(d["t_start_s"])
        and _fine(d["t_end_s"])
        and d["t_end_s"] >= d["t_start_s"]
        and all(_fine(d[k]) for k in _STEP_NUMBERS)
        and (util is None or _fine(util, 100.0))
        and _fine(d.get("policy_ms", 0.0))
        and type(d.get("seqs", [])) is list
        and len(d.get("seqs", [])) <= MAX_SEQUENCES
    )


def _step(raw, where: str, n_sequences: int, trees: bool = False) -> Step:
    step = _step_fields(raw, where, n_sequences, trees)
    if step.tree_nodes is not None:
        for i, row in enumerate(step.seqs):
            if row.tree is not None and len(row.tree.ids) != step.tree_nodes:
                _fail(f"{where}.seqs[{i}].tree.ids", f"must hold the step's tree_nodes ({step.tree_nodes}) nodes", len(row.tree.ids))
    return step


def _step_fields(raw, where: str, n_sequences: int, trees: bool) -> Step:
    if _fast_step(raw, trees):  # the common case; anything else takes the checked path for its message
        d = raw
        util = d.get("util_pct")
        return Step(
            index=d["index"],
            kind=d["kind"],
            depth=d["depth"],
            batch=d["batch"],
            tokens_per_pass=d["tokens_per_pass"],
            t_start_s=float(d["t_start_s"]),
            t_end_s=float(d["t_end_s"]),
            **{k: float(d[k]) for k in _STEP_NUMBERS},
            util_pct=None if util is None else float(util),
            policy_ms=float(d.get("policy_ms", 0.0)),
            seqs=[_seq_step(q, f"{where}.seqs[{i}]", n_sequences, trees) for i, q in enumerate(d.get("seqs", []))],
            tree_nodes=d.get("tree_nodes"),
        )
    optional = ("util_pct", "policy_ms", "seqs", "sm_clock_mhz", "power_w") + (("tree_nodes",) if trees else ())
    d = _obj(raw, where, _STEP_KEYS, optional=optional)
    t_start = _num(d["t_start_s"], f"{where}.t_start_s")
    t_end = _num(d["t_end_s"], f"{where}.t_end_s")
    if t_end < t_start:
        _fail(f"{where}.t_end_s", f"must be >= t_start_s ({t_start:g})", t_end)
    seqs = _list(d.get("seqs", []), f"{where}.seqs", MAX_SEQUENCES)
    return Step(
        index=_int(d["index"], f"{where}.index"),
        kind=_choice(d["kind"], f"{where}.kind", ("prefill", "decode")),
        depth=_int(d["depth"], f"{where}.depth", 0, MAX_DEPTH),
        batch=_int(d["batch"], f"{where}.batch", 1, MAX_SEQUENCES),
        tokens_per_pass=_int(d["tokens_per_pass"], f"{where}.tokens_per_pass", 1),
        t_start_s=t_start,
        t_end_s=t_end,
        **{k: _num(d[k], f"{where}.{k}") for k in _STEP_NUMBERS},
        util_pct=_opt_num(d.get("util_pct"), f"{where}.util_pct", 0.0, 100.0),
        policy_ms=_num(d.get("policy_ms", 0.0), f"{where}.policy_ms"),
        seqs=[_seq_step(s, f"{where}.seqs[{i}]", n_sequences, trees) for i, s in enumerate(seqs)],
        sm_clock_mhz=_opt_num(d.get("sm_clock_mhz"), f"{where}.sm_clock_mhz", 0.0, 1e5),
        power_w=_opt_num(d.get("power_w"), f"{where}.power_w", 0.0, 1e5),
        tree_nodes=_tree_nodes(d, where),
    )


def _tree_nodes(d: dict, where: str) -> int | None:
    """A tree step's nodes per row (optional): 1..MAX_TREE_NODES, and its pass held batch x (nodes + 1) tokens."""
    if d.get("tree_nodes") is None:
        return None
    nodes = _int(d["tree_nodes"], f"{where}.tree_nodes", 1, MAX_TREE_NODES)
    expected = d["batch"] * (nodes + 1)
    if d["tokens_per_pass"] != expected:
        _fail(f"{where}.tokens_per_pass", f"must be batch x (tree_nodes + 1) = {expected} in a tree step", d["tokens_per_pass"])
    return nodes


def _sequence(raw, where: str) -> dict:
    d = _obj(raw, where, ("prompt", "prompt_tokens", "output_ids", "text"))
    return {
        "prompt": _str(d["prompt"], f"{where}.prompt"),
        "prompt_tokens": _int(d["prompt_tokens"], f"{where}.prompt_tokens"),
        "output_ids": _ids(d["output_ids"], f"{where}.output_ids", MAX_OUTPUT_TOKENS),
        "text": _str(d["text"], f"{where}.text"),
    }


def _config(raw) -> dict:
    """The run's DecodeConfig, checked by DecodeConfig itself (one place for the option ranges)."""
    if not isinstance(raw, dict):
        _fail("config", "must be an object", raw)
    if "stop_at_eos" in raw:
        _bool(raw["stop_at_eos"], "config.stop_at_eos")
    try:
        DecodeConfig.from_dict(raw)
    except (ConfigError, TypeError, ValueError) as exc:
        raise TraceError(f"malformed trace: config: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    return dict(raw)


_SUMMARY_INTS = ("new_tokens", "target_forwards", "drafted_tokens", "accepted_tokens")
_SUMMARY_RATES = ("acceptance_rate", "alpha")
_SUMMARY_LOAD = ("cpu_s", "other_cpu_s", "load_avg")  # seconds of CPU time, and the 1-minute load average
_SUMMARY_DECODE = ("ttft_s", "decode_tokens_per_s", "tpot_ms")  # decoding apart from the prefill: every trace has them
MAX_CORES = 4096  # CPU cores a machine may have kept busy (summary.cpu_s and other_cpu_s over wall_s)
_SUMMARY_DRAWN = ("tokens_per_s", "ttft_s")  # numbers in every trace the engine writes, which the Replay page draws
_SUMMARY_NUMBERS = ("tokens_per_s", "ttft_s", "decode_tokens_per_s", "tpot_ms", "mean_accepted", "tokens_per_step")
_SUMMARY_NUMBERS += ("flops", "flops_wasted", "bytes", "draft_ms", "verify_ms", "overhead_ms")


def _summary(raw) -> dict:
    if not isinstance(raw, dict):
        _fail("summary", "must be an object", raw)
    for key in ("new_tokens", "wall_s", "tokens_per_s", *_SUMMARY_DECODE):
        if key not in raw:
            why = " (decoding timed apart from the prefill: engine.trace.records.decode_timing)" if key in _SUMMARY_DECODE else ""
            raise TraceError(f"malformed trace: summary is missing {key}{why}")
    out = {}
    for key, value in raw.items():
        where = f"summary.{key}"
        if key == "wall_s":
            out[key] = TRACE.positive(value, where)
        elif key in _SUMMARY_DRAWN:  # every engine trace has them (its prompt's pass times the first token): drawn as numbers
            out[key] = _num(value, where, 0.0)
        elif key in _SUMMARY_INTS:
            out[key] = _int(value, where)
        elif key in _SUMMARY_RATES:
            out[key] = _opt_num(value, where, 0.0, 1.0)
        elif key in _SUMMARY_NUMBERS:
            out[key] = _opt_num(value, where)
        elif key in ("device", "dtype"):
            out[key] = _str(value, where)
        elif key in _SUMMARY_LOAD:  # optional (engine/loadmeter.py); older traces lack them
            out[key] = _opt_num(value, where)
        elif key in ("cpus", "threads"):  # optional: the machine's CPUs, the threads the run used
            out[key] = None if value is None else _int(value, where, 1, 1_000_000)
        elif key == "per_position_acceptance":
            rates = None if value is None else _list(value, where, MAX_DEPTH)
            out[key] = None if rates is None else [_num(r, f"{where}[{i}]", 0.0, 1.0) for i, r in enumerate(rates)]
        else:
            out[key] = _scalar(value, where)
    for key in ("cpu_s", "other_cpu_s"):  # CPU seconds over the run's wall time are cores: no machine has millions
        if out.get(key) is not None and out[key] > MAX_CORES * out["wall_s"]:
            _fail(f"summary.{key}", f"is more CPU time than {MAX_CORES:,} cores give in the run's wall_s", out[key])
    return out


_META_STRINGS = ("device", "device_name", "dtype", "target_name", "draft_name", "util_source", "recorded_at")


def _meta(raw) -> dict:
    """Run facts: strings, numbers, true/false or null; `probe` (HardwareProbe.to_dict) one flat object."""
    if not isinstance(raw, dict):
        _fail("meta", "must be an object", raw)
    out = {}
    for key, value in raw.items():
        where = f"meta.{key}"
        if key in _META_STRINGS:
            out[key] = _opt_str(value, where)
        elif key == "probe":
            out[key] = _probe(value, where)
        else:
            out[key] = _scalar(value, where)
    for key in ("cpu_s", "other_cpu_s"):  # CPU seconds over the run's wall time are cores: no machine has millions
        if out.get(key) is not None and out[key] > MAX_CORES * out["wall_s"]:
            _fail(f"summary.{key}", f"is more CPU time than {MAX_CORES:,} cores give in the run's wall_s", out[key])
    return out


def _probe(raw, where: str) -> dict:
    if not isinstance(raw, dict):
        _fail(where, "must be an object", raw)
    out = {}
    for key, value in raw.items():
        if key in ("device", "device_name", "dtype"):
            out[key] = _str(value, f"{where}.{key}")
        elif key in ("peak_bandwidth", "peak_flops", "ridge_point"):
            out[key] = _num(value, f"{where}.{key}")
        else:
            out[key] = _scalar(value, f"{where}.{key}")
    return out


def trace_parts(data) -> dict:
    """Check a parsed trace field by field: the keyword arguments of `Trace` (engine/trace/file.py)."""
    if not isinstance(data, dict):
        raise TraceError("not a SpecLab trace: the JSON top level must be an object")
    schema = data.get("schema")
    if schema not in SCHEMAS:
        raise TraceError(f"unsupported trace schema {show(schema)}: this SpecLab reads {SCHEMA!r} and {SCHEMA_TREE!r}")
    missing = [k for k in ("config", "sequences", "steps", "summary") if k not in data]
    if missing:
        raise TraceError(f"malformed trace: missing {', '.join(missing)}")
    raw_sequences = _list(data["sequences"], "sequences", MAX_SEQUENCES)
    sequences = [_sequence(s, f"sequences[{i}]") for i, s in enumerate(raw_sequences)]
    raw_steps = _list(data["steps"], "steps", MAX_STEPS)
    trees = schema == SCHEMA_TREE  # only /2 traces may hold draft trees
    steps = [_step(s, f"steps[{i}]", len(sequences), trees) for i, s in enumerate(raw_steps)]
    summary = _summary(data["summary"])
    _same_tokens(summary, sequences, steps)
    return {
        "config": _config(data["config"]),
        "sequences": sequences,
        "steps": steps,
        "summary": summary,
        "meta": _meta(data.get("meta", {})),
    }


def _same_tokens(summary: dict, sequences: list[dict], steps: list) -> None:
    """The summary's new tokens are the tokens the steps emitted and the rows' outputs hold (the engine writes all three
    from one run): a summary drawn as a race must have the steps and the text behind it."""
    emitted = sum(len(row.emitted) for step in steps for row in step.seqs)
    written = sum(len(seq["output_ids"]) for seq in sequences)
    if not summary["new_tokens"] == emitted == written:
        _fail(
            "summary.new_tokens",
            f"must equal the tokens the steps emitted ({emitted}) and the sequences' output_ids hold ({written})",
            summary["new_tokens"],
        )
