"""One pass object per run (engine/model/passes.py): engine/model holds one layer loop, one tail, one causal-mask
builder, one RMSNorm and one matrix product, and no mode string (`mode`, `capture`, a bool `lean`) is passed below the
cache. Each counter is also shown to find the copies the pass object replaced, so a count of one means something."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

MODEL = Path(__file__).resolve().parents[2] / "engine" / "model"
NORMS = {"norm", "rms_norm", "norm_out"}


def _functions(tree: ast.AST):
    """(qualified name, node) of every function in a module, methods as Class.method."""
    found = []

    def walk(node, prefix=""):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((prefix + child.name, child))
                walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")

    walk(tree)
    return found


def _called(node) -> str:
    """The dotted name of a call's function (`F.linear`, `decoder_layer`, `cpukernels.layer`)."""
    func = node.func
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _calls(node) -> set[str]:
    return {_called(n) for n in ast.walk(node) if isinstance(n, ast.Call)}


def _is_layer_loop(node) -> bool:
    return isinstance(node, ast.For) and bool(_calls(node) & {"decoder_layer", "cpukernels.layer"})


def _is_causal_mask(node) -> bool:
    """column <= past + torch.arange(n): the causal comparison; or a triangle cut out of a full matrix."""
    for n in ast.walk(node):
        if isinstance(n, ast.Compare) and any(isinstance(op, ast.LtE) for op in n.ops):
            if any("torch.arange" in _calls(side) for side in n.comparators):
                return True
        if isinstance(n, ast.Call) and _called(n).split(".")[-1] in ("triu", "triu_", "tril", "tril_"):
            return True
    return False


def census(sources: dict[str, str]) -> dict[str, list[str]]:
    """Where engine/model-like sources {file: text} run a layer loop, build a causal mask, compute an RMSNorm, multiply
    by a weight matrix, and apply a pass's final norm (a tail)."""
    found: dict[str, list[str]] = {"layer loops": [], "mask builders": [], "rms norms": [], "linears": [], "tails": []}
    for name, text in sorted(sources.items()):
        for qual, fn in _functions(ast.parse(text)):
            where = f"{name}:{qual}"
            own = [n for n in ast.walk(fn) if n is fn or not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            calls = {_called(n) for n in own if isinstance(n, ast.Call)}
            found["layer loops"] += [where for n in own if _is_layer_loop(n)]
            if any(_is_causal_mask(n) for n in fn.body):
                found["mask builders"].append(where)
            if calls & {"F.rms_norm", "torch.rsqrt", "x.rsqrt"} or any(c.endswith(".rsqrt") for c in calls):
                found["rms norms"].append(where)
            if calls & {"F.linear", "torch.ops.mkldnn._linear_pointwise"}:
                found["linears"].append(where)
            if fn.name != "decoder_layer" and any(c in NORMS for c in calls):
                found["tails"].append(where)
    return found


def _engine_model() -> dict[str, str]:
    return {path.name: path.read_text() for path in MODEL.glob("*.py")}


def test_engine_model_has_one_layer_loop_tail_mask_builder_norm_and_linear():
    found = census(_engine_model())
    assert found["layer loops"] == ["passes.py:Pass.body"]
    assert found["tails"] == ["passes.py:Pass.tail"]
    assert found["mask builders"] == ["pass_masks.py:pass_mask"]
    assert found["rms norms"] == ["layer.py:norm"]
    assert found["linears"] == ["layer.py:linear"]


OLD_COPIES = {
    "fastllama.py": """
def rms_norm(x, weight, eps):
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x

class LeanLlama:
    def forward(self, ids, cache):
        x = self.body(F.embedding(ids, self.embed), cache)
        return F.linear(rms_norm(x, self.final_norm, self.eps), self.head)

    def body(self, x, positions, past, n, cache):
        causal = cols[None, :] <= (past + torch.arange(n, device=x.device))[:, None]
        for i, weights in enumerate(self.layers):
            x = decoder_layer(x, cos, sin, cache_store(cache.layers[i], past), causal, weights)
        return x
""",
    "pass_masks.py": """
def pass_bias(valid, past, n, window):
    return torch.full((n, window), float("-inf")).triu_(past + 1)
""",
    "fastpass.py": """
def fast_body(x, layers, native):
    for i, weights in enumerate(layers):
        if native:
            cpukernels.layer(x, weights)
    return x

def fast_llama_pass(x, final_norm, eps, layers):
    return norm_out(fast_body(x, layers, True), final_norm, eps, layers)
""",
}


def test_the_census_finds_the_copies_the_pass_object_replaced():
    """Planted: the three layer loops, tails, mask builders and norms the pass object replaced, beside today's files."""
    found = census(_engine_model() | {f"old_{name}": text for name, text in OLD_COPIES.items()})
    assert found["layer loops"] == ["old_fastllama.py:LeanLlama.body", "old_fastpass.py:fast_body", "passes.py:Pass.body"]
    assert found["tails"] == ["old_fastllama.py:LeanLlama.forward", "old_fastpass.py:fast_llama_pass", "passes.py:Pass.tail"]
    assert found["mask builders"] == ["old_fastllama.py:LeanLlama.body", "old_pass_masks.py:pass_bias", "pass_masks.py:pass_mask"]
    assert found["rms norms"] == ["layer.py:norm", "old_fastllama.py:rms_norm"]
    assert found["linears"] == ["layer.py:linear", "old_fastllama.py:LeanLlama.forward"]


def _mode_parameters(sources: dict[str, str]) -> list[str]:
    """Parameters of engine/model functions that carry a pass's mode as a string or flag: `mode`, `capture`, a prepared
    `form` outside engine/model/prepared.py (which makes each form from the `Backend` it is asked with), or a `lean`
    with a default (a bool; a LeanLlama object is passed positionally, without one)."""
    bad = []
    for name, text in sorted(sources.items()):
        for qual, fn in _functions(ast.parse(text)):
            args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
            defaults = dict(zip([a.arg for a in fn.args.posonlyargs + fn.args.args][::-1], fn.args.defaults[::-1]))
            defaults |= {a.arg: d for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None}
            for arg in args:
                form = arg.arg == "form" and not name.endswith("prepared.py")
                if arg.arg in ("mode", "capture") or form or (arg.arg == "lean" and arg.arg in defaults):
                    bad.append(f"{name}:{qual}({arg.arg})")
    return bad


def test_no_mode_string_travels_below_the_cache():
    """The cache holds the run's Backend and the pass built for it: no function in engine/model takes a mode string,
    a capture flag, a prepared form or a bool `lean` (the old StaticRaggedCache(mode=...), GraphRunner(capture=...),
    Pass(lean, form, ...), RaggedCache(lean=))."""
    assert _mode_parameters(_engine_model()) == []
    old = "class StaticRaggedCache:\n    def __init__(self, model, mode: str, lean=None):\n        pass\n"
    old += "class GraphRunner:\n    def __init__(self, device, capture: bool):\n        pass\n"
    old += "class Pass:\n    def __init__(self, lean, form: str, device):\n        pass\n"
    assert sorted(_mode_parameters({"old.py": old})) == [
        "old.py:GraphRunner.__init__(capture)",
        "old.py:Pass.__init__(form)",
        "old.py:StaticRaggedCache.__init__(lean)",
        "old.py:StaticRaggedCache.__init__(mode)",
    ]


@pytest.mark.parametrize("name", ["fused", "native", "torch"])
def test_each_cache_holds_its_backend_and_the_pass_built_for_it(tiny, name):
    """make_cache builds the pass once: a static cache's route and Pass follow its Backend, the dynamic cache's Pass is
    the "torch" backend's; each Pass holds the cache's Backend itself (no form string) and the same Pass object serves
    every pass of the run."""
    from engine import DecodeConfig
    from engine.model import cpukernels
    from engine.model.fastpass import FastRoute
    from engine.model.static_cache import StaticRaggedCache, make_cache

    if name == "native" and not cpukernels.available():
        pytest.skip("the native kernels are not available here")
    cache = make_cache(tiny.target, tiny.device, tiny.target_costs, DecodeConfig(backend=name, max_new_tokens=4))
    assert cache.backend.name == name
    with torch.inference_mode():
        first = cache.prefill([[5, 6, 7]], 0)
    assert first.shape == (1, 1, tiny.target.config.vocab_size)
    if name == "torch":
        assert not isinstance(cache, StaticRaggedCache) and cache.run.passes.backend is cache.backend
        return
    held = cache.passes
    assert type(cache.route) is FastRoute and held.backend is cache.backend and held.layers is held.weights.layers(cache.backend)
    assert held.native == (name == "native" and isinstance(held.layers[0][1], cpukernels.Packed))
    with torch.inference_mode():
        assert cache.forward(torch.tensor([[8, 9]])).shape == (1, 2, tiny.target.config.vocab_size)
    assert cache.passes is held
