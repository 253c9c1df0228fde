"""What the goodput policy learnt, kept across runs in one process (a warm start).

`make_policy` builds a fresh `GoodputDepth` for every `generate()` call, and a short run would otherwise spend
most of its steps re-learning what the previous run already measured: the per-position acceptance, the
confidence calibration a(q), the recent trees' value curve, the measured/curve verify-time ratio and the
drafter's measured cost. The policy reads its state from here when it is built and writes it back every few
decode steps and after its run's last (goodput.REMEMBER_STEPS: a run stopped half-way still leaves all but its
last few steps).

The key is everything that state depends on: the target, the drafter, dtype and device, the pass-cost curve it
is measured against (its `key`: machine, model, dtype, threads, torch) and the shape settings (depth, tree
nodes, tree top-k). A fresh process starts from the priors. The store is bounded (the MAX_ENTRIES most recently
used keys), guarded by a lock (the app serves several sessions from one process; runs take turns at the model,
but a page may read while another writes), and holds deep copies both ways, so no run ever shares a live object
with another. `forget()` empties it (tests; a user who wants a cold start).

It only changes what the policy proposes (plain, a chain of k, a tree of n); verification is untouched, so
warm-started runs are as lossless as cold ones.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict

MAX_ENTRIES = 32
_store: OrderedDict[tuple, dict] = OrderedDict()
_lock = threading.Lock()


def policy_key(pair, cfg, curve) -> tuple:
    """What a goodput policy's learnt state depends on (see the module docstring)."""
    drafter = {"eagle": pair.eagle_name, "model": pair.draft_name}.get(cfg.drafter, cfg.drafter)
    return (pair.target_name, cfg.drafter, drafter, pair.dtype_name, str(pair.device), curve.key, cfg.depth, cfg.tree_nodes, cfg.tree_topk)


def recall(key: tuple) -> dict | None:
    """A copy of the state last remembered under `key` (None: nothing yet, start from the priors)."""
    with _lock:
        state = _store.get(key)
        if state is None:
            return None
        _store.move_to_end(key)
        return copy.deepcopy(state)


def remember(key: tuple, state: dict) -> None:
    """Keep a copy of `state` under `key`, dropping the least recently used key past MAX_ENTRIES."""
    state = copy.deepcopy(state)
    with _lock:
        _store[key] = state
        _store.move_to_end(key)
        while len(_store) > MAX_ENTRIES:
            _store.popitem(last=False)


def forget() -> None:
    """Empty the store: the next goodput run starts from the priors."""
    with _lock:
        _store.clear()


def size() -> int:
    with _lock:
        return len(_store)
