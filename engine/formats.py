"""File formats the runtime reads and the offline tools (training/) write, defined once, here.

- `draft_vocab.json` (FR-Spec's reduced draft vocabulary): {"format": "speclab.draft_vocab/1", "ids": [...]},
  the token ids a drafter's output head scores at decode time. Written next to a distilled draft
  (training/distill.py) and an EAGLE head (training/eagle.py).
- An EAGLE head folder: `config.json` ({"format": "speclab.eagle/1", the head's shape, training info}),
  `model.safetensors` (the head only: the target's embedding and output head are reused) and
  `draft_vocab.json`. `head_config` gives the shape a target implies; `head_weight_shapes` the tensors
  a head of that shape holds (the loader checks saved weights against it without building any module).
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def cache_dir() -> Path:
    """Where SpecLab keeps what it makes once per machine: the dequantised model, pass curves, native kernels."""
    return Path(os.environ.get("SPECLAB_CACHE") or Path.home() / ".cache" / "speclab")


SPACE_DATA = Path("/data")  # a Hugging Face Space's persistent storage, where the Space has it


def data_dir() -> Path:
    """Where SpecLab keeps what should outlive a restart (measured pass curves, goodput's learnt state, the class
    store): $SPECLAB_DATA, else /data/speclab where /data is writable (a Space's persistent storage: it survives
    restarts, the container's own disk does not), else `cache_dir()`. The one reader of SPECLAB_DATA."""
    if os.environ.get("SPECLAB_DATA"):
        return Path(os.environ["SPECLAB_DATA"]).expanduser()
    space = SPACE_DATA / "speclab"
    if os.access(space, os.W_OK) or (not space.exists() and SPACE_DATA.is_dir() and os.access(SPACE_DATA, os.W_OK)):
        return space
    return cache_dir()


DRAFT_VOCAB_FILE = "draft_vocab.json"
DRAFT_VOCAB_FORMAT = "speclab.draft_vocab/1"

EAGLE_FORMAT = "speclab.eagle/1"
EAGLE_WEIGHTS_FILE = "model.safetensors"
EAGLE_CONFIG_FILE = "config.json"


def write_draft_vocab(folder: Path, ids: list[int], note: str | None = None) -> int:
    """Write `folder/draft_vocab.json` with the sorted unique `ids`; returns how many."""
    ids = sorted(set(int(i) for i in ids))
    data = {"format": DRAFT_VOCAB_FORMAT, "ids": ids}
    if note:
        data["note"] = note
    (Path(folder) / DRAFT_VOCAB_FILE).write_text(json.dumps(data))
    return len(ids)


def read_draft_vocab(path: Path, vocab_size: int) -> list[int]:
    """The ids of a draft_vocab.json, checked (format, non-empty, in 0..vocab_size-1, no duplicates).
    Raises ValueError (malformed) or OSError (unreadable)."""
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != DRAFT_VOCAB_FORMAT:
        raise ValueError(f"expected format {DRAFT_VOCAB_FORMAT!r}")
    ids = data.get("ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < vocab_size for i in ids):
        raise ValueError(f"'ids' must be a non-empty list of token ids in 0..{vocab_size - 1}")
    if len(set(ids)) != len(ids):
        raise ValueError("'ids' has duplicates")
    return ids


def head_config(target_config, fuse_layers: tuple[int, ...] = ()) -> dict:
    """An EAGLE head's shape for a target: one decoder layer of the target's own width (so the target's
    embedding and output head fit it). fuse_layers (EAGLE-3): target decoder layers whose outputs join its
    final feature, fused by one linear map before the head's fc."""
    c = target_config
    extra = {"fuse_layers": list(fuse_layers)} if fuse_layers else {}
    return extra | {
        "format": EAGLE_FORMAT,
        "hidden_size": c.hidden_size,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "head_dim": getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
        "intermediate_size": c.intermediate_size,
        "rms_norm_eps": c.rms_norm_eps,
        "rope_theta": c.rope_parameters["rope_theta"],
        "vocab_size": c.vocab_size,
    }


def head_weight_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor an EAGLE head with this config saves, and its shape (training/eagle.py's EagleHead
    state dict; a test checks the two agree)."""
    h, i = config["hidden_size"], config["intermediate_size"]
    nh, nkv, hd = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    shapes = {
        "fc.weight": (h, 2 * h),
        "fc.bias": (h,),
        "input_layernorm": (h,),
        "q_proj.weight": (nh * hd, h),
        "k_proj.weight": (nkv * hd, h),
        "v_proj.weight": (nkv * hd, h),
        "o_proj.weight": (h, nh * hd),
        "post_attention_layernorm": (h,),
        "gate_proj.weight": (i, h),
        "up_proj.weight": (i, h),
        "down_proj.weight": (h, i),
        "norm": (h,),
    }
    fuse = config.get("fuse_layers") or []
    if fuse:
        shapes |= {"fuse.weight": (h, h * (len(fuse) + 1)), "fuse_mean": (h * len(fuse),), "fuse_std": (h * len(fuse),)}
    return shapes
