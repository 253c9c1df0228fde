"""Static KV buffers and CUDA graphs kept per model and bucket across runs (engine/model/graph_pool.py,
engine/model/graphs.py; issue 30, item 5). The keying and reuse logic runs on this CPU with a stand-in
for the capture (a CPU cannot capture); the real captures are checked on a GPU (marked gpu)."""

from __future__ import annotations

import pytest
import torch

from engine import DecodeConfig, generate
from engine.model import graph_pool
from engine.model.backend import Backend
from engine.model.graphs import GraphRunner, bucket_size

PROMPTS = ["Hi", "Tell me a story about a dragon."]


class FakeGraph:
    def __init__(self):
        self.replays = 0

    def replay(self):
        self.replays += 1


def fake_capturing_runner():
    """A deferring runner whose `_capture` records its keys instead of calling CUDA."""
    runner = GraphRunner(Backend("cuda_graphs", torch.device("cpu"), "graphs"), defer=True)
    runner.capture = True  # as on CUDA
    captured = []

    def capture(key, fn, inputs):
        captured.append(key)
        static_in = {name: t.clone() for name, t in inputs.items()}
        runner.captured += 1
        return FakeGraph(), static_in, fn(**static_in)

    runner._capture = capture
    return runner, captured


def double(x):
    return x * 2, None


def test_a_bucket_new_to_a_run_runs_eager_and_is_captured_once_outside_it():
    runner, captured = fake_capturing_runner()
    key = (1, 4, 128, 1, False, False)
    for _ in range(3):  # run 1 meets the bucket three times: eager each time, never captured inside the run
        out, _ = runner.run(key, double, {"x": torch.ones(2)})
        assert torch.equal(out, torch.full((2,), 2.0))
    assert captured == [] and runner.eager_passes == 3 and list(runner.pending) == [key]
    assert runner.capture_pending() == 1 and captured == [key] and not runner.pending  # at the next set-up
    graph = runner.graphs[key][0]
    for _ in range(2):  # runs 2 and 3: the same graph replays; capture is not called again
        runner.start_run()
        runner.run(key, double, {"x": torch.full((2,), 3.0)})
        assert runner.replays == 1 and runner.eager_passes == 0 and runner.graphs[key][0] is graph
    assert captured == [key] and graph.replays == 2
    assert torch.equal(runner.graphs[key][1]["x"], torch.full((2,), 3.0))  # inputs copied into the static ones


def test_pending_buckets_are_captured_largest_first():
    runner, captured = fake_capturing_runner()
    keys = [(1, 2, 128, 1, False, False), (4, 5, 256, 0, True, False), (2, 2, 128, 1, False, False)]
    for key in keys:
        runner.run(key, double, {"x": torch.ones(1)})
    runner.capture_pending()
    assert captured == [keys[1], keys[2], keys[0]]
    assert bucket_size(keys[1]) == 4 * 5 * 256 and bucket_size(("fn", 3)) == 1


def test_reset_forgets_graphs_and_queue_when_buffers_move():
    runner, captured = fake_capturing_runner()
    runner.run(("a",), double, {"x": torch.ones(1)})
    runner.capture_pending()
    runner.run(("b",), double, {"x": torch.ones(1)})
    runner.reset()
    assert runner.graphs == {} and runner.pending == {}


class Buffers:
    def __init__(self, rows, capacity):
        self.rows, self.capacity = rows, capacity


def test_pool_entry_per_model_and_mode_reused_across_runs():
    model, other = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    cpu = torch.device("cpu")
    padded, static = Backend("cuda_graphs", cpu, "padded"), Backend("cuda_graphs", cpu, "static")
    first = graph_pool.acquire(model, padded)
    graph_pool.release(first)
    again = graph_pool.acquire(model, Backend("cuda_graphs", cpu, "padded", note="another note"))
    assert again is first and again.runs == 2  # same model + backend: the same buffers and graphs
    busy = graph_pool.acquire(model, padded)  # a second run of the model at the same time
    assert busy is not first
    assert graph_pool.acquire(other, padded) is not first
    assert graph_pool.acquire(model, static) not in (first, busy)
    for entry in (again, busy):
        graph_pool.release(entry)


def test_buffers_kept_when_they_fit_and_grown_when_not():
    entry = graph_pool.acquire(torch.nn.Linear(2, 2), Backend("cuda_graphs", torch.device("cpu"), "padded"))
    made = []

    def make(rows, capacity):
        made.append((rows, capacity))
        return Buffers(rows, capacity)

    assert entry.ensure(4, 256, make) is True
    kv = entry.kv
    assert entry.ensure(2, 128, make) is False and entry.kv is kv  # a smaller run: the same buffers
    entry.graphs.graphs[("k",)] = None
    assert entry.ensure(8, 128, make) is True and made[-1] == (8, 256)  # grown, never shrunk
    assert entry.graphs.graphs == {}  # graphs over the old buffers are gone with them
    graph_pool.release(entry)


def test_decode_runs_reuse_the_same_static_buffers(tiny):
    cfg = DecodeConfig(depth=2, max_new_tokens=8, cuda_graphs="padded")
    first = generate(tiny, PROMPTS, cfg)
    entries = graph_pool.entries(tiny.target)
    padded = [e for e in entries if e.backend.graph_mode == "padded"]
    assert len(padded) == 1 and not padded[0].in_use  # given back when the run's cache was dropped
    kv, runs, allocations = padded[0].kv, padded[0].runs, padded[0].allocations  # earlier tests may have grown it
    second = generate(tiny, PROMPTS, cfg)
    assert padded[0].kv is kv and padded[0].runs == runs + 1 and padded[0].allocations == allocations  # not again
    assert second.output_ids == first.output_ids
    assert second.meta["graphs_captured"] == 0 and second.meta["graph_capture_ms"] == 0.0  # a CPU captures nothing


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_graphs_captured_at_warm_up_then_replayed_without_capture():
    from engine import load_pair
    from engine.decoding.warmup import warm_graphs

    pair = load_pair(dtype="float32", device="cuda")
    cfg = DecodeConfig(depth=3, drafter="model", max_new_tokens=32, cuda_graphs="auto")
    warm = warm_graphs(pair, PROMPTS, cfg)
    assert warm["graphs_captured"] > 0 and warm["warmup_ms"] > 0
    kv = [e.kv for e in graph_pool.entries(pair.target) if e.backend.graph_mode == "graphs"]
    run = generate(pair, PROMPTS, cfg)
    assert run.meta["graphs_captured"] == 0 and run.meta["graph_replays"] > 0 and run.meta["graph_eager_passes"] == 0
    assert [e.kv for e in graph_pool.entries(pair.target) if e.backend.graph_mode == "graphs"] == kv  # the same buffers
    eager = generate(pair, PROMPTS, DecodeConfig.from_dict(cfg.to_dict() | {"cuda_graphs": "off"}))
    assert run.output_ids == eager.output_ids
