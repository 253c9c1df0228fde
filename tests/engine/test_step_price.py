"""One step price (engine/decoding/chain_value.py, `step_rate`): expected tokens over verify + draft + fixed time, for
plain steps, chains and trees alike, and the warm-start store keyed by its version."""

from __future__ import annotations

import ast
from pathlib import Path

from test_policies import curve

from engine import DecodeConfig
from engine.decoding import chain_value, goodput, warmstart
from engine.decoding.chain_value import PRICE_VERSION, best_depth, expected_tokens, step_rate

ROOT = Path(__file__).resolve().parents[2]


def test_best_depth_prices_each_depth_with_step_rate():
    knee = curve(lambda n: 10.0 if n <= 8 else 10.0 * n / 8)
    accept, draft, fixed = [0.9, 0.8, 0.5, 0.3], 1.5, (0.4, 0.7)
    k, rate = best_depth(2, 4, accept, knee.time_ms, draft, fixed_ms=fixed)
    rates = {0: step_rate(2, knee.time_ms(2), fixed[0])}
    rates |= {d: step_rate(2 * expected_tokens(accept, d), knee.time_ms(2 * (d + 1)), d * draft, fixed[1]) for d in range(1, 5)}
    assert k == max(rates, key=rates.get) and rate == rates[k]
    assert step_rate(6.0, 1.0, 1.0, 1.0) == 2.0 and step_rate(3.0, 1.5) == 2.0


def test_trees_are_priced_by_the_same_rule(monkeypatch):
    """GoodputDepth.best_cut and best_tree call step_rate (counted), and their rates are step_rate's."""
    calls = []
    real = goodput.step_rate
    monkeypatch.setattr(goodput, "step_rate", lambda *a: calls.append(a) or real(*a))
    policy = goodput.GoodputDepth(curve(lambda n: 10.0 + n), 3, 0.1, tree_nodes=4, tree_topk=2)
    n, rate = policy.best_cut(1, [0.5, 0.9, 1.1, 1.2], draft_ms=2.0)
    assert len(calls) == 4 and rate == max(real(*a) for a in calls) and 1 <= n <= 4


def _prices(source: str) -> int:
    """Divisions of something by a sum that includes a verify time (a call or name `verify*`, or `v`): a step price."""

    def names(node):
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}

    count = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.BinOp):
            if isinstance(node.right.op, ast.Add) and any(n == "v" or n.startswith("verify") for n in names(node.right)):
                count += 1
    return count


def test_only_chain_value_writes_the_price_of_a_step():
    """The rule 'tokens / (verify + draft + fixed)' is written once, in step_rate; the check finds the old copies."""
    found = {p.name: _prices(p.read_text()) for p in (ROOT / "engine" / "decoding").glob("*.py")}
    assert {name: n for name, n in found.items() if n} == {"chain_value.py": 1}
    old = "def best_cut(batch, gain, verify, cost):\n    return [(batch + g) / (v + cost) for g, v in zip(gain, verify)]\n"
    old += "def best_depth(b, e, k, d, f, verify_ms):\n    return b * e / (verify_ms(b * (k + 1)) + k * d + f)\n"
    assert _prices(old) == 2


def test_the_warm_start_store_is_keyed_by_the_price_version(tiny, monkeypatch):
    knee = curve(lambda n: 10.0)
    cfg = DecodeConfig(depth=3, drafter="model", policy="goodput")
    key = warmstart.policy_key(tiny, cfg, knee, 1)
    assert key[-1] == f"price/{PRICE_VERSION}"
    warmstart.remember(key, {"accept": [0.5]})
    monkeypatch.setattr(warmstart, "PRICE_VERSION", PRICE_VERSION + 1)  # a new pricing: another key, another file
    other = warmstart.policy_key(tiny, cfg, knee, 1)
    assert other != key and warmstart.state_path(other) != warmstart.state_path(key)
    assert warmstart.recall(other) is None and warmstart.recall(key) == {"accept": [0.5]}
    assert chain_value.PRICE_VERSION == PRICE_VERSION
