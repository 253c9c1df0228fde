"""Hub presets: a memory check before loading, and the download outside the run lock (issue 30, item 4).

A hub preset's weights (15 GB for the 7B pair) used to download inside the run lock, from inside
`from_pretrained`: every visitor queued behind it, with no sign of progress. Now, before the model turn:
1. `vram_refusal`: on a GPU, the pair's memory need (engine/model/vram.py, from the repos' small
   config.json files) against the free GPU memory; a pair that cannot fit is refused in one line;
2. `fetch`: `huggingface_hub.snapshot_download` of the weights into the local hub cache, in a worker
   thread, while the page's thread reports the bytes so far (`on_progress`). Downloads of different
   sessions run side by side; only the load from the local cache then takes the run lock.
"""

from __future__ import annotations

import concurrent.futures
import io
import json

from tqdm.std import tqdm

from engine.hardware import pick_device, pick_dtype
from engine.model import vram
from engine.model.pair import ModelLoadError

ALLOW = ["*.json", "*.safetensors", "tokenizer*", "*.txt", "*.model", "*.tiktoken"]  # what from_pretrained reads
PLAN_TOKENS = 1024  # context per row the memory check plans for (prompt + new tokens of a Playground run)


class VramRefusal(ModelLoadError):
    """A pair refused before loading: its one-line message names it, its need and the free memory."""


def hub_repos(preset) -> list[str]:
    """The hub repositories a preset loads (its target and, when it is a hub id, its draft)."""
    return [r for r in (preset.target, preset.draft) if r and r.count("/") == 1 and not r.startswith((".", "/", "~"))]


def repo_config(repo: str) -> dict:
    """A repository's config.json (a few kB, fetched before any weight)."""
    from huggingface_hub import hf_hub_download

    try:
        with open(hf_hub_download(repo, "config.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError, RuntimeError) as exc:  # network (OSError), missing file, bad JSON: one clear error
        raise ModelLoadError(
            f"could not read {repo}'s config.json from the Hugging Face Hub: {type(exc).__name__}: {str(exc)[:200]}"
        ) from exc


def vram_refusal(preset, dtype: str, config=repo_config) -> str | None:
    """One line refusing the preset when its estimated need exceeds this GPU's free memory; None when it
    fits or when the pair would not run on a GPU (no CUDA: nothing to check)."""
    device = pick_device()
    free = vram.free_bytes(device)
    if free is None:
        return None
    dt = pick_dtype(dtype, device)
    need = vram.estimate([config(repo) for repo in hub_repos(preset)], dt, PLAN_TOKENS)
    return vram.refusal(preset.label, need, free, dt, PLAN_TOKENS)


def _bar_class(bars: list):
    """A tqdm class that draws nothing and keeps its bars where the page's thread can read them."""

    class Bar(tqdm):
        def __init__(self, *args, **kwargs):
            kwargs.pop("name", None)
            kwargs.update(file=io.StringIO(), disable=False)
            super().__init__(*args, **kwargs)
            bars.append(self)

    return Bar


def bytes_so_far(bars: list) -> tuple[int, int]:
    """(bytes done, bytes in all) of a download's byte bars (0, 0 before the sizes are known)."""
    byte_bars = [b for b in list(bars) if b.unit == "B"]
    return max((int(b.n) for b in byte_bars), default=0), max((int(b.total or 0) for b in byte_bars), default=0)


def fetch(preset, on_progress=None, downloader=None, poll_s: float = 0.5) -> None:
    """Download the preset's repositories into the local hub cache. `on_progress(repo, done, total)` is
    called from this (the page's) thread while a download runs; the download itself runs in a worker."""
    if downloader is None:
        from huggingface_hub import snapshot_download as downloader
    for repo in hub_repos(preset):
        bars: list = []
        # A future holds whatever the download raised, reported below in the page's thread.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="download") as pool:
            future = pool.submit(downloader, repo, allow_patterns=ALLOW, tqdm_class=_bar_class(bars))
            while not future.done():
                concurrent.futures.wait([future], timeout=poll_s)
                if on_progress is not None:
                    on_progress(repo, *bytes_so_far(bars))
        failure = [future.exception()] if future.exception() is not None else []
        if failure:
            exc = failure[0]
            raise ModelLoadError(f"could not download {repo!r} from the Hugging Face Hub: {type(exc).__name__}: {str(exc)[:200]}") from exc
