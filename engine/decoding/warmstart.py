"""What the goodput policy learnt, kept across runs: in the process, and on disk across processes (a warm start).

`make_policy` builds a fresh `GoodputDepth` for every `generate()` call, and a short run would otherwise spend
most of its steps re-learning what the previous run already measured: the per-position acceptance, the
confidence calibration a(q), the recent trees' value curve, the measured/curve verify-time ratios and the
drafter's measured cost. The policy reads its state from here when it is built and writes it back every few
decode steps and after its run's last (goodput.REMEMBER_STEPS: a run stopped half-way still leaves all but its
last few steps); the last step of a run no other work disturbed (goodput.BUSY_CORES) also writes it to disk, so
the next process (a CLI run, a restarted app) starts where the last quiet run stopped.

The key is everything that state depends on: the target, the drafter, dtype and device, the pass-cost curve it
is measured against (its `key`: machine, model, dtype, threads, torch), the shape settings (depth, tree
nodes, tree top-k), the batch's log2 bucket (`batch_bucket`: what batch 32 learnt never steers batch 1), the
context's (`context_bucket`: a verify pass at 4,096 tokens of context reads far more of the KV cache than one at 100,
so what one learnt misprices the other; with the batch's, a (batch, context) -> state table) and the
version of the rule that prices a step (engine/decoding/chain_value.py, `PRICE_VERSION`: what was learnt under
another pricing is not read back), and the prompts' task where the run names one (`DecodeConfig.task`: its state
carries the text's part too, GoodputDepth.restore).
In memory the store is bounded (the MAX_ENTRIES most recently used keys), guarded by a lock
(the app serves several sessions from one process; runs take turns at the model, but a page may read while
another writes), and holds deep copies both ways, so no run ever shares a live object with another.

On disk each key has one file, `state_dir()`/<hash of the key>.json (beside the pass curves: $SPECLAB_DATA/goodput/,
else a Space's /data/speclab/goodput/, else $SPECLAB_CACHE/goodput/), format STATE_FORMAT, holding its key. It is
read with the project's strict checks (engine/checks.py): a file that is corrupt, of another format or version,
another key's, or out of range is ignored with a one-line notice and the policy starts from its priors; it is
never trusted, and the next run's last step replaces it. `forget()` empties the memory (tests; with
`files=True` the files too: a user who wants a cold start).

It only changes what the policy proposes (plain, a chain of k, a tree of n); verification is untouched, so
warm-started runs are as lossless as cold ones.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import pickle
import threading
from collections import OrderedDict
from pathlib import Path

from engine.checks import Checker, notice
from engine.decoding.chain_value import PRICE_VERSION
from engine.drafters import DRAFTERS

MAX_ENTRIES = 32
STATE_FORMAT = "speclab.goodput_state/6"  # /2: keyed by the batch's bucket; /3: explore_ms; /4: trees per depth; /5: context; /6: catch_ms
MAX_STATE_BYTES = 256 * 1024
_store: OrderedDict[tuple, dict] = OrderedDict()
_lock = threading.Lock()


class StateError(ValueError):
    """A stored goodput state that cannot be trusted."""


CHECK = Checker(StateError, "malformed goodput state", foreign="not a goodput state", noun="goodput state file", max_text=4000)


def batch_bucket(batch: int) -> int:
    """The log2 bucket of a batch size (1 -> 0, 2-3 -> 1, 4-7 -> 2, …, 32-63 -> 5): a key's batch part."""
    return max(1, int(batch)).bit_length() - 1


SHORT_CONTEXT = 512  # contexts below this share one bucket (chat prompts): their passes are the weights' reads


def context_bucket(context: int) -> int:
    """The bucket of a run's context (its longest prompt): 0 below SHORT_CONTEXT, then one per doubling
    (512-1023 -> 1, 1024-2047 -> 2, 2048-4095 -> 3, 4096-8191 -> 4, ...)."""
    return max(0, int(context) // (SHORT_CONTEXT // 2)).bit_length() - 1 if context >= SHORT_CONTEXT else 0


def policy_key(pair, cfg, curve, batch: int = 1, context: int = 0) -> tuple:
    """What a goodput policy's learnt state depends on (see the module docstring), for a run of `batch` rows over
    prompts of up to `context` tokens: their buckets, because the costs learnt at one load mislead another (a state
    learnt at batch 32, where verify passes are dear and drafting rarely pays, made a warm batch-1 run choose plain)."""
    loaded = pair.loaded.get(DRAFTERS[cfg.drafter].loads)
    drafter = loaded.name if loaded is not None else cfg.drafter  # what it runs on, by name; a lookup: its kind
    shape = (cfg.depth, cfg.tree_nodes, cfg.tree_topk)
    price = f"price/{PRICE_VERSION}"  # learnt under another pricing of a step (chain_value.step_rate): not this one's
    return (
        pair.target_name,
        cfg.drafter,
        drafter,
        pair.dtype_name,
        str(pair.device),
        curve.key,
        *shape,
        batch_bucket(batch),
        f"context/{context_bucket(context)}",
        price,
        *([f"task/{cfg.task}"] if cfg.task else []),  # a named task's acceptance is learnt apart (GoodputDepth.restore)
    )


def recall(key: tuple) -> dict | None:
    """A copy of the state last remembered under `key`: from memory, else from its file (None: nothing trusted
    yet, start from the priors)."""
    with _lock:
        state = _store.get(key)
        if state is None:
            state = _read(key)
            if state is None:
                return None
            _store[key] = state
        _store.move_to_end(key)
        return _copy(state)


def remember(key: tuple, state: dict, durable: bool = False) -> None:
    """Keep a copy of `state` under `key`, dropping the least recently used key past MAX_ENTRIES; `durable`:
    write it to its file too (a run's last step)."""
    state = _copy(state)
    with _lock:
        _store[key] = state
        _store.move_to_end(key)
        while len(_store) > MAX_ENTRIES:
            _store.popitem(last=False)
    if durable:
        _write(key, state)


def _copy(state: dict) -> dict:
    """A deep copy of a state (plain dicts, lists, tuples and numbers): a pickle round trip, much quicker than
    copy.deepcopy on goodput's state, which a run keeps every REMEMBER_STEPS decode steps."""
    return pickle.loads(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))


def forget(files: bool = False) -> None:
    """Empty the store: the next goodput run starts from the priors (`files`: the stored files too)."""
    with _lock:
        _store.clear()
    if files and state_dir().is_dir():
        for path in state_dir().glob("*.json"):
            path.unlink(missing_ok=True)


def size() -> int:
    with _lock:
        return len(_store)


# --- the files --------------------------------------------------------------------------------------------------
def state_dir() -> Path:
    """Beside the pass curves (engine/decoding/passcurve.py `curves_dir`), which the state is measured against."""
    from engine.decoding.passcurve import curves_dir

    return curves_dir().parent / "goodput"


def state_path(key: tuple) -> Path:
    return state_dir() / (hashlib.sha1(json.dumps(list(key)).encode()).hexdigest()[:16] + ".json")


def encode(key: tuple, state: dict) -> str:
    """The file's text: the key, the time, and the state with each table as [key, value] pairs (JSON keys are text)."""
    body = {name: sorted(value.items()) if isinstance(value, dict) else value for name, value in state.items()}
    body["calibration"] = [list(part) for part in state["calibration"]]
    saved = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    return json.dumps({"format": STATE_FORMAT, "key": list(key), "saved_at": saved, "state": body})


TABLES = {
    "verify_ratio": (-50.0, 1e6),
    "draft_ms": (0.0, 1e6),
    "tree_draft_ms": (0.0, 1e6),
    "step_ms": (0.0, 1e6),
    "explore_ms": (0.0, 1e6),
    "catch_ms": (0.0, 1e6),
}
COUNTERS = {"explore_every": (1, 1 << 20), "plain_run": (0, 1 << 40), "chain_steps": (0, 1 << 40)}


def decode(raw: bytes | str, key: tuple) -> dict:
    """The state a file holds for `key`, checked field by field (StateError naming the field otherwise)."""
    data = CHECK.parse(raw, MAX_STATE_BYTES)
    if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
        raise StateError(f"not a goodput state: format is not {STATE_FORMAT!r}")
    CHECK.obj(data, "file", ("format", "key", "saved_at", "state"))
    if data["key"] != json.loads(json.dumps(list(key))):
        CHECK.fail("key", "is another policy's (target, drafter, machine curve or shape settings differ)")
    CHECK.str(data["saved_at"], "saved_at")
    body = CHECK.obj(data["state"], "state", (*TABLES, *COUNTERS, "accept", "counts", "tree_gain", "calibration"))
    accept = [CHECK.num(a, f"state.accept[{i}]", 0.0, 1.0) for i, a in enumerate(CHECK.list(body["accept"], "state.accept", 17, 1))]
    counts = CHECK.list(body["counts"], "state.counts", len(accept), len(accept))
    state = {"accept": accept, "counts": [_numbers(c, f"state.counts[{i}]", 2, 0.0, 1e9) for i, c in enumerate(counts)]}
    for name, (low, high) in TABLES.items():
        pairs = CHECK.list(body[name], f"state.{name}", 4096)
        table = {}
        for i, pair in enumerate(pairs):
            where = f"state.{name}[{i}]"
            size, value = CHECK.list(pair, where, 2, 2)
            table[CHECK.int(size, where + "[0]", 0, 1 << 40)] = CHECK.num(value, where + "[1]", low, high)
        state[name] = table
    if state["verify_ratio"].get(0, 1.0) <= 0:
        CHECK.fail("state.verify_ratio", "must price passes above 0 ms (its ratio for size 0)", state["verify_ratio"][0])
    for name, (low, high) in COUNTERS.items():
        state[name] = CHECK.int(body[name], f"state.{name}", low, high)
    gain = body["tree_gain"]
    if gain is not None:  # per depth, a curve over n = 1..tree_nodes
        gain = [_numbers(c, f"state.tree_gain[{d}]", None, 0.0, 1e6) for d, c in enumerate(CHECK.list(gain, "state.tree_gain", 17, 1))]
    state["tree_gain"] = gain
    cal = CHECK.list(body["calibration"], "state.calibration", 2, 2)
    state["calibration"] = tuple(_numbers(part, f"state.calibration[{i}]", 8, 0.0, 1e9) for i, part in enumerate(cal))
    return state


def _numbers(value, where: str, length: int | None, low: float, high: float) -> list[float]:
    items = CHECK.list(value, where, length or 64, length or 1)
    return [CHECK.num(v, f"{where}[{i}]", low, high) for i, v in enumerate(items)]


def _read(key: tuple) -> dict | None:
    path = state_path(key)
    try:
        raw = path.read_bytes()
    except OSError:
        return None  # none stored yet (or unreadable: the same as none)
    try:
        return decode(raw, key)
    except StateError as exc:
        notice(f"ignored {path}: {exc}; goodput starts from its priors")
        return None


def _write(key: tuple, state: dict) -> None:
    path = state_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(encode(key, state))
        tmp.replace(path)
    except OSError:
        pass  # a read-only data folder: kept in memory only
