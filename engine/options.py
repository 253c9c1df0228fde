"""The names and limits of a run's options, and the error a bad one raises: the vocabulary below `DecodeConfig`.

engine/config.py validates a run's options against these; the model code (engine/model/) and the drafters read them
too, so they sit in a module that imports nothing of the engine (and no torch). Which drafters exist is the drafter
registry's business (engine/drafters/__init__.py), not a list here.
"""

from __future__ import annotations

from enum import Enum

MAX_DEPTH = 16
MAX_SEED = 2**63 - 1  # torch.Generator.manual_seed takes a signed 64-bit seed
MAX_TASK = 64  # characters in a task's name (DecodeConfig.task)
MAX_TEMPERATURE = 100.0  # beyond this the distribution is uniform to float precision anyway
MAX_TREE_NODES = 64  # draft-tree nodes per row (one verify pass holds batch x (nodes + 1) tokens)
MAX_TREE_TOPK = 8  # children expanded per tree node


def tree_capacity(depth: int, topk: int) -> int:
    """The most nodes a tree `depth` levels deep with top-`topk` children can draft: topk at the first level, then
    topk² candidates per further level (EAGLE-2's expansion, engine/drafters/tree.py)."""
    return topk + (depth - 1) * topk * topk


class Mode(str, Enum):
    AUTOREGRESSIVE = "autoregressive"
    SPECULATIVE = "speculative"


class BackendKind(str, Enum):  # how a run's passes are computed (engine/model/backend.py has the table)
    AUTO = "auto"  # the device's default: "native" on the CPU ("fused" where the kernels do not load), "torch" elsewhere
    TRANSFORMERS = "transformers"  # transformers' own forward over the dynamic cache: the exactness oracle
    TORCH = "torch"  # the lean Llama forward (engine/model/fastllama.py) over the dynamic cache
    FUSED = "fused"  # fused QKV and gate-up products over static KV buffers, torch ops (engine/model/fastpass.py)
    NATIVE = "native"  # "fused" with SpecLab's native CPU kernels (engine/model/cpukernels.py)
    CUDA_GRAPHS = "cuda_graphs"  # the lean forward's passes captured as CUDA graphs over static buffers (CUDA only)
    CUDA_GRAPHS_STATIC = "cuda_graphs_static"  # those passes run eagerly, each attending exactly its columns (any device)
    CUDA_GRAPHS_PADDED = "cuda_graphs_padded"  # those passes run eagerly, padded to their graph bucket (any device)


class GraphMode(str, Enum):  # the cuda_graphs option, a deprecated alias of `backend` (engine/model/backend.py)
    AUTO = "auto"  # the "cuda_graphs" backend on CUDA when backend is "auto"; elsewhere the device's default
    OFF = "off"  # no graphs unless backend="cuda_graphs"
    STATIC = "static"  # the cuda_graphs backend run eagerly, each pass attending exactly its columns
    PADDED = "padded"  # the cuda_graphs backend run eagerly, each pass padded to its graph bucket: what a graph replays


class PolicyKind(str, Enum):
    FIXED = "fixed"  # always `depth`
    OFF_ABOVE_BATCH = "off_above_batch"  # the classic rule (vLLM V0's disable_by_batch_size)
    HEURISTIC = "heuristic"  # adaptive: deeper after a full acceptance, shallower after a rejection
    BATCH_TABLE = "batch_table"  # k per batch-size range (vLLM num_speculative_tokens_per_batch_size)
    GOODPUT = "goodput"  # k (or a tree's size) maximising expected tokens/s from the measured pass cost and the run's acceptance


class ConfigError(ValueError):
    """Raised for any invalid decoding option; the message names the option and its allowed range."""
