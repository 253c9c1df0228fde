"""SpecLab's decoding engine: real draft/verify speculative decoding beside plain decoding, fully traced.

    from engine import load_pair, generate, generate_steps, DecodeConfig, Trace

The contract: docs/design.md §4 (and the README's "Engine API"). This package never imports streamlit or plotly.
"""

from engine.config import ConfigError, DecodeConfig
from engine.decoding.decode import generate, generate_steps
from engine.model.pair import ModelLoadError, ModelPair, load_pair
from engine.trace.file import Trace
from engine.trace.records import Step, TraceError

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
