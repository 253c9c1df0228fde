"""Record the GPU evidence SpecLab ships, in one time-boxed call of a lent GPU (issue 20, items 2 and 5).

With the embedded pair (real weights: the SmolLM2-135M-Instruct target from its GGUF file, the shipped
EAGLE head and the distilled draft), graph-captured (`backend="cuda_graphs"`, engine/model/graphs.py) and eager
(`backend="torch"`), interleaved stage by stage; every curve, grid and race is keyed by its backend:

1. exactness: float32, graph-captured vs eager decoding give the same tokens (model, EAGLE, n-gram
   drafters, a ragged batch in which a row finishes early);
2. the pass-cost curve of the target (one forward vs tokens per pass, CUDA events), graphs and eager; and its
   long-context curves (scripts/record/gpu_context.py: 1 and 4 new tokens per row at --contexts 0, 4k, 32k);
3. the batch x depth grid with the EAGLE head (engine.bench.harness.bench: AR and each depth interleaved, medians);
4. the Playground's races at each --race-batch: the AR trace (depth 0) and the speculative trace at the
   grid's best depth for that batch, graphs and eager, as trace files Replay plays back;
5. pass-cost curves of larger real architectures (SmolLM2-1.7B, Qwen2.5-7B shapes) with RANDOM weights
   (timing does not depend on weight values), graphs and eager, compared with scripts/investigate/gpu_graphs.py's
   recorded graph figures (docs/measurements/h200-gpu_graphs.json) where the shapes match, and at --contexts;
6. a PROJECTION of speedup vs batch for those shapes: Leviathan's E(alpha, k) with the alpha and draft cost
   c measured in stage 3 on the 135M pair, over the shapes' measured verify cost T(B(k+1)) / T(B):
   speedup = E(alpha, k) / (k c + T(B(k+1)) / T(B)). A model fed with measurements, labelled so.

Output (--out): recording.json (schema engine/roofline/device_recordings.py: device name, torch and CUDA versions, date)
and traces/*.json; recording.json is rewritten after every stage, so a run stopped by its budget still
leaves what it measured. A stage that fails records its error and the next one runs.

On the lent machine (the weights travel as the embedded GGUF in two parts; nothing is downloaded there):
    bash scripts/gpu_record.sh prepare            # here: .gg1/p1, .gg2/p2, the gguf wheel, sha256
    run 1 (carry .gg1 .whl):  bash scripts/gpu_record.sh stash
    run 2 (carry .gg2 .whl):  bash scripts/gpu_record.sh record   # python scripts/record/gpu_record.py --out $OUT/rec
Then copy the folder to assets/recordings/<device>-<date>/ (Replay lists it).

A CPU dry run of every stage with tiny sizes (CI runs it; its output is labelled as a dry run and
engine.roofline.device_recordings never lists it as a recording):
    python scripts/record/gpu_record.py --dry-run --out /tmp/rec-dry
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path

import torch

from engine import DecodeConfig, generate
from engine.bench.harness import bench
from engine.bench.prompts import batch_prompts
from engine.costs import expected_tokens_per_step
from engine.decoding.passcurve import pass_costs
from engine.decoding.warmup import warm_graphs
from engine.hardware import device_name, pick_device, pick_dtype, probe
from engine.model.pair import load_pair
from engine.roofline.device_recordings import RECORDING_SCHEMA_ID, RECORDINGS

ROOT = Path(__file__).resolve().parents[2]


def _sibling(name: str):
    """A module of scripts/ by file path (this file also runs imported by the CI test, not only as a script)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_gpu_bench = _sibling("gpu_bench")  # the random-weight shapes of real architectures
SHAPES, random_pair = _gpu_bench.SHAPES, _gpu_bench.random_pair
_gpu_context = _sibling("gpu_context")  # the long-context pass curves

GPU_GRAPHS_JSON = ROOT / "docs" / "measurements" / "h200-gpu_graphs.json"
EAGER = "torch"  # the eager path's backend: the lean forward over the dynamic cache, the GPU's default
DRY_SHAPES = {"tiny-wide": (128, 256, 2, 4, 2, 49152, True), "tiny-deep": (64, 128, 4, 4, 4, 49152, True)}
EXACT_PROMPTS = ["Hi", "Write a long story about a dragon.", "What is the capital of France?"]  # ragged; "Hi" ends early


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for recording.json and traces/")
    p.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes, labelled as a dry run (CI)")
    p.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="stop starting new stages after this many seconds (default 450 on a GPU; none in a dry run, which must run every stage)",
    )
    p.add_argument("--batch", default="1,16,64,256", help="grid batches")
    p.add_argument("--depth", default="1,2,3,4", help="grid depths (AR is always measured)")
    p.add_argument("--race-batch", default="1,16,64,256")
    p.add_argument("--tokens", default="1,2,4,8,16,32,64", help="pass curve: new tokens per row")
    p.add_argument("--curve-batch", default="1,16,64,256")
    p.add_argument("--shapes", default="smollm2-1.7b,qwen2.5-7b", help="random-weight shapes (gpu_bench.SHAPES)")
    p.add_argument("--contexts", default="0,4096,32768", help="long-context pass curves: KV tokens per row (issue 54)")
    p.add_argument("--context-batch", default="1,8", help="long-context pass curves: batches (batch x context <= KV_TOKENS)")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    if args.budget_s is None:
        args.budget_s = float("inf") if args.dry_run else 450.0
    if args.dry_run:  # every stage, tiny: well under a minute on a quiet CPU
        args.batch, args.depth, args.race_batch, args.tokens, args.curve_batch = "2", "1", "2", "1,2", "2"
        args.shapes, args.max_new_tokens, args.repeats = ",".join(DRY_SHAPES), 3, 1
        args.contexts, args.context_batch = "0,64", "2"
    out = Path(args.out).resolve()
    if args.dry_run and (out == RECORDINGS or RECORDINGS in out.parents):
        p.error(f"--dry-run output may not go under {RECORDINGS}: a dry run is never shipped as a recording")
    for name in ("batch", "depth", "race_batch", "tokens", "curve_batch", "contexts", "context_batch"):
        try:
            setattr(args, name, [int(v) for v in getattr(args, name).split(",") if v])
        except ValueError:
            p.error(f"--{name.replace('_', '-')} must be comma-separated integers")
    args.shapes = [s for s in args.shapes.split(",") if s]
    known = {**SHAPES, **DRY_SHAPES}
    unknown = [s for s in args.shapes if s not in known]
    if unknown:
        p.error(f"unknown shape(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    return args


class Recorder:
    """The recording in progress: the JSON document, the clock, and one `stage` wrapper per stage."""

    def __init__(self, args, device, dtype, peaks):
        self.args, self.device, self.t0 = args, device, time.perf_counter()
        # the graph path: the "cuda_graphs" backend, captured on CUDA; on a CPU (dry run) the same padded buckets, run
        # eagerly; the eager path: the lean forward over the dynamic cache ("torch", the GPU's default)
        self.graph_backend = "cuda_graphs" if device.type == "cuda" else "cuda_graphs_padded"
        self.backends = (self.graph_backend, EAGER)
        self.out = Path(args.out)
        (self.out / "traces").mkdir(parents=True, exist_ok=True)
        name, date = device_name(device), dt.date.today().isoformat()
        label = (
            f"CPU dry run on {name}, {date}: NOT a GPU recording (tiny sizes, for CI)" if args.dry_run else f"recorded on {name}, {date}"
        )
        self.doc = {
            "schema": RECORDING_SCHEMA_ID,
            "label": label,
            "dry_run": bool(args.dry_run),
            "device": device.type,
            "device_name": name,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "date": date,
            "dtype": str(dtype).replace("torch.", ""),
            "elapsed_s": 0.0,
            "probe": {k: peaks.to_dict()[k] for k in ("peak_bandwidth", "peak_flops", "ridge_point")},
            "pair": {},
            "pass_curves": [],
            "grid": [],
            "races": [],
            "comparisons": [],
            "exactness": {"dtype": "float32", "all_equal": False, "runs": []},
            "projection": {"label": "", "alpha": None, "rows": []},
            "notes": [],
            "errors": [],
        }
        self.peaks = peaks

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def stage(self, name: str, fn) -> None:
        if self.elapsed() > self.args.budget_s:
            self.doc["errors"].append(f"{name}: skipped, the {self.args.budget_s:.0f} s budget was spent")
            print(f"== {name}: skipped (budget)", flush=True)
            return
        t = time.perf_counter()
        print(f"== {name} ({self.elapsed():.0f} s in)", flush=True)
        try:
            fn()
        except Exception as exc:  # a lent GPU's minutes are scarce: record and go on
            traceback.print_exc()
            self.doc["errors"].append(f"{name}: {type(exc).__name__}: {str(exc)[:300]}")
        print(f"   {name}: {time.perf_counter() - t:.1f} s", flush=True)
        self.save()

    def save(self) -> None:
        self.doc["elapsed_s"] = round(self.elapsed(), 1)
        tmp = self.out / "recording.json.tmp"
        tmp.write_text(json.dumps(self.doc, indent=1))
        tmp.replace(self.out / "recording.json")

    def save_trace(self, trace, name: str) -> str:
        trace.meta["probe"] = self.peaks.to_dict()
        trace.meta["recorded_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        trace.meta["recording_label"] = self.doc["label"]
        trace.to_json(self.out / "traces" / name)
        return name


# --- stages ---------------------------------------------------------------------------------------------
def exactness(rec: Recorder, pair) -> None:
    """float32: the graph path and eager give the same tokens (on a CPU the graph path runs padded, eagerly)."""
    graph_backend = rec.graph_backend
    n = rec.args.max_new_tokens
    prompts = EXACT_PROMPTS[:2] if rec.args.dry_run else EXACT_PROMPTS
    runs = []
    for drafter in ("model", "eagle", "ngram"):
        cfg = DecodeConfig(depth=3, drafter=drafter, max_new_tokens=n, backend=EAGER)
        eager = generate(pair, prompts, cfg)
        graph_cfg = DecodeConfig.from_dict(cfg.to_dict() | {"backend": graph_backend})
        warm_graphs(pair, prompts, graph_cfg)  # captured at load (engine/decoding/warmup.py), not inside the run
        graphs = generate(pair, prompts, graph_cfg)
        equal = graphs.output_ids == eager.output_ids
        runs.append(
            {
                "drafter": drafter,
                "equal": equal,
                "tokens": sum(len(o) for o in eager.output_ids),
                "graph_path": graphs.meta["decode_passes"],
                "graphs_captured": graphs.meta["graphs_ready"],
            }
        )
        print(
            f"   {drafter}: graph path == eager: {equal} ({graphs.meta['decode_passes']}, {graphs.meta['graphs_ready']} graphs)",
            flush=True,
        )
    rec.doc["exactness"] = {"dtype": "float32", "backend": graph_backend, "all_equal": all(r["equal"] for r in runs), "runs": runs}


CONTEXT = 150  # the pass curves' KV length per row (engine.decoding.passcurve.pass_costs' default); 32 in a dry run


def curve(pair, batches, tokens, context, backend, repeats=5, dry_run=False) -> tuple[list[dict], bool]:
    if dry_run:
        context, repeats = min(context, 32), min(repeats, 2)
    rows = pass_costs(pair, batches, tokens, context=context, repeats=repeats, backend=backend)
    keep = ("batch", "new_tokens", "tokens_per_pass", "context", "ms", "flops", "bytes", "achieved_flops", "achieved_bandwidth")
    return [{k: r[k] for k in keep} for r in rows], any(r.get("graphs_captured") for r in rows)


def curve_entry(model: str, weights: str, backend: str, used: bool, rows: list[dict], **extra) -> dict:
    """One recorded pass curve: which model and weights, the backend and whether graphs ran, its context, its rows."""
    return {
        "model": model,
        "weights": weights,
        "backend": backend,
        "graphs_used": used,
        "context": rows[0]["context"],
        "rows": rows,
    } | extra


def target_curves(rec: Recorder, pair) -> None:
    for backend in rec.backends:  # graphs, then eager
        rows, used = curve(pair, rec.args.curve_batch, rec.args.tokens, CONTEXT, backend, dry_run=rec.args.dry_run)
        rec.doc["pass_curves"].append(curve_entry(f"{pair.target_name} (real weights)", "real", backend, used, rows))
        print(f"   {backend}: " + ", ".join(f"B{r['batch']}x{r['new_tokens']} {r['ms']:.2f} ms" for r in rows[:6]), flush=True)


GRID_KEYS = (
    "batch",
    "depth",
    "ar_tokens_per_s",
    "spec_tokens_per_s",
    "speedup",
    "alpha",
    "c",
    "tokens_per_step",
    "ar_verify_ms",
    "spec_verify_ms",
    "draft_ms_per_forward",
    "same_output",
)


def grid(rec: Recorder, pair) -> None:
    for backend in rec.backends:
        if backend == EAGER and rec.elapsed() > 0.55 * rec.args.budget_s:  # keep time for the races
            rec.doc["errors"].append("grid, eager: skipped to leave the races their share of the budget")
            continue
        result = bench(
            pair,
            rec.args.batch,
            rec.args.depth,
            drafter="eagle",
            prompt_set="heldout",
            max_new_tokens=rec.args.max_new_tokens,
            repeats=rec.args.repeats,
            backend=backend,
            log=lambda s: print(s, flush=True),
        )
        rows = [{k: r.get(k) for k in GRID_KEYS} for r in result["rows"]]
        rec.doc["grid"].append(
            {"backend": backend, "drafter": "eagle", "prompt_set": "heldout", "max_new_tokens": rec.args.max_new_tokens, "rows": rows}
        )
        rec.save()


def best_depths(rec: Recorder) -> dict[int, int]:
    """Per batch, the depth with the highest measured speedup in the graph-captured grid (eager if none)."""
    grids = {g["backend"]: g["rows"] for g in rec.doc["grid"]}
    rows = grids.get(rec.graph_backend) or grids.get(EAGER) or []
    best: dict[int, tuple[float, int]] = {}
    for r in rows:
        if r["batch"] not in best or r["speedup"] > best[r["batch"]][0]:
            best[r["batch"]] = (r["speedup"], r["depth"])
    return {b: d for b, (_, d) in best.items()}


def races(rec: Recorder, pair) -> None:
    best = best_depths(rec)
    n = rec.args.max_new_tokens
    for batch in rec.args.race_batch:
        depth = best.get(batch, max(rec.args.depth))
        prompts = batch_prompts("heldout", batch)
        for backend in rec.backends:
            ar = generate(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=n, backend=backend))
            spec = generate(pair, prompts, DecodeConfig(depth=depth, drafter="eagle", max_new_tokens=n, backend=backend))
            stem = f"b{batch}-k{depth}-{ {'cuda_graphs': 'graphs', EAGER: 'eager'}.get(backend, backend) }"
            speedup = spec.summary["tokens_per_s"] / ar.summary["tokens_per_s"]
            rec.doc["races"].append(
                {
                    "batch": batch,
                    "depth": depth,
                    "backend": backend,
                    "drafter": "eagle",
                    "speedup": speedup,
                    "ar": rec.save_trace(ar, f"{stem}-ar.json"),
                    "spec": rec.save_trace(spec, f"{stem}-spec.json"),
                    "decode_passes": spec.meta["decode_passes"],
                    "alpha": spec.summary.get("alpha"),
                }
            )
            print(
                f"   batch {batch} k={depth} {backend}: AR {ar.summary['tokens_per_s']:.0f} tok/s, "
                f"spec {spec.summary['tokens_per_s']:.0f} tok/s, x{speedup:.2f}",
                flush=True,
            )


def gpu_graphs_reference() -> dict:
    """(shape, batch, new tokens) -> graph ms from scripts/investigate/gpu_graphs.py's recorded H200 run."""
    try:
        data = json.loads(GPU_GRAPHS_JSON.read_text())
    except (OSError, ValueError):
        return {}
    return {
        (s["shape"], r["batch"], r["new_tokens"]): r["graph_ms"]
        for s in data.get("shapes", [])
        for r in s.get("passes", [])
        if r.get("graph_ms")
    }


def big_shapes(rec: Recorder) -> None:
    """Random-weight pass curves: for the projection (batch x (k+1) at context 150) and, at gpu_graphs.py's
    shapes (no context to speak of), a comparison with its recorded graph figures."""
    SHAPES.update(DRY_SHAPES)
    reference = gpu_graphs_reference() if rec.device.type == "cuda" else {}
    ks = sorted({1, *[d + 1 for d in rec.args.depth]})
    for shape in rec.args.shapes:
        pair = random_pair(shape, pick_dtype("auto", rec.device) if not rec.args.dry_run else torch.float32, rec.device)
        name = f"{shape} shape, RANDOM weights"
        for backend in rec.backends:
            rows, used = curve(pair, rec.args.race_batch, ks, CONTEXT, backend, repeats=3, dry_run=rec.args.dry_run)
            rec.doc["pass_curves"].append(curve_entry(name, "random", backend, used, rows, role="projection"))
        cmp_batches, cmp_tokens = ([1, 8, 64], [1, 4, 16, 64, 128]) if not rec.args.dry_run else ([1], [1, 4])
        rows, used = curve(pair, cmp_batches, cmp_tokens, 1, rec.graph_backend, repeats=5, dry_run=rec.args.dry_run)
        rec.doc["pass_curves"].append(curve_entry(name, "random", rec.graph_backend, used, rows, role="gpu_graphs comparison"))
        for r in rows:
            ref = reference.get((shape, r["batch"], r["new_tokens"]))
            if ref:
                rec.doc["comparisons"].append(
                    {
                        "shape": shape,
                        "batch": r["batch"],
                        "new_tokens": r["new_tokens"],
                        "engine_graph_ms": r["ms"],
                        "gpu_graphs_ms": ref,
                        "ratio": r["ms"] / ref,
                    }
                )
        _gpu_context.context_curves(rec, pair, name, "random", curve)
        del pair
        if rec.device.type == "cuda":
            torch.cuda.empty_cache()
        rec.save()


def projection(rec: Recorder) -> None:
    """speedup(B, k) = E(alpha_k, k) / (k c_{B,k} + T(B, k+1) / T(B, 1)) per random-weight shape, graph curves."""
    grids = {g["backend"]: g["rows"] for g in rec.doc["grid"]}
    measured = {(r["batch"], r["depth"]): r for r in (grids.get(rec.graph_backend) or grids.get(EAGER) or [])}
    rows = []
    for curve_doc in rec.doc["pass_curves"]:
        if curve_doc.get("role") != "projection" or curve_doc["backend"] != rec.graph_backend:
            continue
        shape = curve_doc["model"].split(" shape")[0]
        t = {(r["batch"], r["new_tokens"]): r["ms"] for r in curve_doc["rows"]}
        for (batch, k), m in sorted(measured.items()):
            if m.get("alpha") is None or m.get("c") is None or (batch, 1) not in t or (batch, k + 1) not in t:
                continue
            verify_ratio = t[(batch, k + 1)] / t[(batch, 1)]
            speedup = expected_tokens_per_step(m["alpha"], k) / (k * m["c"] + verify_ratio)
            rows.append(
                {"shape": shape, "batch": batch, "k": k, "speedup": speedup, "alpha": m["alpha"], "c": m["c"], "verify_ratio": verify_ratio}
            )
    rec.doc["projection"] = {
        "label": (
            "PROJECTION, not a measurement: Leviathan's E(alpha, k) with alpha and the draft cost c measured on "
            "the 135M pair with its EAGLE head (this run's grid), over each random-weight shape's measured "
            f"verify cost T(B(k+1))/T(B) ({'graph-captured' if rec.graph_backend == 'cuda_graphs' else 'CPU dry run: padded eager'}); "
            "a larger target's own head would have its own alpha and c"
        ),
        "alpha": None,
        "rows": rows,
    }


def main(argv=None, pair=None) -> int:
    """pair: an already loaded embedded pair (the CI test's float32 one); None loads it."""
    args = parse_args(argv)
    device = torch.device("cpu") if args.dry_run else pick_device()
    if not args.dry_run and device.type != "cuda":
        print("error: no CUDA device here; use --dry-run for the CPU rehearsal", file=sys.stderr)
        return 2
    dtype = torch.float32 if args.dry_run else pick_dtype("auto", device)
    peaks = probe(device, dtype, quick=args.dry_run)
    rec = Recorder(args, device, dtype, peaks)
    print(
        f"{rec.doc['label']}: torch {torch.__version__}, CUDA {torch.version.cuda}, {rec.doc['dtype']}, "
        f"{peaks.peak_bandwidth / 1e9:.0f} GB/s, {peaks.peak_flops / 1e12:.2f} TFLOP/s (probed)",
        flush=True,
    )
    rec.save()
    pair = pair if pair is not None and pair.dtype == dtype else load_pair(device=str(device), dtype=dtype)
    names = {key: loaded.name for key, loaded in pair.loaded.items()}
    rec.doc["pair"] = {"target": pair.target_name, "eagle": names.get("eagle"), "draft": names.get("draft")}
    exact_pair = pair if dtype == torch.float32 else load_pair(device=str(device), dtype="float32")
    rec.stage("exactness (float32, graph path vs eager)", lambda: exactness(rec, exact_pair))
    rec.stage("pass-cost curve, embedded target", lambda: target_curves(rec, pair))
    rec.stage(
        "long-context pass curves, embedded target",
        lambda: _gpu_context.context_curves(rec, pair, f"{pair.target_name} (real weights)", "real", curve),
    )
    rec.stage("batch x depth grid (EAGLE head)", lambda: grid(rec, pair))
    rec.stage("races", lambda: races(rec, pair))
    rec.stage("random-weight shapes", lambda: big_shapes(rec))
    rec.stage("projection", lambda: projection(rec))
    rec.save()
    print(f"done in {rec.elapsed():.0f} s: {Path(args.out) / 'recording.json'}; errors: {rec.doc['errors'] or 'none'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
