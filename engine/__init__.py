"""SpecLab's decoding engine: real draft/verify speculative decoding beside plain decoding, fully traced.

    from engine import load_pair, generate, generate_steps, DecodeConfig, Trace

The contract: docs/design.md §4 (and the README's "Engine API"). This package never imports streamlit or plotly.
The API's names are loaded at their first use (PEP 562), so a torch-free module of the engine (engine.formats,
engine.options, engine.config) can be imported without loading torch and the models' code.
"""

from __future__ import annotations

import importlib

_API = {
    "ConfigError": "engine.options",
    "DecodeConfig": "engine.config",
    "generate": "engine.decoding.decode",
    "generate_steps": "engine.decoding.decode",
    "ModelLoadError": "engine.model.pair",
    "ModelPair": "engine.model.pair",
    "load_pair": "engine.model.pair",
    "Trace": "engine.trace.file",
    "Step": "engine.trace.records",
    "TraceError": "engine.trace.records",
}

__all__ = [
    "ConfigError",
    "DecodeConfig",
    "ModelLoadError",
    "ModelPair",
    "Step",
    "Trace",
    "TraceError",
    "generate",
    "generate_steps",
    "load_pair",
]


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(_API[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
