"""The skeleton both trainers share (`python -m training.distill` and `python -m training.eagle`).

A run (`Run`): one work folder with its progress log and stats.json, and the stage the command line asked
for. Training (`fit`): AdamW steps over length batches with a learning-rate schedule, bfloat16 autocast,
gradient clipping, an optional time cap that shrinks the schedule to fit, and a periodic held-out
evaluation that remembers the best weights. Evaluation (`measure_heldout`): the saved drafter decoding
held-out prompts in the engine itself (`engine_eval`), the number its model card reports.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import torch

from .data import TeeLog
from .prompts import heldout_eval_prompts


class Stats(dict):
    """The run's stats.json: what each stage measured, kept across separate --stage calls."""

    def __init__(self, path: Path):
        super().__init__(json.loads(path.read_text()) if path.exists() else {})
        self.path = path

    def save(self) -> None:
        self.path.write_text(json.dumps(self, indent=1))


class Run:
    """One trainer invocation: its folder (created), its log (printed and appended to `log_name`), its
    stats.json and the stage asked for ("all" runs every stage)."""

    def __init__(self, folder: Path, log_name: str, stage: str, threads: int):
        torch.set_num_threads(threads)
        folder.mkdir(parents=True, exist_ok=True)
        self.log = TeeLog(folder / log_name)
        self.stats = Stats(folder / "stats.json")
        self.stage = stage

    def wants(self, stage: str) -> bool:
        return self.stage in (stage, "all")

    def finish(self, code: int = 0, error: str | None = None) -> int:
        """Close the log (after an `error: ...` line when given); returns the exit code."""
        if error:
            self.log(f"error: {error}")
        self.log.close()
        return code


def fit(
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    batches: Callable[[], list[list[int]]],
    step_loss: Callable[[object], tuple[torch.Tensor, object]],
    lr_at: Callable[[int, int], float],
    total_steps: int,
    *,
    device_type: str = "cpu",
    autocast: bool = True,
    max_minutes: float = 0.0,
    prepare: Callable[[list[int]], object] = lambda idx: idx,
    progress: Callable[[int, int, torch.Tensor, object, float], None] | None = None,
    evaluate: Callable[[int], tuple[float, dict]] | None = None,
    eval_every: int = 0,
    eval_last: bool = False,
    log=print,
) -> dict:
    """Train `model` for `total_steps` steps over epochs of `batches()` (a new seeded order each epoch).

    prepare(idx) builds a step's batch (outside autocast); step_loss(batch) -> (loss, info) runs under
    autocast; lr_at(step, total_steps) sets the rate before each
    step; progress(step, total_steps, loss, info, seconds) is called after each. `max_minutes`: after 20
    steps the schedule shrinks to end (decayed) within that time at the pace so far, and a hard stop at the
    time is kept too. evaluate(step) -> (score, record) runs every `eval_every` steps (and at the last with
    `eval_last`); the weights of the best score are returned, with its step, for the trainer to keep or not.
    Returns {"steps", "seconds", "history" (the records), "best" (score, step, weights) or None}."""
    t0, step, history, best = time.perf_counter(), 0, [], None
    while step < total_steps:
        for idx in batches():
            if step >= total_steps or (max_minutes and time.perf_counter() - t0 > max_minutes * 60):
                total_steps = step
                break
            for group in opt.param_groups:
                group["lr"] = lr_at(step, total_steps)
            batch = prepare(idx)
            with torch.autocast(device_type, dtype=torch.bfloat16, enabled=autocast):
                loss, info = step_loss(batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if max_minutes and step == 20:
                total_steps = _fitted_steps(step, total_steps, time.perf_counter() - t0, max_minutes, log)
            if progress is not None:
                progress(step, total_steps, loss, info, time.perf_counter() - t0)
            if evaluate is not None and eval_every and (step % eval_every == 0 or (eval_last and step == total_steps)):
                score, record = evaluate(step)
                history.append({"step": step, **record})
                if best is None or score > best[0]:
                    best = (score, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
    return {"steps": step, "seconds": time.perf_counter() - t0, "history": history, "best": best}


def _fitted_steps(step: int, total_steps: int, elapsed: float, max_minutes: float, log) -> int:
    """The schedule's length that ends within `max_minutes` at the pace of the `step` steps so far."""
    pace = elapsed / step
    fit_to = step + int((max_minutes * 60 - elapsed) / pace * 0.95)
    if fit_to >= total_steps:
        return total_steps
    log(f"train: {pace:.2f} s/step: the schedule shrinks from {total_steps} to {fit_to} steps to end within {max_minutes:g} min")
    return max(fit_to, step + 1)


def add_eval_options(p: argparse.ArgumentParser) -> None:
    """The engine evaluation on held-out prompts (both trainers take these)."""
    e = p.add_argument_group("evaluation")
    e.add_argument("--eval-prompts", type=int, default=24, help="held-out prompts decoded by the engine")
    e.add_argument("--eval-depth", type=int, default=4)
    e.add_argument("--eval-max-new-tokens", type=int, default=96)
    e.add_argument("--eval-batch", type=int, default=8)


def engine_eval(
    draft_dir: Path,
    target: str | None,
    prompts: list[str],
    depth: int,
    max_new_tokens: int,
    batch_size: int,
    dtype: str = "auto",
    drafter: str = "model",
) -> dict:
    """Held-out greedy acceptance measured by the engine itself (speculative decoding, fixed depth).
    drafter: "model" (draft_dir is a draft model) or "eagle" (draft_dir is an EAGLE head)."""
    from engine import DecodeConfig, generate, load_pair
    from engine.trace.records import acceptance_counts

    if drafter == "eagle":
        pair = load_pair(target=target, draft=None, eagle=str(draft_dir), dtype=dtype)
    else:
        pair = load_pair(target=target, draft=str(draft_dir), dtype=dtype, eagle=None)
    cfg = DecodeConfig(mode="speculative", depth=depth, drafter=drafter, temperature=0.0, max_new_tokens=max_new_tokens)
    steps = []
    for b in range(0, len(prompts), batch_size):
        steps += generate(pair, prompts[b : b + batch_size], cfg).steps
    c = acceptance_counts(steps)
    return {
        "depth": depth,
        "prompts": len(prompts),
        "dtype": pair.dtype_name,
        "alpha": c.accepted / max(1, c.accepted + c.rejections),
        "acceptance_rate": c.accepted / max(1, c.drafted),
        "mean_accepted": c.accepted / max(1, c.seq_steps),
        "per_position_acceptance": [h / max(1, t) for h, t in zip(c.pos_hits, c.pos_tries)],
    }


def measure_heldout(args: argparse.Namespace, heldout: list[dict], out: Path, drafter: str, stats: Stats, log) -> dict:
    """The eval stage's measurement: the drafter in `out` on `--eval-prompts` held-out prompts, kept in stats."""
    prompts = heldout_eval_prompts(heldout, args.eval_prompts)
    ev = engine_eval(out, args.target, prompts, args.eval_depth, args.eval_max_new_tokens, args.eval_batch, drafter=drafter)
    stats["engine_eval"] = ev
    stats.save()
    log(f"eval: alpha {ev['alpha']:.3f}  per-position {[round(x, 3) for x in ev['per_position_acceptance']]}")
    return ev
