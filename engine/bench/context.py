"""Long context for the decoding commands: every row preceded by one shared document, so that the KV cache holds about
N tokens per row at the first decode step (`python -m engine run|bench --context N`).

The document is real prose shipped with SpecLab (assets/context/document.txt, a guidebook to a fictional harbour town,
with sixteen questions over it in assets/context/questions.json; assets/context/README.md says what they are). Its
first part, cut at a sentence end, stands before each row's own prompt: many questions over one document, the case a
shared prefix serves (engine/model/kvcache.py, `RaggedCache.prefill_shared`: the document is prefilled once).
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.options import ConfigError

CONTEXT_DIR = Path(__file__).resolve().parents[2] / "assets" / "context"
DOCUMENT_FILE = CONTEXT_DIR / "document.txt"
QUESTIONS_FILE = CONTEXT_DIR / "questions.json"
SEPARATOR = "\n\n"  # between the document and a row's own prompt


def document() -> str:
    """The shipped document's text."""
    return DOCUMENT_FILE.read_text(encoding="utf-8")


def questions(batch: int) -> list[str]:
    """`batch` questions over the document, one per row (the sixteen shipped ones, cycled)."""
    shipped = json.loads(QUESTIONS_FILE.read_text(encoding="utf-8"))["questions"]
    return [shipped[i % len(shipped)] for i in range(batch)]


def excerpt(tokenizer, text: str, tokens: int) -> str:
    """The start of `text` in at most `tokens` tokens, cut after its last whole sentence (or line) within them."""
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    if tokens >= len(offsets):
        return text
    head = text[: offsets[tokens][0]]
    cut = max(head.rfind(". "), head.rfind(".\n"), head.rfind("\n"))
    return head[: cut + 1] if cut > 0 else head


def check_context(context: int) -> None:
    """A context the commands take: 0 (no document) or a positive number of tokens."""
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise ConfigError(f"context must be a whole number of tokens >= 0 (0: no document); got {context!r}")


def with_context(pair, prompts: list[str], context: int, room: int) -> list[str]:
    """`prompts`, each preceded by the document's first part, so that the longest row's prompt (chat template
    included) is about `context` tokens; 0: the prompts as they are. room: the positions a row needs past its prompt
    (new tokens, a draft and its bonus). One-line ConfigErrors for a context the model or the document cannot hold."""
    check_context(context)
    if context == 0:
        return list(prompts)
    most = pair.max_context - room
    if context > most:
        raise ConfigError(
            f"context {context} is beyond the model's context window: {pair.max_context} positions, less {room} for the "
            f"new tokens and a draft, leave at most {most}"
        )
    own = max(len(pair.encode_prompt(SEPARATOR + p)) for p in prompts)  # a row's template and prompt, without the document
    if context <= own:
        raise ConfigError(f"context {context} is no longer than the prompts themselves ({own} tokens): give more, or 0")
    text = document()
    available = len(pair.tokenizer(text, add_special_tokens=False).input_ids)
    if context - own > available:
        raise ConfigError(f"context {context} is longer than the shipped document ({available} tokens + {own} of prompt)")
    part = excerpt(pair.tokenizer, text, context - own)
    return [part + SEPARATOR + p for p in prompts]
