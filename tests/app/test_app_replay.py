"""AppTest (headless) for Replay: a shipped sample pair, an uploaded pair, and refused uploads.

Replay never loads a model, so these run in seconds. The page is opened through app/main.py, as a
user reaches it from the navigation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from app.views import metrics, stepthrough
from engine import Trace, TraceError

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
TRACES = ROOT / "assets" / "traces"

INDEX = json.loads((TRACES / "index.json").read_text(encoding="utf-8"))
FIRST = INDEX["pairs"][0]
UPLOAD = "Upload your own traces"


def _replay() -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.switch_page("replay/replay.py")  # opened straight from the URL: the Playground (and its model) never runs
    return at.run()


def _texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def _html(at) -> str:
    return "\n".join(str(e.proto.body) for e in at.get("html"))


def _raw(name: str) -> bytes:
    return (TRACES / name).read_bytes()


def _page(at) -> None:
    """The race, the summary and the charts are drawn, without exceptions or errors."""
    assert not at.exception
    assert not at.error, _texts(at.error)
    assert "Race replay" in _texts(at.subheader) and "Summary" in _texts(at.subheader)
    labels = {m.label for m in at.metric}
    for label in ("AR tokens/s, decoding", "Speculative tokens/s, decoding", "Acceptance rate", "Measured speedup", "Target forwards"):
        assert label in labels
    assert "tok tok-plain" in _html(at)
    assert at.get("iframe"), "the race replay iframe"


def test_shipped_sample_index_is_complete():
    assert INDEX["pairs"]
    for entry in INDEX["pairs"]:
        for key in ("title", "device", "dtype", "date", "ar", "spec"):
            assert entry.get(key), key
        ar, spec = Trace.from_json(TRACES / entry["ar"]), Trace.from_json(TRACES / entry["spec"])
        assert ar.config["mode"] == "autoregressive" and spec.config["mode"] == "speculative"
        assert ar.meta["probe"]["peak_bandwidth"] > 0 and spec.meta["probe"]["peak_flops"] > 0
        # the page's own check: the lanes were on one clock (a cold first lane once made the whole run read faster
        # than decoding alone, and the shipped sample opened with "Check failed")
        assert metrics.whole_run_excess([metrics.round_rates(ar, spec)]) is None, entry["id"]


def test_replay_shows_the_shipped_sample_and_where_it_was_recorded():
    at = _replay()
    assert at.title[0].value.endswith("Replay")
    _page(at)
    info = _texts(at.info)
    assert "recorded on" in info and FIRST["device"] in info and FIRST["date"] in info
    assert "not a live run" in info
    assert "recording machine" in _texts(at.caption)  # utilisation chart uses the recorded peaks
    # where no device recording is shipped, the page says where its numbers ran, to the sentence's end (it was cut at 300)
    told = [c.value for c in at.caption if "What this page shows ran on" in c.value]
    assert told and all(c.rstrip().endswith("date\\.") for c in told), told  # Markdown-escaped: "date\\."


def test_uploaded_pair_in_either_order_without_peaks():
    at = _replay()
    at.radio(key="source").set_value(UPLOAD).run()
    assert not at.exception and not at.error
    assert "Upload both traces" in _texts(at.info)
    spec = json.loads(_raw(FIRST["spec"]))
    ar = json.loads(_raw(FIRST["ar"]))
    for trace in (ar, spec):  # an older trace: no recorded peaks, no date
        trace["meta"].pop("probe")
        trace["meta"].pop("recorded_at", None)
    # swapped on purpose: Replay reads the modes from the traces, not from which box they were dropped in
    at.file_uploader(key="ar_file").upload("spec.json", json.dumps(spec).encode(), "application/json")
    at.file_uploader(key="spec_file").upload("ar.json", json.dumps(ar).encode(), "application/json")
    at.run()
    _page(at)
    assert "needs the recording machine" in _texts(at.info)


def test_malformed_upload_shows_the_trace_error():
    at = _replay()
    at.radio(key="source").set_value(UPLOAD).run()
    at.file_uploader(key="ar_file").upload("ar.json", b"{not json", "application/json")
    at.file_uploader(key="spec_file").upload("spec.json", _raw(FIRST["spec"]), "application/json")
    at.run()
    assert not at.exception
    errors = _texts(at.error)
    assert "AR trace" in errors and "not a SpecLab trace" in errors
    assert "Race replay" not in _texts(at.subheader)


def test_parse_pair_refuses_mismatched_traces():
    from app.replay.replay import check_pair, parse_pair  # noqa: PLC0415  (module imports streamlit; bare mode)

    ar, spec = parse_pair(_raw(FIRST["ar"]), _raw(FIRST["spec"]))
    assert ar.config["mode"] == "autoregressive" and spec.config["mode"] == "speculative"
    with pytest.raises(TraceError, match="one autoregressive and one speculative"):
        check_pair(ar, ar)
    other = Trace.from_dict(spec.to_dict())
    other.sequences[0]["prompt"] = "something else"
    with pytest.raises(TraceError, match="different prompts"):
        check_pair(ar, other)
    with pytest.raises(TraceError, match="unsupported trace schema"):
        parse_pair(b'{"schema": "other/9"}', _raw(FIRST["spec"]))


def test_playground_traces_carry_their_peaks_and_replay():
    """A Playground run records the probe's peaks in both traces; its downloads replay with them."""
    at = AppTest.from_file(MAIN, default_timeout=240)
    at.query_params["tokens"] = "8"
    at.run()
    at.button(key="run").click().run()
    assert not at.exception and not at.error, _texts(at.error)
    result = at.session_state["result"]
    for trace in (result["ar"], result["spec"]):
        probe = trace.meta["probe"]
        assert probe["peak_bandwidth"] > 0 and probe["peak_flops"] > 0 and probe["device_name"]
        assert trace.meta["recorded_at"]
    raw = {k: json.dumps(result[k].to_dict()).encode() for k in ("ar", "spec")}  # what the download buttons hold

    at = _replay()
    at.radio(key="source").set_value(UPLOAD).run()
    at.file_uploader(key="ar_file").upload("speclab-ar.json", raw["ar"], "application/json")
    at.file_uploader(key="spec_file").upload("speclab-spec.json", raw["spec"], "application/json")
    at.run()
    _page(at)
    assert result["spec"].meta["device_name"] in _texts(at.info)
    assert "recording machine" in _texts(at.caption)


def test_replay_says_gpu_recordings_wait_on_a_gpu_when_none_ship(monkeypatch, tmp_path):
    import engine.roofline.device_recordings as recordings

    monkeypatch.setattr(recordings, "RECORDINGS", tmp_path / "none")
    at = _replay()
    assert "A GPU recording" not in at.radio(key="source").options
    assert "waits on a lent GPU" in _texts(at.caption)


def test_replay_lists_device_recordings_through_the_strict_loaders(monkeypatch, tmp_path):
    """A recording folder (here a test fixture around the shipped CPU sample pair, labelled so) is listed,
    schema-checked and played through the strict trace loader; a dry run beside it is left out, visibly."""
    import shutil

    import engine.roofline.device_recordings as recordings

    root = tmp_path / "recordings"
    for name, dry in (("fixture", False), ("dry", True)):
        (root / name / "traces").mkdir(parents=True)
        for key in ("ar", "spec"):
            shutil.copy(TRACES / FIRST[key], root / name / "traces" / FIRST[key])
        doc = {
            "schema": recordings.RECORDING_SCHEMA_ID,
            "label": f"test fixture ({name}): shipped CPU sample traces",
            "dry_run": dry,
            "device": "cpu",
            "device_name": FIRST["device"],
            "torch": "x",
            "cuda": None,
            "date": FIRST["date"],
            "dtype": FIRST["dtype"],
            "probe": {"peak_bandwidth": 1e10, "peak_flops": 1e11},
            "pass_curves": [],
            "grid": [],
            "exactness": {"dtype": "float32", "all_equal": True, "runs": []},
            "projection": {"label": "none", "rows": []},
            "races": [{"batch": 2, "depth": FIRST["depth"], "backend": "torch", "ar": FIRST["ar"], "spec": FIRST["spec"]}],
        }
        (root / name / "recording.json").write_text(json.dumps(doc))
    monkeypatch.setattr(recordings, "RECORDINGS", root)
    at = _replay()
    assert at.radio(key="source").options[0] == "A GPU recording"
    assert at.radio(key="source").value == "A GPU recording"
    label = f"batch 2, k = {FIRST['depth']}, eager — test fixture (fixture): shipped CPU sample traces"
    assert at.selectbox(key="recorded").options == [label]
    _page(at)
    captions = _texts(at.caption)  # Markdown-escaped text
    assert "recording dry" in captions and "a CPU dry run" in captions and "left out" in captions


def test_any_step_of_a_replayed_run_steps_through_beside_the_engine_code():
    """The step-through works on the replayed trace: the first interesting step by default, and any drafted step
    by number (a step that drafted nothing moves to the nearest that did)."""
    at = _replay()
    spec = Trace.from_json(TRACES / FIRST["spec"])
    steps = stepthrough.speculative_steps(spec)
    key = f"replay_step_{steps[0]}_{steps[-1]}"
    assert at.number_input(key=key).value == stepthrough.interesting_step(spec)
    text, codes = _texts(at.markdown), _texts(at.code)
    for title in stepthrough.STAGES:  # all five stages at once
        assert f"**{title}**" in text
    assert "def keep(self, new_lengths" in codes and "def propose" in codes and not at.exception
    gaps = [i for i in range(steps[0], steps[-1]) if i not in set(steps)]
    assert gaps, "the n-gram sample has steps where no row found a match"
    at.number_input(key=key).set_value(gaps[0]).run()
    assert f"Step {gaps[0]} drafted nothing" in _texts(at.caption) and not at.exception


def test_a_replayed_tree_run_steps_through_its_tree(tiny, tmp_path):
    """An uploaded pair whose speculative lane drafted trees (the tiny pair's draft model, 6 nodes, top-2): the
    step-through shows the tree's own stages and the engine's tree code."""
    from engine import DecodeConfig, generate

    prompts = ["Explain how a rainbow forms.", "Hi"]
    ar = generate(tiny, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=12))
    tree = generate(tiny, prompts, DecodeConfig(depth=2, drafter="model", tree_nodes=6, tree_topk=2, max_new_tokens=12))
    at = _replay()
    at.radio(key="source").set_value(UPLOAD).run()
    for key, trace in (("ar_file", ar), ("spec_file", tree)):  # as the Playground's downloads write them
        path = tmp_path / f"{key}.json"
        trace.to_json(path)
        at.file_uploader(key=key).upload(path.name, path.read_bytes(), "application/json")
    at.run()
    assert not at.exception and not at.error, _texts(at.error)
    text, codes = _texts(at.markdown), _texts(at.code)
    for title in stepthrough.TREE_STAGES:
        assert f"**{title}**" in text
    assert "def keep_path(self" in codes and "def grow_tree" in codes and "RaggedCache.keep_path copies" in _texts(at.text)
