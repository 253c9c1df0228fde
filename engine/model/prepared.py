"""Prepared weights: the matrices each backend's passes read, built once per loaded model and held beside it.

SpecLab's own passes (engine/model/layer.py's `decoder_layer`, the native layer of engine/model/cpukernels.py) read a
layer as (ln1, wqkv, wo, ln2, wgu, wd): one QKV and one gate-up product. transformers' model keeps its own separate
q/k/v and gate/up parameters, untouched: its forward is the exactness oracle (the "transformers" backend) and reads
exactly the weights it loaded. What a backend needs besides them is made here, once per model, at the first run
that asks for it, and kept for every later run:

| backend | the matrices its passes read | extra copy |
|---|---|---|
| "torch", "cuda_graphs" | wqkv and wgu concatenated (`torch.cat`), wo and wd transformers' own | qkv and gate-up |
| "fused", bfloat16 on a CPU | all four prepacked for oneDNN (from a concatenation made and dropped) | the four, and the head |
| "fused", elsewhere | as "torch" | qkv and gate-up |
| "native" | all four and the head in the native kernels' layout (cpukernels.Packed), for passes of any size | the four, and the head |

So each backend holds at most one extra copy of a matrix. The native copy serves every pass: up to
cpukernels.LAYER_TOKENS tokens the whole layer is one native call, beyond (a prefill, a verify pass of 16 x 5
tokens) the Python layer calls the same packed matrices, measured as fast as oneDNN's prepacked GEMM there and faster
than F.linear (docs/journal.md, "prepared weights made once beside the model"); the oneDNN and concatenated copies
the native backend used to keep for those passes are gone. A packed matrix that meets an
input the kernels do not take (another dtype) falls back to transformers' own matrices, separate products whose
outputs are concatenated (`cpukernels.Packed`'s fallback).

Where they live: a weak-keyed registry (`_REGISTRY`, a `weakref.WeakKeyDictionary`) from the model they were made
from (the transformers model of a LeanLlama; for the EAGLE head's body-only LeanLlama, that LeanLlama, which its
runner keeps for the pair's life) to its `PreparedWeights`. Nothing is attached to transformers' modules and no
`.weight.data` is rebound; the entry goes when the model does. A `PreparedWeights` holds the model's tensors, never
the model. If the model's weights change after a copy was made (an in-place update bumps a tensor's version, a
rebinding changes its storage), the next run's lookup (`prepared`) sees it and prepares them again.
"""

from __future__ import annotations

import itertools
import threading
import weakref

import torch

from engine.model import cpukernels

# A prepared native matrix takes passes of up to this many tokens (batch × new tokens); a larger one (a prefill, a
# wide verify at a large batch) multiplies by the model's own matrices (`cpukernels.Packed`'s fallback: oneDNN's
# bfloat16 GEMM on a CPU, tiled for AMX where the CPU has it), several times faster there than the native
# dot-product kernels (docs/journal.md, "the native kernels stop at the crossover").
NATIVE_TOKENS = 64
_REGISTRY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _version(t: torch.Tensor) -> int:
    try:
        return t._version
    except RuntimeError:  # an inference tensor keeps no version counter; it cannot be updated in place either
        return 0


def _stamp(layers) -> tuple:
    """What changes when a model's weights do: each tensor's storage and version."""
    return tuple((t.data_ptr(), _version(t)) for layer in layers for t in layer)


def _onednn(w: torch.Tensor) -> bool:
    return w.device.type == "cpu" and w.dtype == torch.bfloat16 and torch.backends.mkldnn.is_available()


def _onednn_pack(w: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(w, batch_size=1)


class PreparedWeights:
    """One model's prepared matrices, per form (`layers`, `head`, `matrix`, each asked with the run's `Backend`, whose
    form the table above gives: `form_of`); `source` is its layers as the model holds them: per layer (ln1, q, k, v,
    o, ln2, gate, up, down), transformers' own tensors."""

    def __init__(self, source: list[tuple]):
        self.source = [tuple(layer) for layer in source]
        self.stamp = _stamp(self.source)
        self.forms: dict[str, list[tuple]] = {}  # "concat", "onednn", "native" -> per layer (ln1, wqkv, wo, ln2, wgu, wd)
        self.heads: dict[str, tuple] = {}  # form -> (the head tensor it was made from, its prepared copy)
        self.restricted: tuple | None = None  # (rows, head rows): a draft's reduced head (FR-Spec), made once
        self.matrices: dict[tuple, tuple] = {}  # (form, id(w)) -> (w, its copy): `matrix`'s, the EAGLE head's own

    def layers(self, backend) -> list[tuple]:
        """Per layer (ln1, wqkv, wo, ln2, wgu, wd) in `backend`'s form: "concat" (wqkv, wgu concatenated, wo, wd the
        model's own), "onednn" (all four prepacked for oneDNN, where the model is bfloat16 on a CPU; else "concat") or
        "native" (all four packed for the native kernels, where they load and take the dtype; else "onednn")."""
        form = form_of(backend)
        if form == "onednn" and not _onednn(self.source[0][1]):
            form = "concat"
        if form == "native" and not (cpukernels.available() and cpukernels.supports(self.source[0][1])):
            form = "onednn" if _onednn(self.source[0][1]) else "concat"
        with _lock:
            if form not in self.forms:
                memory = _native_memory(self.source) if form == "native" else None
                self.forms[form] = [_prepare(layer, form, memory) for layer in self.source]
            return self.forms[form]

    def head(self, head: torch.Tensor, backend):
        """The output head `head` (V, H) in `backend`'s form ("native", "onednn"; "concat": the tensor itself), one kept
        per form; a new head tensor (a draft's reduced head) replaces the form's earlier one."""
        form = form_of(backend)
        if form == "native" and not (cpukernels.available() and cpukernels.supports(head)):
            form = "onednn"
        if form == "onednn" and not _onednn(head):
            return head
        if form not in ("native", "onednn"):
            return head
        with _lock:
            kept = self.heads.get(form)
            if kept is None or kept[0] is not head:
                value = _native_head(head) if form == "native" else _onednn_pack(head)
                kept = self.heads[form] = (head, value)
            return kept[1]

    def matrix(self, w: torch.Tensor, backend):
        """One more matrix of the model in `backend`'s form (the EAGLE head's fc, fusion and reduced output head):
        packed for the native kernels in the "native" form where they take it (natively up to cpukernels.LAYER_TOKENS
        rows, beyond through the matrix itself), else the tensor itself. Made once per matrix and form."""
        form = form_of(backend)
        if form != "native" or not (cpukernels.available() and cpukernels.supports(w)):
            return w
        with _lock:
            kept = self.matrices.get((form, id(w)))
            if kept is None or kept[0] is not w:
                kept = self.matrices[(form, id(w))] = (w, cpukernels.Packed(w))
            return kept[1]

    def restricted_head(self, weight: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """weight[rows] (a draft's reduced head, FR-Spec), made once for these rows and reused by later runs."""
        with _lock:
            kept = self.restricted
            if kept is None or kept[0].shape != rows.shape or not torch.equal(kept[0], rows.to(kept[0].device)):
                kept = self.restricted = (rows.detach().clone(), weight[rows].contiguous())
            return kept[1]

    def copies(self) -> dict[str, int]:
        """Bytes of each form made so far (layers and heads; what `layers` and `head` hold beside the model's own)."""
        sizes: dict[str, int] = {}
        for form, layers in self.forms.items():
            sizes[form] = sum(_nbytes(w) for layer, src in zip(layers, self.source) for w in _own(layer, src))
        for form, (_, value) in self.heads.items():
            sizes[form + " head"] = _nbytes(value)
        for (form, _), (_, value) in self.matrices.items():
            sizes[form + " matrices"] = sizes.get(form + " matrices", 0) + _nbytes(value)
        return sizes


def _own(layer: tuple, src: tuple) -> list:
    """The matrices of a prepared layer that are not the model's own tensors."""
    model_own = {id(t) for t in src}
    return [w for w in (layer[1], layer[2], layer[4], layer[5]) if id(w) not in model_own]


def _nbytes(w) -> int:
    if isinstance(w, cpukernels.Packed):
        return w.data.numel() * w.data.element_size()
    if w.is_mkldnn:
        return w.numel() * w.element_size()
    return w.untyped_storage().nbytes()


def _prepare(layer: tuple, form: str, memory=None) -> tuple:
    ln1, wq, wk, wv, wo, ln2, wg, wu, wd = layer
    wqkv, wgu = torch.cat([wq, wk, wv]).contiguous(), torch.cat([wg, wu]).contiguous()
    if form == "onednn":  # the concatenations only as the source of the packed copies
        return ln1, _onednn_pack(wqkv), _onednn_pack(wo), ln2, _onednn_pack(wgu), _onednn_pack(wd)
    if form == "native":  # the fallback: the model's own matrices (cpukernels.Packed concatenates separate products)
        pairs = ((wqkv, (wq, wk, wv)), (wo, wo), (wgu, (wg, wu)), (wd, wd))
        packed = [cpukernels.Packed(w, fallback, NATIVE_TOKENS, memory=next(memory)) for w, fallback in pairs]
        return ln1, packed[0], packed[1], ln2, packed[2], packed[3]
    return ln1, wqkv, wo, ln2, wgu, wd


def _native_memory(source: list[tuple]):
    """One block of memory for every packed matrix of a model's layers (cpukernels.weight_memory), cut in the order
    `_prepare` packs them (per layer qkv, o, gate-up, down): an iterator of its slices. One block, not a tensor per
    matrix: the copies' placement then no longer depends on what the process freed before (docs/engine.md,
    "Prepared weights")."""
    sizes = []
    for _, wq, wk, wv, wo, _, wg, wu, wd in source:
        shapes = ((wq.shape[0] + wk.shape[0] + wv.shape[0], wq.shape[1]), wo.shape, (wg.shape[0] + wu.shape[0], wg.shape[1]), wd.shape)
        sizes += [cpukernels.packed_bytes(n, k, wq.dtype) for n, k in shapes]
    block = cpukernels.weight_memory(sum(sizes))
    starts = itertools.accumulate(sizes, initial=0)
    return iter([block[start : start + size] for start, size in zip(starts, sizes)])


def _native_head(head: torch.Tensor) -> cpukernels.Packed:
    """The head in the kernels' layout, in a block of its own (cpukernels.weight_memory)."""
    memory = cpukernels.weight_memory(cpukernels.packed_bytes(*head.shape, head.dtype))
    return cpukernels.Packed(head, head, NATIVE_TOKENS, memory=memory)


def owner(lean):
    """What a LeanLlama's prepared weights are keyed by: its transformers model, else (a body-only LeanLlama) itself."""
    return lean.model if getattr(lean, "model", None) is not None else lean


def prepared(lean) -> PreparedWeights:
    """The PreparedWeights of a LeanLlama's model, made on first use and again if the model's weights changed."""
    key = owner(lean)
    with _lock:
        entry = _REGISTRY.get(key)
        if entry is None or len(entry.source) != len(lean.layers) or entry.stamp != _stamp(lean.layers):
            entry = _REGISTRY[key] = PreparedWeights(lean.layers)
        return entry


def lookup(model) -> PreparedWeights | None:
    """The PreparedWeights made for `model` (a transformers model, or a body-only LeanLlama), or None."""
    return _REGISTRY.get(model)


FORMS = {"native": "native", "fused": "onednn"}  # a backend's form; every other backend: "concat"


def form_of(backend) -> str:
    """The form of the matrices a `Backend` (engine/model/backend.py) reads, by the table above: decided here, from the
    run's backend, each time a pass asks for its weights."""
    return FORMS.get(backend.name, "concat")
