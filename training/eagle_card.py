"""A trained EAGLE head on disk: its weights, config and reduced vocabulary (`save_head`, `frequent_tokens`)
and its model card (`write_card`). The runtime loads it with engine/model/eagle_head.py."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from engine.formats import EAGLE_CONFIG_FILE as CONFIG_FILE
from engine.formats import EAGLE_FORMAT as CONFIG_FORMAT
from engine.formats import EAGLE_WEIGHTS_FILE as WEIGHTS_FILE
from engine.formats import write_draft_vocab

from .eagle_head import EagleHead


def save_head(head: EagleHead, out: Path, vocab_ids: list[int], info: dict, dtype=torch.bfloat16) -> int:
    """Write config.json, model.safetensors (the head only: the target's embedding and head are reused)
    and draft_vocab.json (the reduced output vocabulary). Returns the bytes written."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(dtype).contiguous() for k, v in head.state_dict().items()}
    save_file(state, str(out / WEIGHTS_FILE), metadata={"format": CONFIG_FORMAT})
    (out / CONFIG_FILE).write_text(json.dumps({**head.config, **info}, indent=1))
    write_draft_vocab(out, vocab_ids)
    return sum(p.stat().st_size for p in out.iterdir() if p.is_file())


def widened_vocab(keep: list[int], rows: list[dict], n: int) -> list[int]:
    """`keep` plus the n most frequent tokens of `rows` it lacks, sorted: a head continued on new kinds of text
    (the broad mix: code, copied German) keeps what it could already draft and learns to draft those too.
    On the mix's responses the shipped 8,192 tokens covered 88.7% of the tokens; 1,024 more cover 99.1%."""
    have = set(keep)
    return sorted(have | set([t for t in frequent_ranked(rows) if t not in have][:n]))


def frequent_ranked(rows: list[dict]) -> list[int]:
    """Every token of the target's responses, the most frequent first (ties by id)."""
    from collections import Counter

    counts = Counter(t for r in rows for t in r["output_ids"])
    return [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def frequent_tokens(rows: list[dict], n: int) -> list[int]:
    """The n most frequent tokens of the target's responses (FR-Spec's frequency-ranked vocabulary), sorted;
    n = 0: every emitted token. Run-3 head (8 held-out prompts, depth 2-4): alpha was the same with 4096,
    8192 and all 11,112 emitted tokens, and a draft step took 2.3 / 2.9 / 3.2 ms. Run-10 head (390 held-out
    prompts, depth 4): alpha 0.615 / 0.629 / 0.632 with 4096 / 8192 / all 18,876, but 8192 ran slower
    (1.39-1.55x against 1.50-1.70x on the 8 bench prompts), so 4096 stayed. Run-14 head (GPU-trained on 2.9x
    the data): alpha 0.641 with its 4096 tokens, 0.661 with 8192 (98.2% of the greedy tokens); 1.71-1.83x
    against 1.54-1.65x. 8192 is shipped (and the default): the only setting with alpha >= 0.65 and every
    bench cell >= 1.5x."""
    ranked = frequent_ranked(rows)
    return sorted(ranked[:n] if n > 0 else ranked)


def write_card(out: Path, config: dict, stats: dict, command: str) -> None:
    """<out>/README.md: what the head is, how it was trained, how well it drafts (from stats.json)."""
    ev = stats.get("engine_eval") or {}
    tr = stats.get("train") or {}
    top1 = ", ".join(f"{x:.3f}" for x in (tr.get("heldout") or {}).get("top1", []))
    pos = ", ".join(f"{p:.2f}" for p in ev.get("per_position_acceptance", []))
    lines = [
        "# SpecLab EAGLE head for SmolLM2-135M-Instruct",
        "",
        "A one-layer drafter that reads the target's own final hidden states (EAGLE, Li et al. 2024). It is not a",
        "standalone model: it borrows the target's embedding and output head and needs the target's features, so",
        'it only works inside SpecLab\'s engine (`drafter="eagle"`), never as a transformers `assistant_model`.',
        "",
        "## Architecture",
        f"- fc: [embed(token); feature] ({2 * config['hidden_size']}) -> {config['hidden_size']}, one Llama decoder "
        f"layer ({config['num_attention_heads']} heads, {config['num_key_value_heads']} KV heads, MLP "
        f"{config['intermediate_size']}), RMSNorm; {config.get('params', 0) / 1e6:.2f} M parameters in bfloat16.",
        *(
            [
                f"- EAGLE-3 feature fusion: the outputs of target layers {config['fuse_layers']} and the final feature "
                f"({config['hidden_size'] * (len(config['fuse_layers']) + 1)}) -> {config['hidden_size']} by one linear map, "
                "before fc; the head's own guesses feed back unfused."
            ]
            if config.get("fuse_layers")
            else []
        ),
        "- Output: the target's own head, cut to the tokens in `draft_vocab.json` (the tokens the target emits most",
        "  often in the training responses).",
        "",
        "## Training",
        f"- Data: the distillation's target-generated responses (`python -m training.distill`, {config.get('train_rows', '?')}",
        "  prompts) and one teacher-forcing pass of the target for their features"
        + (f" ({stats['features_train_seconds'] / 60:.0f} min)." if "features_train_seconds" in stats else "."),
        f"- Training-time test over {config.get('depths', '?')} draft depths (each depth sees its own earlier outputs,",
        "  as when drafting); loss per depth: soft CE against the target's distribution + CE on its greedy token"
        + (f" + {config['reg_weight']} x smooth-L1 feature regression." if config.get("reg_weight") else "."),
        f"- {config.get('epochs', '?')} epochs at lr {config.get('lr', '?')}, {config.get('train_minutes', 0):.0f} min on"
        f" 2 CPU cores, seed {config.get('seed', '?')}" + (f", continuing from `{config['init']}`." if config.get("init") else "."),
        f"- Held-out teacher-forced top-1 agreement by draft depth: [{top1}].",
        "",
        "## Held-out acceptance (SpecLab engine, greedy, depth "
        f"{ev.get('depth', '?')}, {ev.get('prompts', '?')} prompts on held-out topics, {ev.get('dtype', '?')})",
        f"- alpha = {ev.get('alpha', float('nan')):.3f}; per-position acceptance [{pos}].",
        "",
        "## Reproduce",
        "```",
        command,
        "```",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))
