"""DecodeConfig: the validated options of one decoding run.

Every entry point (the app, the CLI, the tests, the benchmarks) builds one of these and hands it to
`engine.generate` / `engine.generate_steps`. Validation happens here, once, so that bad input fails
with one clear message naming the option and its allowed range (nano-vllm's validated option
dataclasses are the model).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import Enum

MAX_DEPTH = 16
MAX_SEED = 2**63 - 1  # torch.Generator.manual_seed takes a signed 64-bit seed
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


class DrafterKind(str, Enum):  # the keys of engine.drafters.DRAFTERS (a test keeps them equal)
    MODEL = "model"  # a small causal LM sharing the target's tokenizer
    NGRAM = "ngram"  # prompt-lookup decoding: no model at all
    EAGLE = "eagle"  # an EAGLE head: one layer over the target's own hidden states (engine/drafters/eagle.py)


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
    OFF_ABOVE_BATCH = "off_above_batch"  # the classic rule (vLLM V0's disable_by_batch_size, removed in 2026)
    HEURISTIC = "heuristic"  # adaptive: deeper after a full acceptance, shallower after a rejection
    BATCH_TABLE = "batch_table"  # k per batch-size range (vLLM num_speculative_tokens_per_batch_size)
    GOODPUT = "goodput"  # k (or a tree's size) maximising expected tokens/s from the measured pass cost and the run's acceptance


def _number(value) -> bool:
    """A real number (not a bool, not NaN or infinite): what every float option must be."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class ConfigError(ValueError):
    """Raised for any invalid decoding option; the message names the option and its allowed range."""


def _enum(kind: type[Enum], value, name: str):
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(repr(m.value) for m in kind)
        raise ConfigError(f"{name} must be one of {allowed}; got {value!r}") from None


@dataclass(frozen=True)
class DecodeConfig:
    mode: str = "speculative"
    depth: int = 4  # k: draft tokens proposed per step (0 = plain decoding through the same code path)
    drafter: str = "model"
    policy: str = "fixed"
    disable_by_batch_size: int = 8  # used by policy "off_above_batch": speculate only while batch <= this
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    max_new_tokens: int = 64
    seed: int = 0
    ngram_size: int = 3  # longest n-gram the n-gram drafter tries to match
    # Model drafters (model, eagle) stop a row's draft early once the product of their own probabilities
    # over its drafts falls below this (EAGLE-2's joint confidence); `depth` is then the most they draft.
    # 0 = always draft `depth` tokens.
    confidence_threshold: float = 0.0
    stop_at_eos: bool = True
    # policy "batch_table": ((min_batch, max_batch, k), ...), vLLM's num_speculative_tokens_per_batch_size;
    # k = 0 switches speculation off; a batch no row covers drafts `depth`. None: derived from this
    # machine's measured pass-cost curve (engine/decoding/policies.py).
    batch_table: tuple[tuple[int, int, int], ...] | None = None
    # Tree drafting (EAGLE-2, engine/drafters/tree.py; drafters "eagle" and "model"): each draft step expands the `tree_topk` most likely
    # children of the `tree_topk` best nodes so far, and the `tree_nodes` nodes of highest joint draft
    # confidence, at most `depth` deep, are verified in one target pass with a tree attention mask.
    # 0 and 0 = today's chain of `depth` tokens. With policy "goodput", `tree_nodes` is the most a step
    # verifies: it chooses per step between plain, a chain and the tree cut to its best n nodes.
    tree_nodes: int = 0
    tree_topk: int = 0
    # How passes are computed, chosen once per run (engine/model/backend.py, choose_backend): "auto" is the device's
    # default ("native" on the CPU, "fused" there without the native kernels, "torch" on CUDA and MPS; $SPECLAB_BACKEND
    # stands in for "auto"); "transformers", "torch", "fused", "native" or "cuda_graphs" by name (a ConfigError where
    # the device cannot run it), and "cuda_graphs_static" / "cuda_graphs_padded": the graph backend's passes run eagerly
    # over static buffers, on any device (exact windows / padded to the graph buckets; no trees). A model the lean
    # forward does not cover runs "transformers".
    backend: str = "auto"
    # Deprecated: the one knob is `backend`. Kept as its alias (and recorded as given): "off" (default) asks for
    # nothing; "static" / "padded" are backend "cuda_graphs_static" / "cuda_graphs_padded"; "auto" asks for the
    # "cuda_graphs" backend where the device is CUDA and backend is "auto" (elsewhere the device's default runs, the
    # trace's graph_note says why; draft trees there run "torch" over the dynamic cache).
    cuda_graphs: str = "off"

    def __post_init__(self):
        object.__setattr__(self, "mode", _enum(Mode, self.mode, "mode").value)
        object.__setattr__(self, "drafter", _enum(DrafterKind, self.drafter, "drafter").value)
        object.__setattr__(self, "policy", _enum(PolicyKind, self.policy, "policy").value)
        object.__setattr__(self, "cuda_graphs", _enum(GraphMode, self.cuda_graphs, "cuda_graphs").value)
        object.__setattr__(self, "backend", _enum(BackendKind, self.backend, "backend").value)
        for name in ("depth", "max_new_tokens", "seed", "ngram_size", "disable_by_batch_size", "tree_nodes", "tree_topk"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{name} must be an integer; got {value!r}")
        if not 0 <= self.depth <= MAX_DEPTH:
            raise ConfigError(f"depth must be between 0 and {MAX_DEPTH}; got {self.depth}")
        if not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"seed must be between 0 and 2**63 - 1; got {self.seed}")
        if not _number(self.temperature) or not 0 <= self.temperature <= MAX_TEMPERATURE:
            raise ConfigError(f"temperature must be >= 0 (0 = greedy) and at most {MAX_TEMPERATURE:g}; got {self.temperature!r}")
        if not _number(self.top_p) or not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1]; got {self.top_p!r}")
        if not _number(self.confidence_threshold) or not 0 <= self.confidence_threshold <= 1:
            raise ConfigError(
                f"confidence_threshold must be between 0 and 1 (0 = always draft depth tokens); got {self.confidence_threshold!r}"
            )
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1; got {self.max_new_tokens}")
        if not 1 <= self.ngram_size <= 8:
            raise ConfigError(f"ngram_size must be between 1 and 8; got {self.ngram_size}")
        if self.disable_by_batch_size < 1:
            raise ConfigError(f"disable_by_batch_size must be >= 1; got {self.disable_by_batch_size}")
        self._check_batch_table()
        self._check_tree()

    def _check_tree(self) -> None:
        nodes, topk = self.tree_nodes, self.tree_topk
        if not 0 <= nodes <= MAX_TREE_NODES:
            raise ConfigError(f"tree_nodes must be between 0 (a chain) and {MAX_TREE_NODES}; got {nodes}")
        if not 0 <= topk <= MAX_TREE_TOPK:
            raise ConfigError(f"tree_topk must be between 0 (a chain) and {MAX_TREE_TOPK}; got {topk}")
        if (nodes == 0) != (topk == 0):
            raise ConfigError(f"tree_nodes and tree_topk go together (both 0 = a chain); got tree_nodes={nodes}, tree_topk={topk}")
        if nodes == 0:
            return
        if self.cuda_graphs in (GraphMode.STATIC.value, GraphMode.PADDED.value):
            raise ConfigError(f"tree drafting needs cuda_graphs='off' or 'auto' (dynamic cache or fast pass), not {self.cuda_graphs!r}")
        if self.backend in (BackendKind.CUDA_GRAPHS_STATIC.value, BackendKind.CUDA_GRAPHS_PADDED.value):
            raise ConfigError(f"tree drafting needs the dynamic cache or the fast pass, not backend={self.backend!r}")
        if self.drafter == DrafterKind.NGRAM.value:
            raise ConfigError(
                "tree drafting (tree_nodes > 0) needs a drafter with a distribution to branch on: drafter='eagle' or 'model', not 'ngram'"
            )
        if self.depth < 1:
            raise ConfigError("tree drafting needs depth >= 1 (the tree's deepest level)")
        most = tree_capacity(self.depth, topk)
        if nodes > most:
            raise ConfigError(
                f"tree_nodes={nodes} is more than depth {self.depth} with top-{topk} can draft "
                f"({topk} + ({self.depth} - 1) x {topk}^2 = {most} candidates)"
            )
        if self.confidence_threshold > 0:
            raise ConfigError(
                "tree drafting ranks its nodes by joint confidence itself (tree_nodes): use confidence_threshold 0 "
                "(policy='goodput' chooses the tree's size per step)"
            )

    @property
    def tree(self) -> bool:
        """Tree drafting (tree_nodes > 0) rather than a chain."""
        return self.tree_nodes > 0

    def _check_batch_table(self) -> None:
        table = self.batch_table
        if table is None:
            return
        if isinstance(table, (str, bytes)) or not isinstance(table, (list, tuple)) or not table:
            raise ConfigError(f"batch_table must be a non-empty list of [min_batch, max_batch, k] rows; got {table!r}")
        rows = []
        for row in table:
            if not isinstance(row, (list, tuple)) or len(row) != 3 or not all(isinstance(v, int) and not isinstance(v, bool) for v in row):
                raise ConfigError(f"batch_table rows must be [min_batch, max_batch, k] integers; got {row!r}")
            low, high, k = row
            if not 1 <= low <= high:
                raise ConfigError(f"batch_table row {list(row)}: need 1 <= min_batch <= max_batch")
            if not 0 <= k <= MAX_DEPTH:
                raise ConfigError(f"batch_table row {list(row)}: k must be between 0 and {MAX_DEPTH}")
            rows.append((low, high, k))
        rows.sort()
        for (_, high, _), (low, _, _) in zip(rows, rows[1:]):
            if low <= high:
                raise ConfigError(f"batch_table ranges overlap at batch {low}: each batch size may appear in one row only")
        object.__setattr__(self, "batch_table", tuple(rows))

    @property
    def speculative(self) -> bool:
        return self.mode == Mode.SPECULATIVE.value

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def to_dict(self) -> dict:
        """The options as a dict; `backend` only when not "auto", so a default run's trace stays readable by SpecLabs
        from before the option (their DecodeConfig refuses unknown options)."""
        out = asdict(self)
        if out["backend"] == BackendKind.AUTO.value:
            del out["backend"]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> DecodeConfig:
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown decoding options: {', '.join(sorted(unknown))}")
        return cls(**data)
