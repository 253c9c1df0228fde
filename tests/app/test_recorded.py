"""app/views/recorded.py: a recording's grid as rows and where fixed-depth speculation stops paying in it."""

from __future__ import annotations

from app.views import recorded


def grid(backend: str, speedups: dict) -> dict:
    return {
        "backend": backend,
        "drafter": "eagle",
        "rows": [
            {"batch": b, "depth": k, "ar_tokens_per_s": 1.0, "spec_tokens_per_s": s, "speedup": s, "alpha": 0.6}
            for (b, k), s in speedups.items()
        ],
    }


DATA = {
    "grid": [
        grid("cuda_graphs", {(1, 2): 1.9, (1, 4): 2.1, (16, 2): 1.2, (16, 4): 0.9, (64, 2): 0.8, (64, 4): 0.6}),
        grid("torch", {(1, 2): 1.3, (1, 4): 1.2, (16, 2): 1.05, (16, 4): 1.1, (64, 2): 1.01, (64, 4): 0.9}),
    ]
}


def test_grid_rows_pair_graph_and_eager_cells():
    rows = recorded.grid_rows(DATA)
    assert [(r["batch"], r["depth"]) for r in rows] == [(1, 2), (1, 4), (16, 2), (16, 4), (64, 2), (64, 4)]
    assert rows[1]["speedup (CUDA graphs)"] == 2.1 and rows[1]["speedup (eager)"] == 1.2 and rows[1]["alpha"] == 0.6


def test_crossover_is_the_first_batch_where_no_depth_pays():
    rows = recorded.grid_rows(DATA)
    assert recorded.crossover_batch(rows) == 64
    assert recorded.crossover_batch(rows, "speedup (eager)") is None  # depth 2 still pays at 64 in the eager run
    line = recorded.crossover_line("recorded on X, 2026-12-02", rows)
    assert line.startswith("recorded on X, 2026-12-02 — graph-captured: best speedup at batch 1: 2.10x")
    assert "from batch 64 on no fixed depth beats plain decoding" in line
    assert "eager: best speedup at batch 1: 1.30x; some depth beats plain decoding at every recorded batch" in line
    assert recorded.crossover_line("R", []) == "R: no grid recorded"
