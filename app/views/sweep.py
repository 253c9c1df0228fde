"""The Sweep page's grid view and tables: measured rows (plain dicts) -> a plotly heatmap / table rows.

Rows come from `engine.bench.harness.bench` (AR vs speculative per batch x depth cell; with several policies a
row's "policy" names it and an adaptive policy's "depth" is its maximum, "mean_depth" what it used) and
`engine.decoding.passcurve.pass_costs` (one target pass per tokens-per-pass); the curve of the latter is
roofline.pass_cost_figure. The envelope view sets each adaptive policy against the best a static choice
could do at each batch size: max(plain decoding, the best fixed depth). Draft-tree rows ("tree_nodes" > 0)
get their own columns and `tree_vs_chain`'s lines. A cell's winner, and a tree's against a chain, comes only from the
one rule (engine/verdict.py) over the cell's interleaved rounds (rows' "ar_decode_runs" / "spec_decode_runs").
Nothing here calls streamlit.
"""

from __future__ import annotations

import plotly.graph_objects as go

from app.common.measurement import PASS_ROW
from app.views.fairness import cell_contention
from app.views.palette import ink, speedup_scale
from engine.trace.rates import ranking_rate
from engine.verdict import Verdict, judge


def _policy(row: dict) -> str:
    return row.get("policy") or "fixed"


def _tree(row: dict) -> bool:
    return bool(row.get("tree_nodes"))


def fixed_chain(row: dict) -> bool:
    """A fixed-depth chain cell: neither an adaptive policy nor a draft tree."""
    return _policy(row) == "fixed" and not _tree(row)


def column(row: dict) -> str:
    """The grid column of a row: its depth for fixed k ('4'), a draft tree's depth, nodes and top-k
    ('4 · tree 16/4'), else the policy and its maximum ('goodput ≤8')."""
    if _tree(row):
        return f"{row['depth']} · tree {row['tree_nodes']}/{row['tree_topk']}"
    return str(row["depth"]) if _policy(row) == "fixed" else f"{_policy(row)} ≤{row['depth']}"


def _columns(rows: list[dict]) -> list[str]:
    """Fixed depths in increasing order, then the trees, then the adaptive policies in the order measured."""
    fixed = sorted({r["depth"] for r in rows if _policy(r) == "fixed" and not _tree(r)})
    trees = list(dict.fromkeys(column(r) for r in rows if _tree(r)))
    adaptive = list(dict.fromkeys(column(r) for r in rows if _policy(r) != "fixed" and not _tree(r)))
    return [str(d) for d in fixed] + trees + adaptive


def cell_verdict(row: dict) -> Verdict | None:
    """Speculative against plain in one cell, decoding alone, by the one rule over its interleaved rounds (None: the
    row kept no rounds, as recordings before them)."""
    spec, ar = row.get("spec_decode_runs"), row.get("ar_decode_runs")
    return judge(spec, ar) if spec and ar else None


def verdict_text(v: Verdict | None) -> str:
    """A cell's verdict for the table: 'faster: 1.08× (95% range 1.03–1.13×, 3 rounds)', or why none is named."""
    if v is None:
        return "can't tell: no rounds kept"
    if v.rounds < 2:
        return "one run each: can't tell; add rounds"
    return f"{v.kind}: {v.interval}"


def speedup_figure(rows: list[dict], context: int | None = None) -> go.Figure:
    """Heatmap of measured speedup (speculative / AR tokens/s) over batch x depth, with a column per adaptive
    policy (at its maximum depth) after the fixed depths; missing cells stay empty. With `context`, titled with it."""
    batches = sorted({r["batch"] for r in rows})
    depths = _columns(rows)
    cell = {(r["batch"], column(r)): r for r in rows}
    z = [[cell[(b, d)]["speedup"] if (b, d) in cell else None for d in depths] for b in batches]
    text = [[f"{v:.2f}×" if v is not None else "" for v in row] for row in z]
    said = [[verdict_text(cell_verdict(cell[(b, d)])) if (b, d) in cell else "" for d in depths] for b in batches]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=depths,
            y=[str(b) for b in batches],
            text=text,
            texttemplate="%{text}",
            customdata=said,
            colorscale=speedup_scale(),
            zmid=1.0,
            colorbar={"title": "speedup"},
            hovertemplate="batch %{y}, depth %{x}: %{text} (%{customdata})<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="speculation depth k" + (" (adaptive: at most)" if any("≤" in d for d in depths) else ""), type="category")
    fig.update_yaxes(title_text="batch size", type="category")
    fig.update_layout(height=320, margin={"l": 50, "r": 20, "t": 30, "b": 40})
    if context is not None:
        where = f"context {context:,} tokens per row (the shared document before each question)" if context else "context 0 (no document)"
        fig.update_layout(title={"text": f"Speedup, decoding alone, at {where}", "font": {"size": 14}}, margin={"t": 50})
    return ink(fig)  # dark text under Streamlit's grey theme (AA contrast)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def pass_table(rows: list[dict], peak_bandwidth: float, peak_flops: float) -> list[dict]:
    """One table row per measured pass, with achieved bandwidth and FLOP/s as % of the measured peaks."""
    return [
        {
            "batch": r["batch"],
            "tokens/row": r["new_tokens"],
            "tokens/pass": r["tokens_per_pass"],
            "ms": round(r["ms"], 2),
            "ms/token": round(r["ms_per_token"], 3),
            "GB/s": round(r["achieved_bandwidth"] / 1e9, 1),
            "GFLOP/s": round(r["achieved_flops"] / 1e9, 1),
            "% peak BW": round(100 * r["achieved_bandwidth"] / peak_bandwidth),
            "% peak FLOP/s": round(100 * r["achieved_flops"] / peak_flops),
        }
        for r in rows
    ]


# The grid table's columns a reader may not know, each defined where it is read (a header's hover help) and in the
# caption under the table.
GRID_HELP = {
    "mean k": "The depth each decode step drafted to, averaged over the steps.",
    "tokens/pass": "Tokens the largest verify pass carries: batch × (depth + 1), or batch × (tree nodes + 1).",
    "drafted/step": "Draft tokens a row actually proposed per step: below mean k where a row stopped early, ended, "
    "or had no match to copy.",
    "tokens/step": "What a row gained per step, accepted drafts plus the target's own token (Spec-Bench's τ).",
    "α": "The per-token acceptance: the chance the target keeps a draft token (glossary).",
    "FLOPs × AR": "The run's arithmetic (FLOPs, the prompt's pass included) over plain decoding's for the same prompts.",
}
GRID_COLUMNS = "Columns: " + "; ".join(f"{name}, {text[0].lower()}{text[1:].rstrip('.')}" for name, text in GRID_HELP.items()) + "."


def grid_table(rows: list[dict]) -> list[dict]:
    """One table row per grid cell: both lanes' tokens/s decoding alone (`rate`), the speedup (decoding alone) and the
    whole run's beside it, α, drafts per step, FLOPs vs AR, and a ⚠ where the two lanes ran under different load
    (app/views/fairness.py)."""
    return [
        {
            "batch": r["batch"],
            "context": r.get("context", 0),
            "policy": _policy(r),
            "depth": r["depth"],
            "tree": f"{r['tree_nodes']}/{r['tree_topk']}" if _tree(r) else "chain",
            "mean k": _round(r.get("mean_depth"), 2),
            "tokens/pass": r["tokens_per_pass"],
            "AR tok/s": round(rate(r, "ar"), 1),
            "spec tok/s": round(rate(r), 1),
            "speedup": round(r["speedup"], 2),
            "whole-run speedup": _round(r.get("whole_run_speedup"), 2),
            "α": _round(r["alpha"], 2),
            "drafted/step": _round(r.get("drafted_per_step"), 2),
            "tokens/step": _round(r.get("tokens_per_step"), 2),
            "FLOPs × AR": _round(r["flops_ratio"], 2),
            "load": "⚠ " + cell_contention(r) if cell_contention(r) else "",
            "verdict (the one rule)": verdict_text(cell_verdict(r)),
        }
        for r in rows
    ]


def _cell_name(row: dict) -> str:
    """'batch 4, k = 2', 'batch 4, 4 · tree 16/4', 'batch 4, goodput ≤8'."""
    return f"batch {row['batch']}, " + (f"k = {row['depth']}" if _policy(row) == "fixed" and not _tree(row) else column(row))


def grid_verdicts(rows: list[dict]) -> str:
    """One line: how many cells the one rule calls faster, slower, level or can't tell, naming the cells with a winner."""
    verdicts = [(r, cell_verdict(r)) for r in rows]
    if all(v is None for _, v in verdicts):
        return "No cell kept its rounds, so no winner is named: can't tell."
    if all(v is None or v.rounds < 2 for _, v in verdicts):
        return "One run each: can't tell; add rounds (Rounds per cell) to name a winner in any cell."
    parts = []
    for kind in ("faster", "slower", "level", "can't tell"):
        here = [r for r, v in verdicts if (v.kind if v is not None else "can't tell") == kind]
        part = f"{kind} than plain" if kind in ("faster", "slower") else kind
        part += f" in {len(here)} cell" + ("s" if len(here) != 1 else "")
        if here and kind in ("faster", "slower"):
            part += " (" + ", ".join(_cell_name(r) for r in here) + ")"
        parts.append(part)
    return "Speculation against plain decoding, decoding alone, by the one rule: " + "; ".join(parts) + "."


def rate(r: dict, side: str = "spec") -> float:
    """A grid row's tokens/s for `side` ("ar" or "spec") by the one decode-rate rule (engine/trace/rates.py): decoding
    alone, the whole run only where no decode step ran."""
    return ranking_rate({"decode_tokens_per_s": r.get(f"{side}_decode_tokens_per_s"), "tokens_per_s": r[f"{side}_tokens_per_s"]})


def tree_vs_chain(rows: list[dict]) -> list[str]:
    """One line per batch size with both: the best tree's tokens/s against the best chain depth's, from the
    measurement (width against depth as the batch fills the pass)."""
    lines = []
    for batch in sorted({r["batch"] for r in rows}):
        here = [r for r in rows if r["batch"] == batch and _policy(r) == "fixed"]
        trees, chains = [r for r in here if _tree(r)], [r for r in here if not _tree(r)]
        if not trees or not chains:
            continue
        tree = max(trees, key=rate)
        chain = max(chains, key=rate)
        runs = tree.get("spec_decode_runs"), chain.get("spec_decode_runs")  # the same rounds: one run_cells call per batch
        v = judge(*runs) if all(runs) else None
        verdict = "by the one rule, " + (
            v.words(b="the best chain") if v is not None and v.rounds > 1 else "one run each: can't tell; add rounds"
        )
        lines.append(
            f"batch {batch}: the best tree ({column(tree)}, {tree['tokens_per_pass']} tokens per pass) ran "
            f"{rate(tree):.1f} tok/s, {rate(tree) / rate(chain):.2f}× the "
            f"best chain (k = {chain['depth']}, {rate(chain):.1f} tok/s): {verdict}"
            + (
                f"; {tree['tokens_per_step']:.2f} vs {chain['tokens_per_step']:.2f} tokens per sequence-step"
                if tree.get("tokens_per_step") and chain.get("tokens_per_step")
                else ""
            )
            + "."
        )
    return lines


# --- adaptive policies against the static envelope ---------------------------------------------
def envelope(rows: list[dict]) -> list[dict]:
    """Per batch size: AR tokens/s, the best fixed depth and its tokens/s, the envelope max(AR, best fixed), and
    each adaptive policy's tokens/s, mean k and ratio to the envelope, all decoding alone (`rate`). Batch sizes in
    increasing order."""
    out = []
    for batch in sorted({r["batch"] for r in rows}):
        here = [r for r in rows if r["batch"] == batch]
        ar = rate(here[0], "ar")
        fixed = [r for r in here if _policy(r) == "fixed" and not _tree(r)]
        best = max(fixed, key=rate) if fixed else None
        top = max(ar, rate(best)) if best else ar
        adaptive = {
            _policy(r): {
                "tokens_per_s": rate(r),
                "mean_depth": r.get("mean_depth"),
                "max_depth": r["depth"],
                "vs_envelope": rate(r) / top if top else None,
            }
            for r in here
            if _policy(r) != "fixed"
        }
        out.append(
            {
                "batch": batch,
                "ar": ar,
                "best_fixed_depth": best["depth"] if best else None,
                "best_fixed": rate(best) if best else None,
                "envelope": top,
                "envelope_is": "AR" if not best or ar >= rate(best) else f"k = {best['depth']}",
                "adaptive": adaptive,
            }
        )
    return out


def adaptive_policies(env: list[dict]) -> list[str]:
    return list(dict.fromkeys(p for e in env for p in e["adaptive"]))


ADAPTIVE_COLORS = ["#0a7d32", "#b8006b", "#f2a93b"]


def envelope_figure(env: list[dict]) -> go.Figure:
    """Tokens/s against batch size: AR, the best fixed depth, their upper envelope (shaded) and each adaptive policy."""
    x = [str(e["batch"]) for e in env]
    fig = go.Figure()
    fig.add_scatter(
        x=x,
        y=[e["envelope"] for e in env],
        mode="lines",
        name="max(AR, best fixed k)",
        line={"color": "rgba(31,79,209,0.25)", "width": 14},
        customdata=[e["envelope_is"] for e in env],
        hovertemplate="batch %{x}: envelope %{y:.1f} tok/s (%{customdata})<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=[e["ar"] for e in env],
        mode="lines+markers",
        name="AR (plain decoding)",
        line={"color": "#8a8d99", "dash": "dot"},
        hovertemplate="batch %{x}: AR %{y:.1f} tok/s<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=[e["best_fixed"] for e in env],
        mode="lines+markers+text",
        name="best fixed k",
        text=[f"k={e['best_fixed_depth']}" if e["best_fixed_depth"] is not None else "" for e in env],
        textposition="bottom center",
        line={"color": "#1f4fd1"},
        hovertemplate="batch %{x}: best fixed %{text}, %{y:.1f} tok/s<extra></extra>",
    )
    for i, policy in enumerate(adaptive_policies(env)):
        pts = [e["adaptive"].get(policy) for e in env]
        fig.add_scatter(
            x=x,
            y=[p["tokens_per_s"] if p else None for p in pts],
            mode="lines+markers",
            name=policy,
            line={"color": ADAPTIVE_COLORS[i % len(ADAPTIVE_COLORS)], "width": 3},
            customdata=[
                [
                    p["mean_depth"] if p and p["mean_depth"] is not None else float("nan"),
                    p["vs_envelope"] if p and p["vs_envelope"] is not None else float("nan"),
                ]
                for p in pts
            ],
            hovertemplate=f"batch %{{x}}: {policy} %{{y:.1f}} tok/s, mean k %{{customdata[0]:.2f}}, "
            "%{customdata[1]:.2f}× the envelope<extra></extra>",
        )
    return tokens_per_s_axes(fig, top=40)


def tokens_per_s_axes(fig: go.Figure, top: int = 30) -> go.Figure:
    """The shared frame of the tokens/s-against-batch-size charts (Sweep's envelope, lesson 6)."""
    fig.update_xaxes(title_text="batch size", type="category")
    fig.update_yaxes(title_text="tokens/s (all sequences)", rangemode="tozero")
    fig.update_layout(
        height=360,
        margin={"l": 50, "r": 20, "t": top, "b": 40},
        hovermode="x unified",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
    )
    return ink(fig)  # dark text under Streamlit's grey theme (AA contrast)


def envelope_table(env: list[dict]) -> list[dict]:
    """One table row per batch size: AR, best fixed k, the envelope, and per adaptive policy tok/s, mean k, × envelope."""
    table = []
    for e in env:
        row = {
            "batch": e["batch"],
            "AR tok/s": round(e["ar"], 1),
            "best fixed k": e["best_fixed_depth"],
            "best fixed tok/s": _round(e["best_fixed"], 1),
            "envelope tok/s": round(e["envelope"], 1),
        }
        for policy in adaptive_policies(env):
            p = e["adaptive"].get(policy)
            row[f"{policy} tok/s"] = _round(p["tokens_per_s"], 1) if p else None
            row[f"{policy} mean k"] = _round(p["mean_depth"], 2) if p else None
            row[f"{policy} × envelope"] = _round(p["vs_envelope"], 2) if p else None
        table.append(row)
    return table


def envelope_summary(env: list[dict]) -> list[str]:
    """One line per adaptive policy, from the measurement: its ratio to max(AR, best fixed k) at each batch size."""
    lines = []
    for policy in adaptive_policies(env):
        cells = [(e, e["adaptive"][policy]) for e in env if policy in e["adaptive"]]
        parts = [
            f"{p['vs_envelope']:.2f}× at batch {e['batch']} (mean k {p['mean_depth']:.1f}; envelope: {e['envelope_is']})"
            if p["mean_depth"] is not None
            else f"{p['vs_envelope']:.2f}× at batch {e['batch']} (envelope: {e['envelope_is']})"
            for e, p in cells
            if p["vs_envelope"] is not None
        ]
        if parts:
            lines.append(f"{policy} ran at " + ", ".join(parts) + " of max(AR, best fixed k).")
    return lines


# --- the recorded grid the page shows before anything is measured ---------------------------------------
SWEEP_SCHEMA = "speclab.sweep/1"
_NUM = ("num", "num?")
GRID_ROW = {
    **dict.fromkeys(("batch", "depth", "tree_nodes", "tree_topk", "tokens_per_pass"), "int"),
    "policy": "str",
    **dict.fromkeys(("ar_tokens_per_s", "spec_tokens_per_s", "speedup"), _NUM[0]),
    **dict.fromkeys(
        ("mean_depth", "alpha", "drafted_per_step", "tokens_per_step", "flops_ratio", "ar_other_cores", "spec_other_cores", "load_avg"),
        _NUM[1],
    ),
    # decoding apart from prefill: "speedup" is decoding alone, the whole run's beside it
    **dict.fromkeys(("whole_run_speedup", "ar_decode_tokens_per_s", "spec_decode_tokens_per_s"), _NUM[1]),
    # every interleaved round's decoding-alone tokens/s, in the order run: the one rule's input
    **dict.fromkeys(("ar_decode_runs", "spec_decode_runs"), ["num+", 100]),
}
GRID_KEYS = tuple(k.rstrip("?") for k in GRID_ROW)
SWEEP_RECORD = {
    "schema": "str",
    "machine": "str",
    "dtype": "str",
    "date": "str",
    "note": "str",
    "drafter": "str",
    "max_new_tokens": "int",
    "repeats": "int",
    "source": "str",
    "peak_bandwidth": "num?",
    "peak_flops": "num?",
    "ridge_tokens": "num?",
    "pass_rows": [PASS_ROW],  # the pass rows lesson 1 records, by the same schema
    "grid_rows": [GRID_ROW],
}


def load_grid_recording(path) -> tuple[dict | None, str | None]:
    """(the checked recorded sweep, None) or (None, a one-line reason): parsed with the trace loader's limits and
    checked field by field (scripts/record/record_sweep.py writes it)."""
    from pathlib import Path

    from app.common.measurement import MAX_RECORD_BYTES, MeasurementError, check
    from engine.trace.loader import parse_json
    from engine.trace.records import TraceError

    path = Path(path)
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            return None, f"{path.name} is larger than {MAX_RECORD_BYTES // 1024} KB: not a sweep recording"
        data = parse_json(path.read_bytes(), name=path.name)
        check(data, SWEEP_RECORD, "sweep recording")
        if data["schema"] != SWEEP_SCHEMA:
            return None, f"{path.name}: schema must be {SWEEP_SCHEMA!r}"
    except FileNotFoundError:
        return None, f"no recording at {path.name}"
    except OSError as exc:
        return None, f"{path.name} could not be read ({exc.strerror or exc})"
    except (TraceError, MeasurementError) as exc:
        return None, str(exc)
    return data, None


def recorded_caption(rec: dict) -> str:
    """Where and when a recorded sweep was measured, and how (one line for the page)."""
    return (
        f"📼 Recorded on {rec['machine']}, {rec['dtype']}, {rec['date']}: {rec['drafter']}, {rec['max_new_tokens']} new "
        f"tokens per sequence, {rec['repeats']} interleaved run(s) per cell (median) ({rec['note']}; {rec['source']}). "
        "Press a Measure button below to measure on the machine serving this page."
    )
