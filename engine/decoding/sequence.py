"""Per-sequence state (nano-vllm's Sequence): the prompt, its tokens so far and whether it is done."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.config import DecodeConfig
from engine.options import ConfigError


@dataclass
class Sequence:
    index: int
    prompt: str
    prompt_ids: list[int]
    max_new_tokens: int
    tokens: list[int] = field(default_factory=list)  # prompt + generated
    finished: bool = False

    def __post_init__(self):
        self.tokens = list(self.prompt_ids)

    @property
    def generated(self) -> list[int]:
        return self.tokens[len(self.prompt_ids) :]

    @property
    def remaining(self) -> int:
        return self.max_new_tokens - len(self.generated)

    def append(self, new: list[int], eos_ids: frozenset[int]) -> list[int]:
        """Append tokens, stopping at EOS or max_new_tokens; returns what was actually appended."""
        taken = []
        for token in new[: self.remaining]:
            taken.append(token)
            if token in eos_ids:
                self.finished = True
                break
        self.tokens.extend(taken)
        if self.remaining <= 0:
            self.finished = True
        return taken


def prepare_sequences(pair, prompts: list[str], cfg: DecodeConfig) -> list[Sequence]:
    """Validate the prompts against the model and encode them (chat template applied)."""
    if isinstance(prompts, str) or not isinstance(prompts, (list, tuple)):
        raise ConfigError("prompts must be a list of strings (one user message per sequence)")
    if not prompts:
        raise ConfigError("prompts is empty: give at least one prompt")
    seqs = []
    for i, prompt in enumerate(prompts):
        if not isinstance(prompt, str):
            raise ConfigError(f"prompt {i + 1} must be a string (a user message); got {type(prompt).__name__}")
        if not prompt.strip():
            raise ConfigError(f"prompt {i + 1} is empty: every prompt needs some text")
        try:
            prompt.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"prompt {i + 1} is not valid Unicode text (it holds a lone surrogate): it cannot be tokenized") from None
        ids = pair.encode_prompt(prompt)
        if len(ids) < 2:
            raise ConfigError(f"prompt {i + 1} encodes to {len(ids)} token(s); at least 2 are needed")
        room = pair.max_context - len(ids) - cfg.depth - 1
        if room < 1:
            raise ConfigError(f"prompt {i + 1} is {len(ids)} tokens long; the model's context window is {pair.max_context} tokens")
        if cfg.max_new_tokens > room:
            raise ConfigError(
                f"max_new_tokens={cfg.max_new_tokens} is beyond the context window: prompt {i + 1} has {len(ids)} "
                f"tokens of {pair.max_context}, so at most {room} new tokens fit (1..{room})"
            )
        seqs.append(Sequence(index=i, prompt=prompt, prompt_ids=ids, max_new_tokens=cfg.max_new_tokens))
    return seqs
