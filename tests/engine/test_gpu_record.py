"""scripts/record/gpu_record.py's CPU dry run (CI) and the recordings it writes (engine/roofline/device_recordings.py).

The dry run goes through every stage with tiny sizes on the embedded pair (float32): exactness of the
graph path (padded buckets, run eagerly on a CPU) against eager, pass curves, the grid, the races, the
random-weight shapes and the projection. Its output is labelled as a dry run and is never listed as a
recording; the recording JSON is schema-checked and its traces go through the strict trace loader."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from engine.roofline.device_recordings import RECORDINGS, RecordingError, list_recordings, race_label, read_recording, recordings_note

SCRIPT = Path(__file__).parents[2] / "scripts" / "record" / "gpu_record.py"


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_record", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def dry_run(embedded_f32, tmp_path_factory):
    out = tmp_path_factory.mktemp("rec") / "dry"
    assert load_script().main(["--dry-run", "--out", str(out)], pair=embedded_f32) == 0
    return out


def test_dry_run_writes_every_stage_labelled_as_a_dry_run(dry_run):
    rec = read_recording(dry_run)
    data = rec.data
    assert rec.dry_run and "CPU dry run" in rec.label and "NOT a GPU recording" in rec.label
    assert data["errors"] == [] and data["device"] == "cpu" and data["cuda"] is None
    assert data["exactness"]["all_equal"] and {r["drafter"] for r in data["exactness"]["runs"]} == {"model", "eagle", "ngram"}
    assert data["exactness"]["backend"] == "cuda_graphs_padded"  # a CPU cannot capture: the graph buckets run eagerly
    curves = {(c["model"].split(" ")[0], c["backend"], c["context"]) for c in data["pass_curves"]}
    assert {("tiny-wide", "cuda_graphs_padded", 32), ("tiny-wide", "torch", 32), ("tiny-deep", "cuda_graphs_padded", 1)} <= curves
    assert not any("cuda_graphs" in entry for key in ("pass_curves", "grid", "races") for entry in data[key])  # keyed by backend
    assert [c for c in data["pass_curves"] if c["weights"] == "real"]
    assert all("RANDOM weights" in c["model"] for c in data["pass_curves"] if c["weights"] == "random")
    long = [c for c in data["pass_curves"] if c.get("role") == "context"]  # scripts/record/gpu_context.py
    assert {(c["weights"], c["context"]) for c in long} >= {("real", 1), ("real", 32), ("random", 1), ("random", 32)}
    assert all({r["new_tokens"] for r in c["rows"]} == {1, 4} and all(r["ms"] > 0 for r in c["rows"]) for c in long)
    assert {g["backend"] for g in data["grid"]} == {"cuda_graphs_padded", "torch"}
    assert {r["backend"] for r in data["races"]} == {"cuda_graphs_padded", "torch"}
    assert data["projection"]["rows"] and data["projection"]["label"].startswith("PROJECTION, not a measurement")
    for i in range(len(data["races"])):
        ar, spec = rec.race(i)  # the strict trace loader
        assert ar.config["mode"] == "autoregressive" and spec.config["mode"] == "speculative"
        assert spec.meta["recording_label"] == rec.label and spec.meta["probe"]["peak_flops"] > 0
        assert "CPU dry run" in race_label(rec, i)


def test_dry_runs_are_never_listed_as_recordings(dry_run):
    found, refused = list_recordings(dry_run.parent)
    assert found == [] and refused == ["recording dry: a CPU dry run, not a GPU recording (left out)"]
    found, _ = list_recordings(dry_run.parent, include_dry_runs=True)
    assert [r.folder for r in found] == [dry_run]
    note = recordings_note([])
    assert note.startswith("No full GPU recording (the real model's races and grid, scripts/record/gpu_record.py) ships yet")
    assert "H200 pass-cost curves" in note  # the random-weight curves the lessons draw: the pages do not contradict each other
    assert "Everything on this page is measured live" not in recordings_note([])  # Replay and Sweep show recordings too


def test_dry_run_may_not_write_into_the_shipped_recordings():
    with pytest.raises(SystemExit):
        load_script().parse_args(["--dry-run", "--out", str(RECORDINGS / "x")])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(schema="speclab.gpu_recording/0"), "recording bad: recording.schema must be one of speclab.gpu_recording/2"),
        (lambda d: d.update(dry_run="no"), "recording bad: recording.dry_run must be true or false"),
        (lambda d: d["races"][0].update(ar="../../etc/passwd.json"), r"recording bad: recording.races\[0\].ar must be a string matching"),
        (lambda d: d["races"][0].update(spec="missing.json"), "trace missing.json is missing"),
        (lambda d: d.pop("probe"), "recording bad: recording is missing probe"),
    ],
)
def test_malformed_recordings_are_refused_in_one_line(dry_run, tmp_path, edit, message):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(dry_run, bad)
    data = json.loads((bad / "recording.json").read_text())
    edit(data)
    (bad / "recording.json").write_text(json.dumps(data))
    with pytest.raises(RecordingError, match=message.replace("(", r"\(").replace(")", r"\)")) as exc:
        read_recording(bad)
    assert "\n" not in str(exc.value)
    (bad / "recording.json").write_text('{"schema": NaN}')
    with pytest.raises(RecordingError, match=r"recording bad: NaN is not a number this file may hold \(JSON has no NaN"):
        read_recording(bad)
    (bad / "recording.json").write_text('{"schema": ')
    with pytest.raises(RecordingError, match="recording bad: recording.json is not valid JSON"):
        read_recording(bad)
