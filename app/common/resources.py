"""The app's only shared state (st.cache_resource): model pairs, the hardware probe, the run lock and each pair's warm
shared prefix (`prefix_cache`).

Everything here is shared by every session of the server. The model pair is stateless (all decoding
state lives inside one engine call, docs/design.md §1), the probe is a measurement, and the lock makes sure
one run at a time touches the model, because timings of two overlapping runs would be meaningless.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from app.common import hub_fetch
from engine import ConfigError, DecodeConfig, ModelLoadError, generate, load_pair
from engine.decoding.passcurve import pass_curve
from engine.drafters import available_drafters
from engine.hardware import probe
from engine.model.pair import hub_reachable
from engine.model.prefix_cache import PrefixCache


@dataclass(frozen=True)
class PairPreset:
    key: str
    label: str
    target: str | None  # None = the embedded default
    draft: str | None
    hub: bool  # needs the Hugging Face Hub
    gpu_only: bool = False  # too large to load on a CPU server (memory) or to decode there in useful time


PRESETS = {
    p.key: p
    for p in (
        PairPreset("embedded", "SmolLM2-135M-Instruct, embedded (default draft)", None, "default", hub=False),
        PairPreset(
            "smollm2-1.7b",
            "SmolLM2-135M-Instruct → SmolLM2-1.7B-Instruct (hub)",
            "HuggingFaceTB/SmolLM2-1.7B-Instruct",
            "HuggingFaceTB/SmolLM2-135M-Instruct",
            hub=True,
        ),
        PairPreset(
            "qwen2.5-7b",
            "Qwen2.5-0.5B-Instruct → Qwen2.5-7B-Instruct (hub)",
            "Qwen/Qwen2.5-7B-Instruct",
            "Qwen/Qwen2.5-0.5B-Instruct",
            hub=True,
            gpu_only=True,
        ),
    )
}


@st.cache_resource(show_spinner=False, ttl=300)
def hub_available() -> bool:
    """Is the Hugging Face Hub reachable from this server? (re-checked every 5 minutes)"""
    hub_reachable.cache_clear()
    return hub_reachable(timeout_s=2.0)


RESIDENT_PAIRS = 2  # model pairs kept loaded at once (each holds its weights in memory)


@st.cache_resource(show_spinner=False)
def _store() -> dict:
    """Server-wide: the loaded pairs (least recently used first), the probes, and a lock for the two dicts."""
    return {"pairs": OrderedDict(), "probes": {}, "lock": threading.Lock()}


def _cached_or_loaded(kind: str, key: tuple, load, notice=None, keep: int | None = None):
    """`load()` once per key for the whole server, in a model turn: loading weights, the warm-up decode and the
    probe keep the CPU busy for seconds and would otherwise land inside another session's timed run. A key
    already loaded returns at once, without queueing; a session that queued behind another loading the same
    key gets that one's result."""
    store = _store()
    with store["lock"]:
        if key in store[kind]:
            if keep:
                store[kind].move_to_end(key)
            return store[kind][key]
    with model_turn(notice if notice is not None else st.empty()):
        with store["lock"]:
            if key in store[kind]:
                return store[kind][key]
        value = load()
        with store["lock"]:
            store[kind][key] = value
            while keep and len(store[kind]) > keep:
                store[kind].popitem(last=False)  # the least recently used pair leaves memory
    return value


def is_loaded(preset_key: str, dtype: str) -> bool:
    store = _store()
    with store["lock"]:
        return (preset_key, dtype) in store["pairs"]


def _pair_loader(preset: PairPreset, dtype: str):
    def load():
        pair = load_pair(target=preset.target, draft=preset.draft, dtype=dtype)
        warm_up(pair)
        return pair

    return load


PRELOAD_ERRORS = (ModelLoadError, ConfigError, OSError, RuntimeError)  # what a load raises; the page's own load shows it


PRELOAD = "SPECLAB_PRELOAD"  # "0": no background load when the app starts (the tests set it: tests/conftest.py)


@st.cache_resource(show_spinner=False)
def preload(preset_key: str = "embedded", dtype: str = "auto", _then: tuple = ()) -> threading.Thread | None:
    """Load a local preset's pair (its warm-up and pass curve included) and this machine's probe once, in the
    background, when the app first runs, so a visitor's first live run does not wait for them (the model's first load
    had made lesson 1's first live run the slowest, 2026-12-04); then each of `_then` (callables of the pair: the
    lessons' preparations, app/lessons/registry.py), one run-lock turn each, taken only while no run is queued, so a run
    asked for meanwhile waits for one step at most. It takes the run lock like any load (a run asked for meanwhile
    queues, and is told so); where a step fails, the page's own run does that work and shows why. A hub preset is never
    preloaded (a download on start). Returns the thread (None for a hub preset)."""
    preset = PRESETS[preset_key]
    if preset.hub:
        return None
    store, lock, load = _store(), run_lock(), _pair_loader(preset, dtype)

    def work() -> None:
        while not lock.acquire(timeout=1.0):
            pass  # another run holds the model: wait for it
        try:
            with store["lock"]:
                pair = store["pairs"].get((preset_key, dtype))
            if pair is None:
                pair = load()
                with store["lock"]:
                    store["pairs"].setdefault((preset_key, dtype), pair)
            key = (pair.device.type, pair.dtype_name)
            with store["lock"]:
                known = key in store["probes"]
            if not known:
                measured = probe(*key, quick=True)
                with store["lock"]:
                    store["probes"].setdefault(key, measured)
        except PRELOAD_ERRORS:
            return  # the page loads it again when asked, and shows why it failed
        finally:
            lock.release()
        for step in _then:
            while lock.waiting or not lock.acquire(timeout=1.0):
                time.sleep(0.2)  # a visitor's queued run goes first: the preparations only fill idle time
            try:
                step(pair)
            except (*PRELOAD_ERRORS, ValueError):
                pass  # the run that needs it does the work itself
            finally:
                lock.release()

    thread = threading.Thread(target=work, name="speclab-preload", daemon=True)
    thread.start()
    return thread


def get_pair(preset_key: str, dtype: str, on_progress=None):
    """The model pair for (preset, dtype), loaded once for the whole server (in a model turn); at most
    RESIDENT_PAIRS stay resident. A hub preset not loaded yet is first checked against the GPU's free
    memory (VramRefusal, one line) and downloaded OUTSIDE the run lock (`on_progress(repo, done, total)`,
    app/common/hub_fetch.py): a long download never queues the other visitors' runs."""
    preset = PRESETS[preset_key]
    if preset.hub and not is_loaded(preset_key, dtype):
        refusal = hub_fetch.vram_refusal(preset, dtype)
        if refusal:
            raise hub_fetch.VramRefusal(refusal)
        hub_fetch.fetch(preset, on_progress)
    return _cached_or_loaded("pairs", (preset_key, dtype), _pair_loader(preset, dtype), keep=RESIDENT_PAIRS)


def warm_up(pair) -> None:
    """Run both lanes once on a tiny prompt, so one-time kernel set-up is not billed to the first AR lane, and
    have this machine's pass-cost curve ready (read from disk, or measured once per machine: 10-20 s on a
    2-core CPU) for goodput, lesson 3, the Playground and the Predictor, so no timed run pays for it."""
    pass_curve(pair)
    generate(pair, ["Hi"], DecodeConfig(mode="autoregressive", max_new_tokens=3))
    for drafter in available_drafters(pair):  # each drafter the pair can run, once
        generate(pair, ["Hi"], DecodeConfig(depth=2, drafter=drafter, max_new_tokens=3))


@st.cache_resource(show_spinner=False)
def prefix_cache(preset_key: str, dtype: str) -> PrefixCache:
    """The warm shared prefixes of one model pair (engine/model/prefix_cache.py): a document the Playground decodes
    again (its warm-up, its rounds, the next run) is prefilled once. Read and written only inside the run lock
    (`model_turn`), so one run at a time uses it; at most 16 prefixes (1 GiB in all) of at most 8,192 tokens (about 100 MB for a
    4,096-token document over the embedded pair in bfloat16)."""
    return PrefixCache()


def get_probe(device: str, dtype: str):
    """This machine's measured peak bandwidth and FLOP/s in the model's dtype (measured once, in a model
    turn: a probe timed beside another session's run would measure neither)."""
    return _cached_or_loaded("probes", (device, dtype), lambda: probe(device, dtype, quick=True))


class RunLock:
    """One run at a time; `waiting` counts sessions queued behind the current run."""

    def __init__(self):
        self._lock = threading.Lock()
        self._count = threading.Lock()
        self.waiting = 0
        self.holder_since: float | None = None

    def try_acquire(self) -> bool:
        if self._lock.acquire(blocking=False):
            self.holder_since = time.monotonic()
            return True
        return False

    def acquire(self, timeout: float) -> bool:
        if self._lock.acquire(timeout=timeout):
            self.holder_since = time.monotonic()
            return True
        return False

    def enter_queue(self) -> None:
        with self._count:
            self.waiting += 1

    def leave_queue(self) -> None:
        with self._count:
            self.waiting -= 1

    def release(self) -> None:
        self.holder_since = None
        self._lock.release()

    def busy_for(self) -> float:
        since = self.holder_since
        return 0.0 if since is None else time.monotonic() - since


@st.cache_resource(show_spinner=False)
def run_lock() -> RunLock:
    return RunLock()


def acquire_lock(lock: RunLock, notice) -> None:
    """Take the run lock; while another session holds it, show that this one is queued.

    Returns holding the lock, or raises without holding it: never both. Page calls (`notice.warning`,
    `notice.empty`) raise Streamlit's rerun/stop exceptions when the visitor changes a widget or closes the
    tab, so the one page call made after the lock is taken releases it again if it raises (issue 30)."""
    if lock.try_acquire():
        return
    lock.enter_queue()
    try:
        t0 = time.monotonic()
        while not lock.acquire(timeout=0.5):
            ahead = max(lock.waiting - 1, 0)
            notice.warning(  # raises (a rerun, a closed tab) only while the lock is not ours
                f"Queued: another run is using the model (busy for {lock.busy_for():.0f} s"
                + (f", {ahead} more waiting" if ahead else "")
                + f"). Yours starts as soon as it finishes; you have waited {time.monotonic() - t0:.0f} s.",
                icon=":material/hourglass_top:",
            )
    finally:
        lock.leave_queue()
    cleared = False
    try:
        notice.empty()
        cleared = True
    finally:
        if not cleared:  # it raised (StopException / RerunException included): the caller's `try` is not entered yet
            lock.release()


@contextlib.contextmanager
def model_turn(notice):
    """`with model_turn(notice):` the body runs holding the run lock (queued, and told so, while another
    session's run is on the model); the lock is released however the body ends, reruns included."""
    lock = run_lock()
    acquire_lock(lock, notice)  # held on return; not held if it raised
    try:
        yield
    finally:
        lock.release()


@st.cache_resource(show_spinner=False)
def classroom_store():
    """The class-session store (app/classroom/store.py), one for the whole server: a SQLite file under
    $SPECLAB_DATA. Opening it can raise ClassroomError, OSError or sqlite3.Error (not cached: the next run
    retries); the Lessons page turns them into one notice (app/lessons/kit/class_page.py)."""
    from app.classroom.beacon import FOLDER, ClassBeacons  # here, so this file's other users do not load the store
    from app.classroom.store import ClassroomStore

    # Each class's change number as a file Streamlit serves (app/static/, server.enableStaticServing): what a student's
    # idle page polls (issue 41). Named under a secret made now, once per server.
    beacons = None
    if st.get_option("server.enableStaticServing"):
        beacons = ClassBeacons(Path(__file__).resolve().parents[1] / "static" / FOLDER)
    return ClassroomStore(beacons=beacons)
