"""The decode loop's bookkeeping that is not the loop: trace records of a drafted tree, the kind of the
target's own token, and the run facts a trace's `meta` carries (engine/decoding/decode.py uses them)."""

from __future__ import annotations

import torch

from engine.config import DecodeConfig
from engine.drafters import drafter_params
from engine.hardware import device_name
from engine.model.pair import ModelPair
from engine.model.pass_report import graph_meta
from engine.options import ConfigError
from engine.trace.records import TreeRecord


def check_lean_target(cfg: DecodeConfig, features, target) -> None:
    """ConfigError where the run needs what only the lean forward gives and the target's cache runs transformers':
    the target's hidden states (`features`, a drafter that reads them) or a tree attention mask (`cfg.tree`)."""
    if features and target.lean is None:
        raise ConfigError(
            f"drafter={cfg.drafter!r} needs the target's hidden states, which only the lean "
            "forward gives (a plain Llama target, a backend other than 'transformers')"
        )
    if cfg.tree and target.lean is None:
        raise ConfigError(
            "tree drafting verifies with a tree attention mask, which only the lean forward takes "
            "(a plain Llama target, a backend other than 'transformers')"
        )


def run_meta(pair: ModelPair, cfg: DecodeConfig, drafter_name: str | None, util_source: str, lean: bool, caches: list) -> dict:
    """What ran: device, dtype, models, drafter, utilisation source, forward and versions (a trace's meta)."""
    import transformers

    return {
        "device": pair.device.type,
        "device_name": device_name(pair.device),
        "dtype": pair.dtype_name,
        "target_name": pair.target_name,
        "draft_name": drafter_name,
        "target_params": sum(p.numel() for p in pair.target.parameters()),
        "draft_params": drafter_params(pair, cfg),
        "util_source": util_source,
        "forward": "speclab lean Llama (engine/model/fastllama.py)" if lean else "transformers",
        "backend": caches[0].backend.name,  # the target's pass (engine/model/backend.py)
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
    } | graph_meta(caches, cfg.cuda_graphs)


def tree_records(tree, path, num_accepted, token_text, q_x, p_x) -> list[TreeRecord]:
    """Each row's drafted tree for the trace: parents, tokens, q, p and which nodes the accepted path holds."""
    parents, ids = tree.parents.tolist(), tree.tokens.tolist()
    records = []
    for r, (cols, a) in enumerate(zip(path.tolist(), num_accepted.tolist())):
        on_path = {c - 1 for c in cols[1 : a + 1]}
        records.append(
            TreeRecord(
                parents=parents[r],
                ids=ids[r],
                texts=[token_text(t) for t in ids[r]],
                q=q_x[r],
                p=p_x[r],
                accepted=[i in on_path for i in range(len(ids[r]))],
            )
        )
    return records


def next_kind(num_accepted: int, num_drafted: int) -> str:
    """The target's own token is a bonus after a full acceptance, a correction after a rejection, and plain
    when the row drafted nothing (an n-gram row without a match beside rows that found one)."""
    if num_drafted == 0:
        return "plain"
    return "bonus" if num_accepted == num_drafted else "correction"
