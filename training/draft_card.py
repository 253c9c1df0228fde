"""A trained draft on disk: its weights and tokenizer files (`save_draft`), its reduced vocabulary
(`write_draft_vocab`) and its model card (`write_card`), the distillation's stage 5."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja", "generation_config.json")


def write_draft_vocab(out: Path, rows: list[dict], also: list[int] = ()) -> int:
    """draft_vocab.json: every token the target emitted in the training responses (FR-Spec-style reduced
    draft vocabulary). The draft was trained to score only these (plus random negatives), so slicing its
    head to them at decode time costs almost no acceptance and most of the head's time. `also`: ids to keep
    as well (with --init, the vocabulary of the draft it continues from, which saw the earlier data).
    Returns the count."""
    from engine.formats import write_draft_vocab as write_vocab_file

    ids = {t for r in rows for t in r["output_ids"]} | set(also)
    return write_vocab_file(out, ids, note="token ids the target emitted in the distillation data; SpecLab's drafter scores only these")


def save_draft(draft, target_dir: Path, out: Path, dtype=torch.bfloat16) -> int:
    """safetensors (bfloat16 by default) + config.json + the target's tokenizer files. Returns bytes written."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.safetensors"):
        old.unlink()
    model = draft.to(dtype)
    model.config.dtype = str(dtype).replace("torch.", "")
    model.save_pretrained(out)
    draft.float()
    for name in TOKENIZER_FILES:
        if (target_dir / name).exists():
            shutil.copy(target_dir / name, out / name)
    return sum(p.stat().st_size for p in out.iterdir() if p.is_file())


def write_card(out: Path, info: dict) -> None:
    """assets/draft/README.md: what the draft is, how it was made and how well it drafts."""
    ev = info.get("engine_eval") or {}
    pos = ", ".join(f"{p:.2f}" for p in ev.get("per_position_acceptance", []))
    arch = info["architecture"]
    soft_minutes = info.get("soft_minutes", 0.0)
    if not info["soft_topk"]:
        soft = "."
    elif info.get("soft_features"):
        soft = (
            f"; the target's top-{info['soft_topk']} distributions at every response position came from the "
            f"EAGLE head's features files (the target's final hidden states, `--soft-features`): its output "
            f"head over them took {soft_minutes:.0f} min."
        )
    else:
        soft = (
            f"; the target's top-{info['soft_topk']} distributions at every response position took one "
            f"teacher-forcing pass of {soft_minutes:.0f} min."
        )
    lines = [
        "---",
        "license: apache-2.0",
        "tags: [speculative-decoding, draft-model, distillation]",
        "---",
        "# SpecLab distilled draft for SmolLM2-135M-Instruct",
        "",
        "A small causal LM that proposes tokens for the embedded target (SmolLM2-135M-Instruct) in SpecLab's",
        "speculative decoding. It shares the target's tokenizer and vocabulary (49152 tokens) and was distilled",
        "from the target's own greedy responses on a 2-core CPU, by `training/distill.py`.",
        "",
        "## Architecture",
        f"- LlamaForCausalLM: hidden {arch['hidden']}, {arch['layers']} layers, {arch['heads']} heads "
        f"({arch['kv_heads']} KV heads), MLP {arch['intermediate']}, tied input/output embedding.",
        f"- Parameters: {info['params'] / 1e6:.1f} M ({info['embedding_params'] / 1e6:.1f} M of them the tied "
        "embedding); stored in bfloat16 safetensors "
        f"({info['bytes'] / 1e6:.1f} MB with tokenizer files).",
        "- Initialisation: the embedding is the target's tied embedding projected onto its top principal "
        "directions (PCA), so the draft's output head starts close to the target's."
        + (f" This run continued from the draft in `{info['init']}` (`--init`)." if info.get("init") else ""),
        "",
        "## Data and training",
        f"- Prompts: {info['prompts_train']} training prompts (topics x task templates: explain, story, poem, list, "
        "compare, how-to, email, summarise a paragraph, quiz, dialogue, ...); "
        f"{info['heldout_topics']} whole topics held out for evaluation.",
        f"- Target responses: greedy, up to {info['max_new_tokens']} new tokens, batch {info['gen_batch']} with "
        f"SpecLab's engine in {info['gen_dtype']}: {info['train_tokens']} response tokens, generated in "
        f"{info['gen_minutes']:.0f} min on this machine" + soft,
        f"- Loss on response tokens: {1 - info['soft_weight']:.2f} x CE(target's greedy token)"
        + (f" + {info['soft_weight']:.2f} x soft CE(target's top-{info['soft_topk']} distribution)" if info["soft_topk"] else "")
        + ".",
        f"- Training: AdamW, lr {info['lr']}, ~{info['batch_tokens']} tokens per batch, {info['epochs']} epochs "
        f"({info['steps']} steps), bfloat16 autocast, {info['train_minutes']:.0f} min on 2 CPU cores; seed {info['seed']}.",
        "",
        "## Held-out acceptance (SpecLab engine, greedy, depth "
        f"{ev.get('depth', '?')}, {ev.get('prompts', '?')} prompts on held-out topics, {ev.get('dtype', '?')})",
        f"- alpha (per-token acceptance) = {ev.get('alpha', float('nan')):.3f}; acceptance rate "
        f"{ev.get('acceptance_rate', float('nan')):.3f}; mean accepted per step {ev.get('mean_accepted', float('nan')):.2f}.",
        f"- Per-position acceptance: [{pos}].",
        f"- Teacher-forced top-1 agreement with the target on held-out responses: {info.get('heldout_top1', float('nan')):.3f}.",
        "",
        "## Reproduce",
        "```",
        info["command"],
        "```",
        "The generated data and checkpoints go to the work directory (gitignored). Timings are for a shared",
        "2-core AMD EPYC CPU; generation dominates.",
        "",
    ]
    if info.get("notes"):
        lines += ["## Notes", *[f"- {n}" for n in info["notes"]], ""]
    (out / "README.md").write_text("\n".join(lines))
