"""The run's backend is carried, never re-read, and nothing per run is written onto the shared pair.

A run chooses its backend once (engine/model/backend.py, `choose_backend`) and hands it down: its caches, drafters,
greedy verification (`Backend.logit_stats`), a draft tree's children (`Backend.topk_logq`) and the EAGLE head's own
products (its matrices in the backend's form, kept with its PreparedWeights) all take it. So two runs on one shared
pair, one "native" and one "fused", can interleave their steps from two threads and each decodes exactly what it
decodes alone; and no attribute of the pair, its EAGLE runner or its models is assigned while they run."""

from __future__ import annotations

import threading

import pytest
import torch
from conftest import PROMPTS, no_kernels_reason, tiny_eagle_pair

from engine import DecodeConfig, generate, generate_steps
from engine.model import cpukernels
from engine.model.eagle_head import EagleRunner
from engine.model.fastllama import LeanLlama
from engine.model.pair import ModelPair

needs_kernels = pytest.mark.skipif(not cpukernels.available(), reason=no_kernels_reason())
CHAIN = DecodeConfig(depth=3, drafter="eagle", max_new_tokens=16)
TREE = DecodeConfig(depth=3, drafter="eagle", tree_nodes=6, tree_topk=2, max_new_tokens=16)
MODEL = DecodeConfig(depth=3, drafter="model", max_new_tokens=16)


@pytest.fixture(scope="module")
def shared(tokenizer, tmp_path_factory):
    """One float32 pair with a draft model and an EAGLE head (EAGLE-3 fusion of layer 0), shared by every run."""
    return tiny_eagle_pair(tokenizer, tmp_path_factory.mktemp("eagle-shared"), (0,), name="shared eagle")


def _with(cfg: DecodeConfig, backend: str) -> DecodeConfig:
    return DecodeConfig.from_dict(cfg.to_dict() | {"backend": backend})


@needs_kernels
@pytest.mark.parametrize("cfg", [CHAIN, TREE, MODEL], ids=["eagle-chain", "eagle-tree", "model-chain"])
def test_a_fused_run_takes_nothing_from_the_kernels_while_they_are_loaded(shared, monkeypatch, cfg):
    """The kernels are loaded in this process, yet a DecodeConfig(backend="fused") run takes no argmax, top-k, norm,
    layer or matrix product from them; its float32 tokens equal the native run's."""
    native = generate(shared, PROMPTS[:2], _with(cfg, "native"))
    calls = []
    for name in ("logit_stats", "topk_logq", "rms_norm", "layer"):
        real = getattr(cpukernels, name)
        monkeypatch.setattr(cpukernels, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    real_native = cpukernels.Packed.native
    monkeypatch.setattr(cpukernels.Packed, "native", lambda self, x: calls.append("gemm") or real_native(self, x))
    fused = generate(shared, PROMPTS[:2], _with(cfg, "fused"))
    assert calls == [] and fused.meta["backend"] == "fused"
    assert fused.output_ids == native.output_ids and native.meta["backend"] == "native"
    generate(shared, PROMPTS[:2], _with(cfg, "native"))  # the same process, a native run: the kernels are asked
    assert {"logit_stats", "layer"} <= set(calls)


def _interleaved(pair, prompts, configs: list[DecodeConfig]):
    """Each config's run in its own thread on the one shared pair, the threads taking turns step by step (a step of
    run 0, a step of run 1, ...); returns the traces in config order and the order the steps were taken in."""
    turns = [threading.Semaphore(1 if i == 0 else 0) for i in range(len(configs))]
    traces, order, errors = [None] * len(configs), [], []
    done = [False] * len(configs)

    def hand_on(i: int) -> None:
        for j in range(1, len(configs) + 1):  # the next run still decoding, or this one again
            nxt = (i + j) % len(configs)
            if not done[nxt] or nxt == i:
                turns[nxt].release()
                return

    def run(i: int) -> None:
        try:
            stream = generate_steps(pair, prompts, configs[i])
            steps = iter(stream)
            while True:
                turns[i].acquire()
                step = next(steps, None)
                if step is None:
                    done[i] = True
                    traces[i] = stream.trace
                    hand_on(i)
                    return
                order.append(i)
                hand_on(i)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            done[i] = True
            hand_on(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(configs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    return traces, order


@needs_kernels
@pytest.mark.parametrize("cfg", [CHAIN, TREE, MODEL], ids=["eagle-chain", "eagle-tree", "model-chain"])
def test_two_threads_one_native_one_fused_on_one_pair_each_equal_their_run_alone(shared, cfg):
    configs = [_with(cfg, "native"), _with(cfg, "fused")]
    alone = [generate(shared, PROMPTS, c) for c in configs]
    traces, order = _interleaved(shared, PROMPTS, configs)
    assert order[:4] == [0, 1, 0, 1]  # the runs really took turns, step by step
    for got, ref, name in zip(traces, alone, ("native", "fused")):
        assert got.output_ids == ref.output_ids
        assert [s.depth for s in got.steps] == [s.depth for s in ref.steps]
        assert got.meta["backend"] == name and ref.meta["backend"] == name


class _Watch:
    """While on, any attribute assignment on the watched objects (by identity) is recorded."""

    def __init__(self, objects):
        self.ids = {id(o): type(o).__name__ for o in objects}
        self.on = False
        self.writes: list[str] = []

    def guard(self, original):
        watch = self

        def __setattr__(obj, name, value):
            if watch.on and id(obj) in watch.ids:
                watch.writes.append(f"{watch.ids[id(obj)]}.{name}")
            original(obj, name, value)

        return __setattr__


@pytest.mark.parametrize(
    "backend,cfg",
    [("fused", CHAIN), ("fused", TREE), ("torch", TREE), ("fused", MODEL), ("transformers", MODEL)]
    + ([("native", CHAIN), ("native", TREE), ("native", MODEL)] if cpukernels.available() else []),
)
def test_no_attribute_of_the_shared_pair_or_its_runners_is_assigned_during_a_run(shared, monkeypatch, backend, cfg):
    """Watched: the pair, its EAGLE runner and the runner's layer (LeanLlama), and every module of the target and the
    draft model. The first run on a backend prepares weights too (in their registry, not on these objects)."""
    if backend == "transformers" and cfg.drafter != "model":
        pytest.skip("the EAGLE head needs the lean forward")
    runner = shared.weights("eagle")
    watched = [shared, runner, runner.lean, *shared.target.modules(), *shared.weights("draft").modules()]
    watch = _Watch(watched)
    for cls in (ModelPair, EagleRunner, LeanLlama, torch.nn.Module):
        monkeypatch.setattr(cls, "__setattr__", watch.guard(cls.__setattr__))
    watch.on = True
    trace = generate(shared, PROMPTS, _with(cfg, backend))
    watch.on = False
    assert watch.writes == []
    assert trace.meta["backend"] == backend and len(trace.output_ids) == len(PROMPTS)
    shared.target_name = "renamed"  # and the watch sees a write when there is one
    shared.target_name = "tiny-llama"
    watch.on = True
    runner.head_config = dict(runner.head_config)
    watch.on = False
    assert watch.writes == ["EagleRunner.head_config"]
