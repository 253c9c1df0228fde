"""Benchmarks: AR vs speculative tokens/s over a batch x depth grid, medians of repeats, one process.

Used by `python -m engine bench`. Every number is measured here and now; nothing is estimated.
Baselines (`--baseline`) time transformers' own `generate()` on the same prompts, model and dtype:
plain greedy, prompt-lookup decoding (for the n-gram drafter) and assisted generation (for the model
drafter), so our speedups are against an honest reference, not a handicapped loop.
"""

from __future__ import annotations

import statistics
import time

import torch

from engine.bench.cells import _median, run_cells
from engine.bench.context import questions, with_context
from engine.bench.prompts import batch_prompts, prompt_set_list
from engine.config import DecodeConfig
from engine.costs import expected_speedup
from engine.decoding.decode import generate
from engine.drafters import DRAFTERS
from engine.model.pair import ModelPair
from engine.verdict import judge


def backend_lane(pair: ModelPair, cfg: DecodeConfig, backend: str):
    """A benchmark contender: run(prompts, n) decodes with `cfg` (n new tokens) on `backend` (engine/model/backend.py), as `_ours`."""

    def run(prompts: list[str], n: int) -> dict:
        return _ours(pair, prompts, DecodeConfig.from_dict(cfg.to_dict() | {"max_new_tokens": n, "backend": backend}), 1)

    return run


def hf_generate(pair: ModelPair, prompts: list[str], max_new_tokens: int, repeats: int, **kwargs) -> dict:
    """transformers' own generate(), greedy, batch 1, same model/dtype: the honest baseline.

    One repeat decodes every prompt in turn; its rate is total new tokens / total wall time."""
    eos = sorted(pair.eos_ids) or None
    args = dict(do_sample=False, max_new_tokens=max_new_tokens, eos_token_id=eos, pad_token_id=eos[0] if eos else None)
    rates, outputs = [], []
    with torch.inference_mode():
        for _ in range(repeats):
            outputs, wall = [], 0.0
            for prompt in prompts:
                ids = torch.tensor([pair.encode_prompt(prompt)], device=pair.device)
                t = time.perf_counter()
                out = pair.target.generate(ids, attention_mask=torch.ones_like(ids), **args, **kwargs)
                wall += time.perf_counter() - t
                outputs.append(out[0, ids.shape[1] :].tolist())
            rates.append(sum(len(o) for o in outputs) / wall)
    return {"tokens_per_s": _median(rates), "new_tokens": sum(len(o) for o in outputs), "outputs": outputs, "rates": rates}


def _ours(pair: ModelPair, prompts: list[str], cfg: DecodeConfig, repeats: int) -> dict:
    """Our engine on the same prompts, one at a time (batch 1), timed like `hf_generate` (wall clock)."""
    rates, outputs, alphas = [], [], []
    for _ in range(repeats):
        outputs, wall, alphas = [], 0.0, []
        for prompt in prompts:
            t = time.perf_counter()
            trace = generate(pair, [prompt], cfg)
            wall += time.perf_counter() - t
            outputs += trace.output_ids
            if trace.summary["alpha"] is not None:
                alphas.append(trace.summary["alpha"])
        rates.append(sum(len(o) for o in outputs) / wall)
    return {
        "tokens_per_s": _median(rates),
        "new_tokens": sum(len(o) for o in outputs),
        "outputs": outputs,
        "rates": rates,
        "alpha": statistics.mean(alphas) if alphas else None,
    }


def _row(
    batch: int, depth: int, confidence: float, drafter: str, ar: dict, spec: dict, policy: str = "fixed", tree: tuple[int, int] = (0, 0)
) -> dict:
    nodes = tree[0] or depth  # draft tokens verified per row: a chain's depth, a tree's nodes
    row = {
        "batch": batch,
        "depth": depth,
        "tree_nodes": tree[0],
        "tree_topk": tree[1],
        "policy": policy,
        "mean_depth": spec["mean_depth"],
        "depth_steps": spec["depth_steps"],
        "policy_pct": spec["policy_pct"],
        "confidence_threshold": confidence,
        "drafted_per_step": spec["drafted_per_step"],
        "tokens_per_pass": batch * (nodes + 1),
        "ar_tokens_per_s": ar["tokens_per_s"],
        "spec_tokens_per_s": spec["tokens_per_s"],
        "ar_decode_tokens_per_s": ar["decode_tokens_per_s"],
        "spec_decode_tokens_per_s": spec["decode_tokens_per_s"],
        "speedup": spec["decode_tokens_per_s"] / ar["decode_tokens_per_s"],  # decoding alone (the prefill apart)
        # every repeat's rate, in the order run: the interleaved rounds engine/verdict.py pairs
        "ar_decode_runs": ar["decode_tokens_per_s_runs"],
        "spec_decode_runs": spec["decode_tokens_per_s_runs"],
        "whole_run_speedup": spec["tokens_per_s"] / ar["tokens_per_s"],
        "ar_ttft_s": ar["ttft_s"],  # the median run's time to first token (the prefill step's end)
        "spec_ttft_s": spec["ttft_s"],
        # prompts decoded one at a time (--sequential): the median over prompts of each prompt's speedup
        "prompt_median_speedup": _median([s / a for s, a in zip(spec["prompt_rates"], ar["prompt_rates"])])
        if len(spec["prompt_rates"]) > 1
        else None,
        "acceptance_rate": spec["acceptance_rate"],
        "alpha": spec["alpha"],
        "tokens_per_step": spec["tokens_per_step"],
        "per_position_acceptance": spec["per_position_acceptance"],
        "flops_ratio": spec["flops"] / ar["flops"] if ar["flops"] else None,
        "ar_overhead_pct": ar["overhead_pct"],
        "spec_overhead_pct": spec["overhead_pct"],
        "ar_verify_ms": ar["verify_ms"],
        "spec_verify_ms": spec["verify_ms"],
        "draft_ms_per_forward": spec["draft_ms_per_forward"],
        "same_output": spec["outputs"] == ar["outputs"],
        # the load each lane's median run saw (a cell whose lanes differ is not a fair ratio: app/views/fairness.py)
        "ar_other_cores": ar["other_cores"],
        "spec_other_cores": spec["other_cores"],
        "load_avg": max((v for v in (ar["load_avg"], spec["load_avg"]) if v is not None), default=None),
    }
    # (Leviathan's formula models a chain of k i.i.d. drafts; a tree row gets no prediction)
    if DRAFTERS[drafter].loads and not tree[0] and spec["alpha"] is not None and spec["draft_ms_per_forward"] and ar["verify_ms"]:
        c = spec["draft_ms_per_forward"] / ar["verify_ms"]
        row["c"] = c
        # Leviathan's formula assumes k i.i.d. drafts per step; k is the depth actually drafted (a gate, a
        # policy or the end of a sequence can draft less than `depth`), so the prediction is indicative there.
        k = spec["drafted_per_step"] if spec["drafted_per_step"] is not None else depth
        row["predicted_speedup"] = expected_speedup(spec["alpha"], k, c)
    return row


def bench(
    pair: ModelPair,
    batches: list[int],
    depths: list[int],
    drafter: str = "model",
    prompt_set: str = "chat",
    max_new_tokens: int = 64,
    repeats: int = 3,
    baseline: bool = False,
    log=print,
    policy: str | list[str] = "fixed",
    disable_by_batch_size: int = 8,
    baseline_prompts: int = 4,
    sequential: int = 1,
    confidences: list[float] = (0.0,),
    batch_table: tuple[tuple[int, int, int], ...] | None = None,
    trees: list[tuple[int, int]] = ((0, 0),),
    cuda_graphs: str = "off",
    backend: str = "auto",
    context: int = 0,
) -> dict:
    """The grid: for each batch, AR once, then speculative at each depth (x each confidence threshold);
    medians of `repeats`.

    sequential: at batch 1, each cell decodes this many prompts one after another (more prompts, less
    noise in alpha) and reports total tokens / total time.
    confidences: `DecodeConfig.confidence_threshold` values; with one > 0, `depth` is the most a step
    drafts, and "drafted/step" the mean it actually drafted.
    policy: one depth policy or several. Alone, a policy runs at every depth; beside "fixed" the others run
    at the largest depth only (for the adaptive ones `depth` is the most they may draft). Within a batch
    size every contender (AR included) is measured interleaved.
    batch_table: the explicit table for the "batch_table" policy (None: derived from the measured cost).
    trees: (tree_nodes, tree_topk) settings, each run at every depth it fits ((0, 0): the chain); tree drafting
    runs with the fixed policy and no confidence stop (DecodeConfig).
    cuda_graphs, backend: DecodeConfig's of every cell (engine/model/backend.py).
    context: > 0, the rows are the shipped document's questions, each preceded by the document so that the cache
    holds about `context` tokens per row at the first decode step (engine/bench/context.py); the prompt set is unused."""
    policies = [policy] if isinstance(policy, str) else list(policy)
    rows = []
    for batch in batches:
        seq = batch == 1 and sequential > 1
        prompts = batch_prompts(prompt_set, sequential) if seq else batch_prompts(prompt_set, batch)
        if context:
            room = max_new_tokens + max(depths) + 1  # the new tokens and the deepest draft with its bonus
            prompts = with_context(pair, questions(len(prompts)), context, room)
        cells = _grid_cells(depths, policies, confidences, trees)
        speculative = dict(drafter=drafter, disable_by_batch_size=disable_by_batch_size, batch_table=batch_table)
        passes = dict(cuda_graphs=cuda_graphs, backend=backend)
        cfgs = [DecodeConfig(mode="autoregressive", max_new_tokens=max_new_tokens, **passes)] + [
            _cell_config(cell, max_new_tokens=max_new_tokens, **passes, **speculative) for cell in cells
        ]
        ar, *specs = run_cells(pair, prompts, cfgs, repeats, seq)
        log(f"  batch {batch:>3}  AR            {ar['decode_tokens_per_s']:8.1f} tok/s decoding")
        for cell, spec in zip(cells, specs):
            p, depth, confidence, tree = cell
            rows.append(_row(batch, depth, confidence, drafter, ar, spec, p, tree) | {"context": context})
            log(_cell_line(batch, cell, spec, rows[-1]["speedup"], show_policy=len(policies) > 1 or p != "fixed"))
    result = {
        "device": pair.device.type,
        "dtype": pair.dtype_name,
        "target": pair.target_name,
        "drafter": DRAFTERS[drafter].label(pair) if DRAFTERS[drafter].loads else drafter,  # a lookup: its kind
        "policy": policy if isinstance(policy, str) else ",".join(policies),
        "prompt_set": prompt_set if not context else "context questions",
        "context": context,
        "max_new_tokens": max_new_tokens,
        "repeats": repeats,
        "sequential": sequential,
        "rows": rows,
    }
    if baseline:
        result["baselines"] = baselines(pair, drafter, prompt_set, max_new_tokens, depths, repeats, log, policies[0], baseline_prompts)
    return result


def _grid_cells(depths: list[int], policies: list[str], confidences, trees) -> list[tuple]:
    """(policy, depth, confidence, tree) cells of one batch size. Beside "fixed", the other policies run once,
    at the largest depth (their maximum): the grid then shows each adaptive policy against every fixed depth
    without re-running it at every cap. Trees run at the depths they fit, without a confidence stop."""
    return [
        (p, depth, confidence, tree)
        for depth in depths
        for p in policies
        for confidence in confidences
        for tree in trees
        if (p == "fixed" or len(policies) == 1 or depth == max(depths))
        and (tree[0] == 0 or (depth > 0 and confidence == 0 and tree_fits(tree, depth)))
    ]


def _cell_config(cell: tuple, drafter: str, max_new_tokens: int, disable_by_batch_size: int, batch_table, cuda_graphs: str, backend: str):
    p, depth, confidence, tree = cell
    return DecodeConfig(
        mode="speculative",
        depth=depth,
        drafter=drafter,
        max_new_tokens=max_new_tokens,
        policy=p,
        disable_by_batch_size=disable_by_batch_size,
        confidence_threshold=confidence,
        batch_table=batch_table if p == "batch_table" else None,
        tree_nodes=tree[0],
        tree_topk=tree[1],
        cuda_graphs=cuda_graphs,
        backend=backend,
    )


def _cell_line(batch: int, cell: tuple, spec: dict, speedup: float, show_policy: bool) -> str:
    """One progress line of the grid."""
    p, depth, confidence, tree = cell
    return (
        f"  batch {batch:>3}  depth {depth:>2}"
        + (f" tree {tree[0]}/{tree[1]}" if tree[0] else "")
        + (f" {p}" if show_policy else "")
        + (f" conf {confidence:.2f}" if confidence else "")
        + f"      {spec['decode_tokens_per_s']:8.1f} tok/s decoding  x{speedup:.2f}"
        + (f"  alpha {spec['alpha']:.2f}" if spec["alpha"] is not None else "")
        + (f"  mean k {spec['mean_depth']:.2f}" if p != "fixed" else "")
    )


def tree_fits(tree: tuple[int, int], depth: int) -> bool:
    """Can `depth` levels of top-k hold tree_nodes candidates (DecodeConfig's rule)?"""
    nodes, topk = tree
    return topk > 0 and nodes <= topk + (depth - 1) * topk * topk


def baselines(pair, drafter, prompt_set, max_new_tokens, depths, repeats, log, policy: str = "fixed", n_prompts: int = 4) -> dict:
    """Batch-1 comparison on the first `n_prompts` prompts of the set: HF generate (plain, and with its own
    drafting at the grid's largest depth) vs ours, all on the same prompts, model and dtype.

    The four contenders run interleaved, one run each per round, so slow drift of a shared machine
    (thermal, neighbours) hits them alike; each gets one warm-up first. Medians over rounds."""
    prompts = prompt_set_list(prompt_set)[: max(1, n_prompts)]
    depth = max(depths) if max(depths) > 0 else 4
    # Each contender: (prompts, max_new_tokens) -> one timed run over those prompts.
    contenders = {"hf_generate": lambda ps, m: hf_generate(pair, ps, m, 1)}
    if drafter == "ngram":  # transformers' own prompt lookup is the n-gram drafter's counterpart
        name = f"generate(prompt_lookup_num_tokens={depth})"
        contenders["hf_drafting"] = lambda ps, m: hf_generate(pair, ps, m, 1, prompt_lookup_num_tokens=depth)
    elif pair.weights("draft") is not None:
        name = f"generate(assistant_model=draft, num_assistant_tokens={depth}, assistant_confidence_threshold=0)"
        contenders["hf_drafting"] = lambda ps, m: hf_generate(
            pair,
            ps,
            m,
            1,
            assistant_model=pair.weights("draft"),
            num_assistant_tokens=depth,
            assistant_confidence_threshold=0.0,
        )
    contenders["ours_ar"] = lambda ps, m: _ours(pair, ps, DecodeConfig(mode="autoregressive", max_new_tokens=m), 1)
    contenders["ours_spec"] = lambda ps, m: _ours(
        pair, ps, DecodeConfig(mode="speculative", depth=depth, drafter=drafter, max_new_tokens=m, policy=policy), 1
    )
    for run in contenders.values():  # warm-up: the first prompt, a few tokens
        run(prompts[:1], 8)
    rounds = {key: [] for key in contenders}
    last = {}
    for _ in range(repeats):
        for key, run in contenders.items():
            last[key] = run(prompts, max_new_tokens)
            rounds[key] += last[key]["rates"]
    out = {"prompt": prompts[0], "prompts": prompts, "depth": depth}
    for key in contenders:
        out[key] = last[key] | {"tokens_per_s": _median(rounds[key]), "rates": rounds[key]}
        log(f"  {key:<12} {out[key]['tokens_per_s']:8.1f} tok/s")
    if "hf_drafting" in out:
        out["hf_drafting_name"] = name
    return out


def format_table(result: dict) -> str:
    lines = [
        f"device {result['device']}  dtype {result['dtype']}  target {result['target']}",
        f"drafter {result['drafter']}  policy {result.get('policy', 'fixed')}  prompts {result['prompt_set']}  "
        + (f"context {result['context']}  " if result.get("context") else "")
        + f"max_new_tokens {result['max_new_tokens']}  "
        f"median of {result['repeats']}"
        + (f"  (batch 1: {result['sequential']} prompts one after another)" if result.get("sequential", 1) > 1 else ""),
        "",
        "batch depth tok/pass   AR tok/s  spec tok/s  speedup  accept  alpha  tok/step  FLOPs x  ovh%  same"
        + ("      c  predicted" if any("c" in r for r in result["rows"]) else ""),
    ]
    gated = any(r.get("confidence_threshold") for r in result["rows"])
    if gated:
        lines[-1] = lines[-1].replace("batch depth", "batch depth  conf drafted")
    policies = len({r.get("policy", "fixed") for r in result["rows"]}) > 1 or result.get("policy", "fixed") != "fixed"
    if policies:
        lines[-1] = lines[-1].replace("batch depth", "batch depth policy          mean k  pol%")
    trees = any(r.get("tree_nodes") for r in result["rows"])
    if trees:
        lines[-1] = lines[-1].replace("batch depth", "batch depth  tree")
    per_prompt = any(r.get("prompt_median_speedup") for r in result["rows"])
    no_prediction = "      -          -" if any("c" in r for r in result["rows"]) else ""  # tree rows beside chains
    if per_prompt:
        lines[-1] = lines[-1].replace("speedup", "speedup  med/prompt")
    for r in result["rows"]:

        def f(v, fmt):
            return format(v, fmt) if v is not None else "-"

        gate = f" {r.get('confidence_threshold', 0):>5.2f} {f(r.get('drafted_per_step'), '>7.2f')}" if gated else ""
        if policies:
            gate = f" {r.get('policy', 'fixed'):<15} {f(r.get('mean_depth'), '>6.2f')} {f(r.get('policy_pct'), '>5.2f')}" + gate
        if trees:
            tree = f"{r['tree_nodes']}/{r['tree_topk']}" if r.get("tree_nodes") else "chain"
            gate = f" {tree:>5}" + gate
        median = f" {f(r.get('prompt_median_speedup'), '>10.2f')}x" if per_prompt else ""
        lines.append(
            f"{r['batch']:>5} {r['depth']:>5}{gate} {r['tokens_per_pass']:>8} {r['ar_tokens_per_s']:>10.1f} "
            f"{r['spec_tokens_per_s']:>11.1f} {r['speedup']:>7.2f}x{median} {f(r['acceptance_rate'], '>6.2f')} "
            f"{f(r['alpha'], '>6.2f')} {f(r['tokens_per_step'], '>9.2f')} {f(r['flops_ratio'], '>8.2f')} "
            f"{f(r['spec_overhead_pct'], '>5.1f')}  {'yes' if r['same_output'] else 'no ':<4}"
            + (f" {r['c']:>6.3f} {r['predicted_speedup']:>9.2f}x" if "c" in r else no_prediction)
        )
    lines += speedup_ranges(result["rows"])
    b = result.get("baselines")
    if b:
        hf = b["hf_generate"]["tokens_per_s"]
        n = len(b.get("prompts", [b["prompt"]]))
        lines += ["", f"batch 1, depth {b['depth']}, {n} prompt(s) from {result['prompt_set']!r}, first: {b['prompt'][:60]!r}"]
        entries = [("transformers generate()", b["hf_generate"])]
        if "hf_drafting" in b:
            entries.append((f"transformers {b['hf_drafting_name']}", b["hf_drafting"]))
        spec_name = f"speclab speculative depth {b['depth']} ({result.get('policy', 'fixed')})"
        entries += [("speclab autoregressive", b["ours_ar"]), (spec_name, b["ours_spec"])]
        for name, cell in entries:
            lines.append(f"  {name:<62} {cell['tokens_per_s']:8.1f} tok/s  x{cell['tokens_per_s'] / hf:.2f} vs generate()")
    return "\n".join(lines)


def speedup_ranges(rows: list[dict]) -> list[str]:
    """Each cell's decode-only speedup judged by the one rule (engine/verdict.py) over its interleaved rounds."""
    lines = ["", "decode-only speedup over the interleaved rounds (engine/verdict.py):"]
    for r in rows:
        if len(r.get("spec_decode_runs") or ()) == len(r.get("ar_decode_runs") or ()) > 0:
            cell = f"batch {r['batch']} depth {r['depth']}" + (f" tree {r['tree_nodes']}/{r['tree_topk']}" if r.get("tree_nodes") else "")
            cell += f" {r['policy']}" if r.get("policy", "fixed") != "fixed" else ""
            ttft = (
                f"  (first token: plain {r['ar_ttft_s']:.2f} s, speculative {r['spec_ttft_s']:.2f} s)"
                if r.get("ar_ttft_s") is not None
                else ""
            )
            lines.append(f"  {cell:<24} {judge(r['spec_decode_runs'], r['ar_decode_runs']).words('speculative', 'plain')}{ttft}")
            if r.get("policy", "fixed") != "fixed" and r.get("depth_steps"):  # what an adaptive policy chose at this (batch, context)
                chosen = ", ".join(f"k {k}: {n}" for k, n in r["depth_steps"].items())
                lines.append(f"  {'':<24} batch {r['batch']}, context {r.get('context', 0)} -> steps per k ({chosen})")
    return lines if len(lines) > 2 else []


def format_passes(rows: list[dict], peak_flops: float | None = None, peak_bandwidth: float | None = None) -> str:
    contexts = len({r.get("context") for r in rows}) > 1  # several: a column of them
    lines = [
        ("context " if contexts else "")
        + "batch  new/row  tok/pass     ms   ms/token   GB/s   GFLOP/s"
        + ("  %BW  %FLOP" if peak_flops else "")
    ]
    for r in rows:
        line = (
            (f"{r['context']:>7} " if contexts else "")
            + f"{r['batch']:>5} {r['new_tokens']:>8} {r['tokens_per_pass']:>9} {r['ms']:>6.1f} {r['ms_per_token']:>10.2f} "
            f"{r['achieved_bandwidth'] / 1e9:>6.1f} {r['achieved_flops'] / 1e9:>9.1f}"
        )
        if peak_flops and peak_bandwidth:
            line += f" {100 * r['achieved_bandwidth'] / peak_bandwidth:>4.0f} {100 * r['achieved_flops'] / peak_flops:>5.0f}"
        lines.append(line)
    return "\n".join(lines)
