"""DecodeConfig: the validated options of one decoding run (the options' names and limits: engine/options.py).

Every entry point (the app, the CLI, the tests, the benchmarks) builds one of these and hands it to
`engine.generate` / `engine.generate_steps`. Validation happens here, once, so that bad input fails
with one clear message naming the option and its allowed range (nano-vllm's validated option
dataclasses are the model).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import Enum

from engine.options import (
    MAX_DEPTH,
    MAX_SEED,
    MAX_TASK,
    MAX_TEMPERATURE,
    MAX_TREE_NODES,
    MAX_TREE_TOPK,
    BackendKind,
    ConfigError,
    GraphMode,
    Mode,
    PolicyKind,
    tree_capacity,
)


def _number(value) -> bool:
    """A real number (not a bool, not NaN or infinite): what every float option must be."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _enum(kind: type[Enum], value, name: str):
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(repr(m.value) for m in kind)
        raise ConfigError(f"{name} must be one of {allowed}; got {value!r}") from None


def _drafter(kind):
    """The registered drafter class `kind` names (engine/drafters/__init__.py, DRAFTERS); ConfigError otherwise. Imported
    here, not at the top: importing this module stays free of torch."""
    from engine.drafters import DRAFTERS

    if not isinstance(kind, str) or kind not in DRAFTERS:
        raise ConfigError(f"drafter must be one of {', '.join(map(repr, DRAFTERS))}; got {kind!r}")
    return DRAFTERS[kind]


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
    # Prefix caching: rows whose prompts begin with the same tokens (at least kvcache.SHARED_PREFIX_MIN of them: one
    # document, many questions) prefill that prefix once and copy its keys and values into every row
    # (engine/model/kvcache.py, RaggedCache.prefill_shared). False: every row prefills its whole prompt.
    share_prefix: bool = True
    # The prompts' task (a Spec-Bench category, a workload's name; "" for none): policy "goodput" keeps the acceptance it
    # learns per task and starts the next run of that task from it rather than from the drafter's card
    # (engine/decoding/goodput.py, `restore`). Decoding itself never reads it: the output is the same.
    task: str = ""

    def __post_init__(self):
        object.__setattr__(self, "mode", _enum(Mode, self.mode, "mode").value)
        _drafter(self.drafter)
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
        if not isinstance(self.share_prefix, bool):
            raise ConfigError(f"share_prefix must be true or false; got {self.share_prefix!r}")
        if not isinstance(self.task, str) or len(self.task) > MAX_TASK or not all(c.isprintable() for c in self.task):
            raise ConfigError(f'task must be a name of at most {MAX_TASK} printable characters ("" for none); got {self.task!r}')
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
        if not _drafter(self.drafter).branches:
            from engine.drafters import DRAFTERS

            branching = " or ".join(repr(kind) for kind, d in DRAFTERS.items() if d.branches)
            raise ConfigError(
                f"tree drafting (tree_nodes > 0) needs a drafter with a distribution to branch on: drafter={branching}, "
                f"not {self.drafter!r}"
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
        """The options as a dict; `backend` only when not "auto", `share_prefix` only when off and `task` only when named,
        so a default run's trace stays readable by SpecLabs from before the options (their DecodeConfig refuses unknown
        options)."""
        out = asdict(self)
        if not out["task"]:
            del out["task"]
        if out["backend"] == BackendKind.AUTO.value:
            del out["backend"]
        if out["share_prefix"]:
            del out["share_prefix"]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> DecodeConfig:
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown decoding options: {', '.join(sorted(unknown))}")
        return cls(**data)
