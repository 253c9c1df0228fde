"""The Sweep page's recorded grid (assets/sweep/grid.json, scripts/record/record_sweep.py): the shipped file loads
through the checked loader and draws, and a malformed or oversized file is refused with one line."""

from __future__ import annotations

import json
from pathlib import Path

from app.views import sweep

SHIPPED = Path(__file__).resolve().parents[2] / "assets" / "sweep" / "grid.json"


def test_the_shipped_recording_loads_labelled_and_draws():
    rec, problem = sweep.load_grid_recording(SHIPPED)
    assert problem is None and rec["schema"] == sweep.SWEEP_SCHEMA
    assert rec["machine"] and rec["date"] and rec["note"] and rec["source"]
    caption = sweep.recorded_caption(rec)
    assert caption.startswith(f"📼 Recorded on {rec['machine']}, {rec['dtype']}, {rec['date']}")
    fig = sweep.speedup_figure(rec["grid_rows"])
    assert len(fig.data[0].z) == len({r["batch"] for r in rec["grid_rows"]}) >= 3
    assert len(sweep.grid_table(rec["grid_rows"])) == len(rec["grid_rows"])


def test_a_bad_recording_is_refused_with_one_line(tmp_path):
    rec, _ = sweep.load_grid_recording(SHIPPED)
    bad = tmp_path / "grid.json"
    bad.write_text(json.dumps(rec | {"grid_rows": [rec["grid_rows"][0] | {"speedup": "fast"}]}))
    data, problem = sweep.load_grid_recording(bad)
    assert data is None and "grid_rows[0].speedup must be a finite number" in problem and "\n" not in problem
    bad.write_text(json.dumps(rec | {"schema": "speclab.sweep/0"}))
    assert "schema must be 'speclab.sweep/1'" in sweep.load_grid_recording(bad)[1]
    bad.write_text("x" * (300 * 1024))
    assert "larger than" in sweep.load_grid_recording(bad)[1]
    assert sweep.load_grid_recording(tmp_path / "none.json") == (None, "no recording at none.json")
