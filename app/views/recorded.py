"""Device recordings beside the live measurement: the recorded grid as table rows, and where fixed-depth
speculation falls below plain decoding in it (pure functions over engine/roofline/device_recordings.py's JSON).

Everything here is read from a recording (scripts/record/gpu_record.py, labelled with its machine and date);
nothing is computed from constants. The pages show it next to what they measure live, named as a recording.
"""

from __future__ import annotations

GRAPH_BACKENDS = ("cuda_graphs", "cuda_graphs_padded", "cuda_graphs_static")  # the graph path, captured or run eagerly
EAGER = "torch"  # the eager path (scripts/record/gpu_record.py)


def grid_rows(data: dict) -> list[dict]:
    """One row per (batch, depth): the measured speedup graph-captured and eager, and alpha (graph run)."""
    by_backend = {g["backend"]: {(r["batch"], r["depth"]): r for r in g["rows"]} for g in data.get("grid", [])}
    graphs = next((by_backend[b] for b in GRAPH_BACKENDS if b in by_backend), {})
    eager = by_backend.get(EAGER, {})
    keys = sorted(set(graphs) | set(eager))
    return [
        {
            "batch": b,
            "depth": k,
            "speedup (CUDA graphs)": graphs[(b, k)]["speedup"] if (b, k) in graphs else None,
            "speedup (eager)": eager[(b, k)]["speedup"] if (b, k) in eager else None,
            "alpha": (graphs.get((b, k)) or eager.get((b, k)) or {}).get("alpha"),
        }
        for b, k in keys
    ]


def crossover_batch(rows: list[dict], column: str = "speedup (CUDA graphs)") -> int | None:
    """The smallest recorded batch at which no depth beats plain decoding (every speedup < 1); None if none."""
    batches = sorted({r["batch"] for r in rows})
    for batch in batches:
        speedups = [r[column] for r in rows if r["batch"] == batch and r[column] is not None]
        if speedups and max(speedups) < 1.0:
            return batch
    return None


def crossover_line(label: str, rows: list[dict]) -> str:
    """One sentence from a recording's grid, naming the recording."""
    parts = []
    for column, what in (("speedup (CUDA graphs)", "graph-captured"), ("speedup (eager)", "eager")):
        if not any(r[column] is not None for r in rows):
            continue
        batch = crossover_batch(rows, column)
        best1 = max((r[column] for r in rows if r["batch"] == min(x["batch"] for x in rows) and r[column] is not None), default=None)
        first = f"best speedup at batch {min(x['batch'] for x in rows)}: {best1:.2f}x" if best1 is not None else ""
        tail = (
            f"from batch {batch} on no fixed depth beats plain decoding"
            if batch is not None
            else "some depth beats plain decoding at every recorded batch"
        )
        parts.append(f"{what}: {first}; {tail}")
    return f"{label} — " + "; ".join(parts) if parts else f"{label}: no grid recorded"
