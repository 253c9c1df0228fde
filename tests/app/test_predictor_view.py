"""The Predictor page's pure views (app/views/predictor.py) on the engine's real tables."""

from __future__ import annotations

import pytest

pytest.importorskip("plotly")

from app.views import predictor as view  # noqa: E402
from engine.roofline.architectures import architecture  # noqa: E402
from engine.roofline.gpus import GPUS  # noqa: E402
from engine.roofline.predictor import Roof, floor_ms, pass_ms, speedup_grid  # noqa: E402

COSTS = architecture("8B").costs("bfloat16")
ROOF = Roof.from_gpu(GPUS["H200"], "bfloat16")


def _series() -> view.MeasuredSeries:
    tokens = (1, 8, 64)
    predicted = tuple(pass_ms(COSTS, ROOF, 1, n, 0, "graph") for n in tokens)
    return view.MeasuredSeries(
        "measured on NVIDIA H200, CUDA graph (2026-11-30, x.json)", tokens, tuple(2 * p for p in predicted), predicted, ("a", "b", "c")
    )


def test_token_grid_is_log_spaced_integers():
    grid = view.token_grid(1024, per_octave=2)
    assert grid[0] == 1 and grid[-1] == 1024 and grid == sorted(set(grid))
    assert all(isinstance(n, int) for n in grid)


def test_pass_time_figure_draws_model_floors_ridge_and_measurements():
    floors = {"graph": floor_ms(COSTS, "graph"), "eager": floor_ms(COSTS, "eager")}
    fig = view.pass_time_figure(COSTS, ROOF, 1024, "graph", "Llama-3.1-8B on H200", [_series()], floors, top=4096)
    names = [t.name for t in fig.data]
    assert names[:3] == [
        "model: 1 row × n tokens (verify pass)",
        "model: n rows × 1 token (decode batch)",
        "model: roofline alone (no overhead), 1 row",
    ]
    assert "model, not a measurement" in fig.layout.title.text
    first = fig.data[0]
    one_token = pass_ms(COSTS, ROOF, 1, 1, 1024, "none") + floors["graph"]  # the roofline plus the overhead
    assert list(first.x)[-1] == 4096 and list(first.y)[0] == pytest.approx(one_token)
    assert all(a <= b for a, b in zip(first.y, list(first.y)[1:]))
    assert "ridge ≈ 206 tokens/pass" in " | ".join(a.text for a in fig.layout.annotations)
    floor_lines = {t.name: list(t.y) for t in fig.data[3:5]}
    assert floor_lines == {
        f"CUDA-graph overhead {floors['graph']:.2f} ms": [floors["graph"]] * 2,
        f"eager overhead {floors['eager']:.2f} ms": [floors["eager"]] * 2,
    }
    measured = fig.data[5]
    assert measured.mode == "markers" and list(measured.x) == [1, 8, 64]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"


def test_speedup_heatmap_marks_the_crossover_and_empty_cells():
    grid = speedup_grid(COSTS, ROOF, 0.7, 0.05, (1, 64, 256, 512, 1024), (2, 8), 1024, "graph", GPUS["H200"].memory_gb * 1e9)
    fig = view.speedup_heatmap(grid, "test")
    (heat,) = fig.data
    assert list(heat.x) == ["1", "64", "256", "512", "1024"] and list(heat.y) == ["2", "8"]
    assert heat.z[1][4] is None and heat.text[1][4] == ""  # batch 1024 x 1024 tokens of KV does not fit 141 GB
    (outline,) = fig.layout.shapes  # depth 2 never falls below plain here; depth 8 does, at one cell
    j = grid.batches.index(grid.crossover[8])
    assert (outline.x0, outline.x1, outline.y0, outline.y1) == (j - 0.5, j + 0.5, 0.5, 1.5)
    assert "model, not a measurement" in fig.layout.title.text
    lines = view.crossover_lines(grid)
    assert lines[0].startswith("depth 2: stays above plain decoding up to batch 512")
    assert lines[1].startswith(f"depth 8: falls below plain decoding at batch {grid.crossover[8]} (0.")


def test_crossover_lines_when_nothing_fits():
    big = architecture("70B").costs("float32")
    grid = speedup_grid(big, Roof.from_gpu(GPUS["T4"], "float32"), 0.7, 0.05, (1,), (2,), 0, "graph", 16e9)
    assert view.crossover_lines(grid) == ["depth 2: no batch in the grid fits the GPU's memory"]


def test_series_error_and_summary():
    series = _series()  # measured = 2 x model everywhere
    assert series.error == pytest.approx(0.5) and series.ratio == pytest.approx(0.5)
    summary = view.series_summary(series)
    assert "3 passes" in summary and "**50%**" in summary and "faster than the machine" in summary


def test_error_table_rows():
    from engine.roofline.recordings import check, load_recordings

    rows = view.error_table(check(load_recordings()[0]))
    assert rows and {"device", "model shape", "mode", "error, data-sheet peaks", "file"} <= set(rows[0])
    assert all(r["error, data-sheet peaks"].endswith("%") for r in rows)
