"""What drafting costs on an H200, for a run re-timed there (engine/roofline/retime.py): the n-gram lookup's price
from its recorded time on the H200 machine's host, the shipped EAGLE head's and draft model's from their own shapes
priced by the roofline predictor (labelled as a model). Pure numbers; no torch.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from engine.costs import ModelCosts
from engine.formats import head_weight_shapes
from engine.roofline.architectures import Architecture
from engine.roofline.gpus import gpu
from engine.roofline.predictor import Roof
from engine.roofline.recordings import RecordingError
from engine.roofline.retime import DraftPrices, predicted_draft_prices, recorded_draft_prices

ASSETS = Path(__file__).resolve().parents[2] / "assets"


GPU = "H200"


DTYPE = "bfloat16"


def _config(folder: str) -> dict:
    data = json.loads((ASSETS / folder / "config.json").read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("config.json is not an object")
    return data


def draft_model_costs(folder: str = "draft") -> tuple[ModelCosts, str]:
    """The shipped draft model's cost model (its Llama config; its head cut to draft_vocab.json's ids where present)
    and its shape in words. ValueError / OSError / KeyError where the config cannot be read."""
    c = _config(folder)
    heads = int(c["num_attention_heads"])
    arch = Architecture(
        "draft",
        "draft",
        f"assets/{folder}/config.json",
        layers=int(c["num_hidden_layers"]),
        hidden=int(c["hidden_size"]),
        intermediate=int(c["intermediate_size"]),
        heads=heads,
        kv_heads=int(c.get("num_key_value_heads") or heads),
        head_dim=int(c.get("head_dim") or int(c["hidden_size"]) // heads),
        vocab=int(c["vocab_size"]),
        tied=bool(c.get("tie_word_embeddings", False)),
    )
    costs = arch.costs(DTYPE)
    vocab = ASSETS / folder / "draft_vocab.json"
    if vocab.exists():
        costs = costs.with_head_rows(len(json.loads(vocab.read_text(encoding="utf-8"))["ids"]))
    shape = f"{arch.layers} layers, {arch.hidden} wide, a head over {costs.vocab_rows:,} tokens"
    return costs, shape


def eagle_costs(folder: str = "eagle") -> tuple[ModelCosts, str]:
    """The shipped EAGLE head's cost model for one head step (fc, its fused layers' map, one decoder layer and its
    reduced head; it borrows the target's embedding), as engine/model/eagle_head.py `costs` counts it, and its shape
    in words."""
    c = _config(folder)
    shapes = head_weight_shapes(c)
    hidden = int(c["hidden_size"])
    head = int(c.get("head_vocab") or c["vocab_size"]) * hidden
    size = lambda dims: functools.reduce(lambda a, b: a * b, dims, 1)  # noqa: E731
    linear = sum(size(s) for k, s in shapes.items() if k.endswith(".weight")) + head
    params = sum(size(s) for s in shapes.values())
    costs = ModelCosts(
        linear_params=linear,
        head_params=head,
        weight_bytes=(params + head) * 2,
        n_layers=1,
        n_heads=int(c["num_attention_heads"]),
        n_kv_heads=int(c["num_key_value_heads"]),
        head_dim=int(c["head_dim"]),
        elem_bytes=2,
        vocab_rows=head // hidden,
    )
    return costs, f"one decoder layer {hidden} wide, a head over {head // hidden:,} tokens"


@functools.cache
def prices(drafter: str, name: str = "") -> DraftPrices | None:
    """The drafter's prices on the H200 (measured for the n-gram lookup, a model for the draft model and the EAGLE
    head), None where it cannot be priced. name: the drafter's display name, for the label (default: its kind)."""
    if drafter == "ngram":
        try:
            found = recorded_draft_prices("ngram")
        except RecordingError:
            return None
        if found is None:
            return None
        return DraftPrices(
            found.batches,
            found.ms,
            "measured: the n-gram lookup is string matching on the host CPU, priced at the time it took per drafted "
            f"position on the H200 machine's host ({found.label})",
            per_position=True,
        )
    build = {"model": draft_model_costs, "eagle": eagle_costs}.get(drafter)
    if build is None:
        return None
    try:
        costs, shape = build()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    roof = Roof.from_gpu(gpu(GPU), DTYPE)
    label = (
        f"model, not a measurement: the {name or drafter}'s own shape ({shape}) priced by the roofline predictor, one "
        f"draft pass per drafted position, at the {gpu(GPU).name}'s data-sheet peaks plus the CUDA-graph overhead measured on an H200 "
        "(engine/roofline/predictor.py)"
    )
    return predicted_draft_prices(costs, roof, label)
