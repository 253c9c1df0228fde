"""How a run's decode passes ran, for its trace: dynamic or static KV cache, eager, fused or CUDA graphs, and the
graphs captured and replayed (the flat scalars the trace schema wants; engine/trace/records.py)."""

from __future__ import annotations

from engine.model.kvcache import RaggedCache
from engine.model.static_cache import StaticRaggedCache


def graph_meta(caches: list[RaggedCache], requested: str) -> dict:
    """The trace's record of how the passes ran (flat scalars, as the trace schema wants)."""
    static = [c for c in caches if isinstance(c, StaticRaggedCache)]
    labels = {c.route.label for c in static}
    if not static:
        path = "eager (dynamic KV cache)"
    elif len(labels) == 1:
        path = labels.pop()
    else:
        path = "eager (static KV buffers, padded to graph buckets)"
    notes = [c.graph_note for c in caches if getattr(c, "graph_note", None)]
    notes += [c.graphs.fallback for c in static if c.graphs.fallback]
    queued = sum(len(c.graphs.pending) for c in static)
    if queued:
        notes.append(f"{queued} shape buckets new to this run ran eagerly; captured at the next run's set-up")
    return {
        "cuda_graphs": requested,
        "kv_cache": "static" if static else "dynamic",
        "decode_passes": path,
        "graphs_captured": sum(c.graphs.captured for c in static),
        "graph_replays": sum(c.graphs.replays for c in static),
        # captured at this run's set-up, before its clock (warm-up on the host clock; engine/model/graph_pool.py)
        "graph_capture_ms": round(sum(c.graphs.capture_ms_total for c in static), 3),
        "graphs_ready": sum(sum(g is not None for g in c.graphs.graphs.values()) for c in static),
        "graph_eager_passes": sum(c.graphs.eager_passes for c in static),
        "graph_note": "; ".join(dict.fromkeys(notes)) or None,
    }
