"""The backend: the one way a run's passes are computed on its device, chosen once per run.

| backend | the pass | KV cache | default on |
|---|---|---|---|
| "transformers" | transformers' own forward: the exactness oracle, and models the lean one does not cover | dynamic | - |
| "torch" | the lean Llama forward (engine/model/fastllama.py), one torch call per op | dynamic | CUDA, MPS |
| "fused" | one QKV and one gate-up product per layer, torch ops (engine/model/fastpass.py) | static | a CPU without the kernels |
| "native" | "fused", each layer of a small pass one call into SpecLab's C kernels (cpukernels.py) | static | the CPU |
| "cuda_graphs" | the lean forward's passes captured as CUDA graphs and replayed (engine/model/graphs.py) | static | - (opt-in) |
| "cuda_graphs_static", "cuda_graphs_padded" | "cuda_graphs"'s passes run eagerly, exact or padded to the graph buckets | static | - |

`choose_backend(device, requested, cuda_graphs)` makes the choice from `DecodeConfig.backend` ("auto": the
device's default above), the one knob. `DecodeConfig.cuda_graphs` is its deprecated alias, mapped here: "static"
and "padded" are "cuda_graphs_static" and "cuda_graphs_padded" (what a graph replays, run eagerly, on any device);
"auto" asks for "cuda_graphs" where the device is CUDA (and leaves the default elsewhere, saying why).
An explicit backend the device cannot run is a one-line ConfigError. Per model (`Backend.for_model`): a model
the lean forward does not cover runs "transformers"; a draft tree under "cuda_graphs" runs "torch"
(`Backend.for_tree`).

This module is the only one that reads the environment about passes: SPECLAB_BACKEND (one of the names, or
"auto") stands in for "auto". The variables it replaced (SPECLAB_FAST, SPECLAB_LEAN, SPECLAB_NATIVE) are still
read here, mapped, with a one-line deprecation note. A backend named by SPECLAB_BACKEND other than "native" also
keeps the kernels unloaded: SPECLAB_BACKEND=fused is what a CPU without the kernels runs. The small operations
outside the pass (`Backend.logit_stats`, `Backend.topk_logq`: greedy verification's argmax and normaliser, a draft
tree's children) are the run's backend's: natively on "native", torch's way on every other backend. A run's
backend is chosen once and handed down (the decode loop to its caches, drafters, verification and trees); nothing
below reads the environment again.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import torch

from engine.model import cpukernels
from engine.model.fastllama import supports
from engine.options import BackendKind, ConfigError, GraphMode

BACKENDS = tuple(kind.value for kind in BackendKind if kind is not BackendKind.AUTO)  # every name DecodeConfig.backend takes
EAGER_GRAPHS = {"cuda_graphs_static": "static", "cuda_graphs_padded": "padded"}  # names of the graph backend run eagerly
OVERRIDE = "SPECLAB_BACKEND"
_LEGACY_FAST = {"0": "torch", "off": "torch", "eager": "fused", "native": "native"}
_warned: set[str] = set()


@dataclass(frozen=True)
class Backend:
    """A chosen backend. name: one of BACKENDS; graph_mode (name "cuda_graphs"): "graphs" (captured), "static" or
    "padded" (run eagerly); note: why this and not what was asked or the device's default (for the trace)."""

    name: str
    device: torch.device
    graph_mode: str | None = None
    note: str | None = None

    @property
    def lean(self) -> bool:
        """Whether SpecLab's own Llama forward runs (every backend but "transformers")."""
        return self.name != "transformers"

    @property
    def static(self) -> bool:
        """Whether the KV cache is static buffers (engine/model/static_cache.py) rather than the dynamic cache."""
        return self.name in ("fused", "native", "cuda_graphs")

    @property
    def native(self) -> bool:
        return self.name == "native"

    def logit_stats(self, logits: torch.Tensor, top: bool = False) -> tuple[torch.Tensor, ...] | None:
        """On the "native" backend cpukernels.logit_stats (each row's argmax and log-sum-exp in one call, with `top` its
        maximum too), else None: the caller then takes torch's way (engine/sampling.py, greedy_stats). The run's backend
        decides, never the process's environment: a "fused" run takes no kernel."""
        return cpukernels.logit_stats(logits, top) if self.native else None

    def topk_logq(self, logits: torch.Tensor, k: int, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor] | None:
        """On the "native" backend cpukernels.topk_logq (a draft tree's children: each row's top k and their log q in one
        call), else None: the caller then takes torch's way (engine/drafters/tree.py)."""
        return cpukernels.topk_logq(logits, k, temperature) if self.native else None

    def for_model(self, model, runner=None) -> Backend:
        """This backend for one model: "transformers" where the lean forward does not cover it (a ConfigError for the
        explicit eager graph modes, which exist to check the lean forward's buffers)."""
        if self.name == "transformers" or runner is not None or (model is not None and supports(model)):
            return self
        if self.graph_mode in (GraphMode.STATIC.value, GraphMode.PADDED.value):
            raise ConfigError(f"cuda_graphs={self.graph_mode!r} needs the lean Llama forward (a plain Llama)")
        return Backend("transformers", self.device, note="the lean Llama forward does not cover this model: transformers' forward")

    def for_tree(self) -> Backend:
        """Draft trees run on the fast pass (engine/model/static_tree.py) or over the dynamic cache, never as graphs."""
        if self.name != "cuda_graphs":
            return self
        return Backend("torch", self.device, note="tree drafting runs eager over the dynamic KV cache")


@dataclass(frozen=True)
class _Override:
    name: str | None  # the backend the environment asks for, None: the device's default
    kernels: bool  # whether the native kernels may load in this process
    source: str  # the variable that said so, for messages


def _deprecated(variable: str, instead: str) -> None:
    if variable not in _warned:
        _warned.add(variable)
        print(f"speclab: {variable} is deprecated; use {OVERRIDE}={instead} (engine/model/backend.py)", file=sys.stderr)


def _override() -> _Override:
    """What the environment asks for: SPECLAB_BACKEND, else the deprecated variables, mapped."""
    value = os.environ.get(OVERRIDE, "").strip().lower()
    if value and value != "auto":
        if value not in BACKENDS:
            raise ConfigError(f"{OVERRIDE} must be auto or one of {', '.join(BACKENDS)}; got {value!r}")
        return _Override(value, value == "native", f"{OVERRIDE}={value}")
    if value:
        return _Override(None, True, "")
    lean = os.environ.get("SPECLAB_LEAN", "").strip()
    fast = os.environ.get("SPECLAB_FAST", "").strip().lower()
    no_native = os.environ.get("SPECLAB_NATIVE", "").strip().lower() in ("0", "off")
    if lean == "0":
        _deprecated("SPECLAB_LEAN=0", "transformers")
        return _Override("transformers", False, "SPECLAB_LEAN=0")
    if fast:
        if fast not in _LEGACY_FAST:
            removed = " (the compiled pass was removed: 0.32x the native pass on the CPU)" if fast in ("1", "on", "compiled") else ""
            raise ConfigError(f"SPECLAB_FAST={fast} is not a pass{removed}; use {OVERRIDE}=native, fused or torch")
        _deprecated(f"SPECLAB_FAST={fast}", _LEGACY_FAST[fast])
        name = _LEGACY_FAST[fast]
        return _Override(name, name == "native" and not no_native, f"SPECLAB_FAST={fast}")
    if no_native:
        _deprecated("SPECLAB_NATIVE=0", "fused")
        return _Override(None, False, "SPECLAB_NATIVE=0")
    return _Override(None, True, "")


def native_kernels():
    """The loaded native library, or None (`why_not_native` says why)."""
    return cpukernels.library() if _override().kernels else None


def why_not_native() -> str | None:
    """None when the native kernels are loaded, else one line saying why not."""
    override = _override()
    if not override.kernels:
        return override.source
    return cpukernels.why_not()


def default_backend(device) -> Backend:
    """The device's default: "native" on the CPU where the kernels load, else "fused" there; "torch" elsewhere."""
    device = torch.device(device)
    if device.type != "cpu":
        return Backend("torch", device)
    if native_kernels() is not None:
        return Backend("native", device)
    return Backend("fused", device, note=f"native kernels unavailable: {why_not_native()}")


def lean_default() -> bool:
    """Whether a cache made without a DecodeConfig runs the lean forward (not when the environment asks for transformers)."""
    return _override().name != "transformers"


def choose_backend(device, requested: str = "auto", cuda_graphs: str = "off") -> Backend:
    """The backend a run on `device` uses: `requested` (DecodeConfig.backend; "auto": SPECLAB_BACKEND, else the device's
    default), with `cuda_graphs` (DecodeConfig.cuda_graphs, the deprecated alias) mapped as the module docstring says."""
    device = torch.device(device)
    if requested not in BACKENDS + ("auto",):
        raise ConfigError(f"backend must be auto or one of {', '.join(BACKENDS)}; got {requested!r}")
    if cuda_graphs in (GraphMode.STATIC.value, GraphMode.PADDED.value):  # the deprecated alias of the eager graph backends
        if requested not in ("auto", "cuda_graphs", "cuda_graphs_" + cuda_graphs):
            raise ConfigError(f"cuda_graphs={cuda_graphs!r} runs the cuda_graphs backend eagerly; it cannot go with backend={requested!r}")
        requested = "cuda_graphs_" + cuda_graphs
    name = requested if requested != "auto" else (_override().name or "auto")
    if name in EAGER_GRAPHS:
        mode = EAGER_GRAPHS[name]
        return Backend("cuda_graphs", device, mode, f"backend={name!r} runs the cuda_graphs backend's passes eagerly ({mode})")
    graphs = cuda_graphs == GraphMode.AUTO.value
    if name == "auto" and graphs and device.type == "cuda":
        return Backend("cuda_graphs", device, "graphs")
    chosen = default_backend(device) if name == "auto" else _named(name, device)
    if graphs and chosen.name != "cuda_graphs":  # cuda_graphs="auto" asked for graphs: say why there are none
        why = f"this run is on {device.type}" if device.type != "cuda" else f"backend {name!r} was asked for"
        return Backend(chosen.name, device, note=f"CUDA graphs need CUDA; {why}" if device.type != "cuda" else f"no CUDA graphs: {why}")
    return chosen


def _named(name: str, device: torch.device) -> Backend:
    """An explicitly named backend on `device`, or a ConfigError saying why the device cannot run it."""
    if name == "cuda_graphs" and device.type != "cuda":
        eager = "backend='cuda_graphs_padded' runs its pass eagerly"
        raise ConfigError(f"backend='cuda_graphs' needs CUDA; this run is on {device.type} ({eager})")
    if name == "native" and (device.type != "cpu" or native_kernels() is None):
        why = f"this run is on {device.type}" if device.type != "cpu" else why_not_native()
        raise ConfigError(f"backend='native' needs SpecLab's CPU kernels: {why}")
    return Backend(name, device, "graphs" if name == "cuda_graphs" else None)


def pass_key(device) -> str:
    """The device's default pass as a key for measurements of it (engine/decoding/passcurve.py): its name, and for the
    native kernels their source's hash."""
    chosen = default_backend(device)
    return chosen.name + (f" {cpukernels.fingerprint()}" if chosen.native else "")
