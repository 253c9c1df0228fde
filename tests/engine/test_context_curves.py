"""The room and the knee of (batch, context) pass curves, and goodput keyed by context.

engine/room.py reads a curve by the one rule (the 1.25x room, the 1.5x knee); engine/decoding/context_curves.py
measures a curve per (batch, context) on a real model, keeps it and the KV read rate beside the pass curve, and
engine/decoding/context_table.py prints goodput's (batch, context) -> k. Goodput prices the KV read of every row past
the curve's own context only past the short bucket: at a short context its choices are exactly the curve's alone.
"""

from __future__ import annotations

import json
import math

import pytest

from engine.config import DecodeConfig
from engine.decoding import context_curves
from engine.decoding.context_curves import ContextCurve, context_curve, kv_ms_per_token, kv_per_query, kv_read, measure_context_curves
from engine.decoding.context_table import k_table
from engine.decoding.goodput import GoodputDepth
from engine.decoding.passcurve import PassCurve
from engine.decoding.policies import PolicyContext, goodput_policy
from engine.room import KNEE, ROOM, knee_tokens, room_tokens
from tests.engine.test_policies import _step


@pytest.fixture
def data(tmp_path, monkeypatch):
    """Curves and KV read rates kept in a folder of the test's own, nothing in memory from another test."""
    monkeypatch.setenv("SPECLAB_DATA", str(tmp_path))
    monkeypatch.setattr(context_curves, "_memory", {})
    return tmp_path


def test_the_room_stops_at_the_first_pass_over_the_line_and_the_knee_is_interpolated():
    tokens, ms = [8, 16, 24, 32, 64], [10.0, 12.0, 12.4, 20.0, 12.0]  # 32 is over 1.25x; 64 dips back under
    assert ROOM == 1.25 and KNEE == 1.5
    assert room_tokens(tokens, ms) == 24  # the later dip does not widen the room
    assert knee_tokens(tokens, ms) == pytest.approx(24 + 8 * (15.0 - 12.4) / (20.0 - 12.4))
    assert knee_tokens([1, 2, 4], [10.0, 11.0, 12.0]) is None  # never 1.5x within the curve
    assert room_tokens([1, 2], [10.0, 30.0]) == 1
    assert room_tokens([8, 16, 32], [10.0, 11.0, 15.0]) == 22  # read between 16 and 32, where the line is crossed
    assert room_tokens([8, 16, 32], [10.0, 11.0, 12.0]) == 32  # never crossed: the last size
    with pytest.raises(ValueError, match="as many times") as err:
        room_tokens([1, 2], [0.0, 1.0])
    assert "\n" not in str(err.value)


def test_context_curves_are_measured_per_batch_and_context_and_read_back(tiny, data, monkeypatch):
    curves, rows = measure_context_curves(tiny, [1, 3], [16, 64], tokens=[1, 2, 4], rounds=1, repeats=1)
    assert [(c.batch, c.context) for c in curves] == [(1, 16), (1, 64), (3, 16), (3, 64)]
    assert len(rows) == 2 * 2 * 3 and all(r["achieved_bandwidth"] > 0 and r["ms_per_token"] > 0 for r in rows)
    for c in curves:
        assert c.curve.tokens == (c.batch, 2 * c.batch, 4 * c.batch)
        summary = c.summary()
        assert summary["room"] == c.room() == room_tokens(c.curve.tokens, c.curve.ms) >= c.batch
        assert summary["room_per_row"] == c.room() / c.batch and summary["one_token_ms"] == c.curve.ms[0]
    first = context_curve(tiny, 2, 32, tokens=(1, 2))
    files = list((data / "pass_curves" / "context").glob("*.json"))
    assert len(files) == 1 and first.batch == 2 and first.context == 32 and first.curve.tokens == (2, 4)

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured again")

    monkeypatch.setattr(context_curves, "measure_context_curves", no_measuring)
    monkeypatch.setattr(context_curves, "_memory", {})
    assert context_curve(tiny, 2, 32, tokens=(1, 2)) == first  # from its file
    files[0].write_text("{not json")
    monkeypatch.setattr(context_curves, "_memory", {})
    with pytest.raises(AssertionError, match="measured again"):  # unreadable: measured again
        context_curve(tiny, 2, 32, tokens=(1, 2))


def test_a_curve_whose_tokens_are_not_whole_rows_is_refused():
    curve = PassCurve(tokens=(3, 5), ms=(1.0, 2.0), context=64, key="k", measured_at="")
    with pytest.raises(ValueError, match="batch times whole tokens per row"):
        ContextCurve(2, curve)


def test_the_kv_read_rate_is_measured_once_and_prices_a_cached_token(tiny, data, monkeypatch):
    rate = kv_read(tiny)
    assert rate.bandwidth > 0 and math.isfinite(rate.bandwidth)
    ms = kv_ms_per_token(tiny)
    assert ms == pytest.approx(1000 * tiny.target_costs.kv_bytes_per_token / rate.bandwidth)
    assert 0.0 <= rate.per_query <= 1.0 and kv_per_query(tiny) == rate.per_query  # measured beside it, within 0..1
    monkeypatch.setattr(context_curves, "measure_kv_read", lambda pair: pytest.fail("measured again"))
    monkeypatch.setattr(context_curves, "_memory", {})
    assert kv_read(tiny) == rate  # from its file beside the curves


def test_a_kv_read_file_from_before_per_query_or_with_one_out_of_range_is_measured_again():
    kept = context_curves.KVRead(20e9, "k", "2026-12-06", 0.5)
    assert context_curves.KVRead.from_dict(kept.to_dict()) == kept
    for bad in ({**kept.to_dict(), "format": "speclab.kv_read/1"}, {**kept.to_dict(), "per_query": 1.5}):
        with pytest.raises(ValueError):  # `passcurve.kept` measures again on a ValueError
            context_curves.KVRead.from_dict(bad)


FLAT_KNEE = PassCurve(tokens=(1, 8, 16, 32, 64), ms=(10.0, 10.0, 12.0, 20.0, 40.0), context=128, key="k", measured_at="")


def _choices(policy: GoodputDepth, contexts: list[int], batch: int = 8) -> list[int]:
    ks = []
    for i, context in enumerate(contexts):
        k = policy.depth(PolicyContext(step=i + 1, batch=batch, base_depth=4, mean_accepted=None, context=context))
        ks.append(k)
        policy.observe(_step(k, [min(k, 2)] * batch, verify_ms=11.0 + 3 * k + (i % 3), draft_ms=0.5 * k))
    return ks


def test_short_context_choices_are_the_curves_alone():
    """At or under the curve's own context nothing is added, however dear the KV read: the choices and everything
    learnt equal a policy that never prices the KV cache (today's), step for step."""
    contexts = [40 + 2 * i for i in range(40)]  # rows growing up to the curve's context (128)
    plain = GoodputDepth(curve=FLAT_KNEE, max_depth=4, draft_cost_ratio=0.05)
    priced = GoodputDepth(curve=FLAT_KNEE, max_depth=4, draft_cost_ratio=0.05, kv_ms_per_token=5.0)
    assert _choices(priced, contexts) == _choices(plain, contexts)
    own_time = ("step_ms",)  # a step's time outside its passes holds the policy's own wall clock (`observe`)
    assert {k: v for k, v in priced.learnt().items() if k not in own_time} == {k: v for k, v in plain.learnt().items() if k not in own_time}
    assert priced._kv_ms == 0.0


def test_goodput_prices_the_kv_read_past_the_short_bucket_only(tiny, data, monkeypatch):
    monkeypatch.setattr(context_curves, "kv_read", lambda pair: context_curves.KVRead(20e9, "k", "", 0.5))
    from engine.decoding import passcurve

    monkeypatch.setattr(passcurve, "pass_curve", lambda pair: FLAT_KNEE)
    cfg = DecodeConfig(mode="speculative", depth=3, drafter="model", policy="goodput")
    assert goodput_policy(tiny, cfg, batch=8, context=500).kv_ms_per_token == 0.0  # the short bucket: the curve alone
    long = goodput_policy(tiny, cfg, batch=8, context=4096)
    assert long.kv_ms_per_token == pytest.approx(1000 * tiny.target_costs.kv_bytes_per_token / 20e9)
    assert long.kv_ms(8, 4096) == pytest.approx(8 * (4096 - 128) * long.kv_ms_per_token)
    assert long.kv_ms(8, 4096, per_row=3) == pytest.approx(2.0 * long.kv_ms(8, 4096))  # 1 + 0.5 x 2 more tokens per row
    assert long.kv_ms(8, 100) == 0.0
    assert long.kv_per_query == 0.5 and goodput_policy(tiny, cfg, batch=8, context=500).kv_per_query == 0.0


def test_a_long_context_makes_a_verify_pass_relatively_cheaper_so_goodput_drafts_deeper():
    """Past the knee at a short context goodput stays plain; the same batch over a long cache reads that cache once
    per pass whatever its tokens, so a chain's extra tokens cost a smaller share and it drafts."""
    short = GoodputDepth(curve=FLAT_KNEE, max_depth=4, draft_cost_ratio=0.05, accept=[0.5] * 4, kv_ms_per_token=0.01)
    long = GoodputDepth(curve=FLAT_KNEE, max_depth=4, draft_cost_ratio=0.05, accept=[0.5] * 4, kv_ms_per_token=0.01)
    at = dict(step=1, batch=16, base_depth=4, mean_accepted=None)
    assert short.depth(PolicyContext(**at, context=128)) == 0
    assert long.depth(PolicyContext(**at, context=4096)) > 0
    assert long.verify_ms(32) == pytest.approx(20.0 + 16 * (4096 - 128) * 0.01)
    # what it learns is against curve + KV: a step measured at exactly that price leaves the ratio at 1
    long.observe(_step(1, [1] * 16, verify_ms=20.0 + 16 * (4096 - 128) * 0.01, draft_ms=1.0))
    assert long.verify_ratio[0] == pytest.approx(1.0)


def test_the_k_table_has_one_rfc_entry_per_batch_and_context(tiny, data):
    curves, _ = measure_context_curves(tiny, [1, 4], [16, 48], tokens=[1, 2, 3], rounds=1, repeats=1)
    cfg = DecodeConfig(mode="speculative", depth=2, drafter="model", policy="goodput")
    table = k_table(tiny, cfg, curves)
    assert [(r["batch"], r["context"]) for r in table] == [(c.batch, c.context) for c in curves]
    for r in table:
        assert 0 <= r["k_prior"] <= 2 and 0 <= r["k_measured"] <= 2 and r["rate_measured"] > 0
        assert r["entry"] == [r["batch"], r["batch"], r["context"], r["context"], r["k_measured"]]
    with pytest.raises(ValueError, match="speculative"):
        k_table(tiny, DecodeConfig(mode="autoregressive"), curves)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--context", "64,128", "--compare-backends", "torch,native"], "several --context"),
        (["--context", "64,128", "--model", "draft"], "several --context"),
        (["--context", "1"], "--context must be >= 2"),
        (["--drafter", "eagle", "--depth", "0"], "--depth must be between 1 and 16"),
    ],
)
def test_passes_refuses_what_it_cannot_time_in_one_line_before_loading(argv, words, capsys):
    from engine.__main__ import main

    assert main(["passes", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err


def test_passes_over_several_contexts_prints_each_room_and_knee(data, capsys):
    from engine.__main__ import main

    argv = ["passes", "--context", "32,96", "--batch", "1,2", "--tokens", "1,2", "--rounds", "1", "--repeats", "1", "--json"]
    assert main([*argv, str(data / "p.json")]) == 0
    out = capsys.readouterr().out
    assert "room (within 1.25x one token per row) and knee (1.5x)" in out
    rooms = json.loads((data / "p.json").read_text())["rooms"]
    assert [(r["batch"], r["context"]) for r in rooms] == [(1, 32), (1, 96), (2, 32), (2, 96)]
    assert all(r["room"] >= r["batch"] for r in rooms)


def test_where_each_query_token_rereads_the_cache_a_long_context_no_longer_makes_drafts_cheap():
    """The same long-context step as above, on a machine whose attention costs per query token (kv_per_query 1: the
    cache read again for every new token of a row, as a CPU bound by its arithmetic nearly does): 2 tokens per row now
    cost about twice one, so goodput stays plain there; and what it learns is against that price."""
    at = dict(step=1, batch=16, base_depth=4, mean_accepted=None, context=4096)
    once = GoodputDepth(curve=FLAT_KNEE, max_depth=4, draft_cost_ratio=0.05, accept=[0.5] * 4, kv_ms_per_token=0.01)
    every = GoodputDepth(curve=FLAT_KNEE, max_depth=4, draft_cost_ratio=0.05, accept=[0.5] * 4, kv_ms_per_token=0.01, kv_per_query=1.0)
    assert once.depth(PolicyContext(**at)) > 0
    assert every.depth(PolicyContext(**at)) == 0
    kv = 16 * (4096 - 128) * 0.01
    assert every.verify_ms(16) == pytest.approx(12.0 + kv) and every.verify_ms(32) == pytest.approx(20.0 + 2 * kv)
    tree = GoodputDepth(curve=FLAT_KNEE, max_depth=4, draft_cost_ratio=0.05, kv_ms_per_token=0.01, kv_per_query=1.0, tree_nodes=2)
    tree.depth(PolicyContext(**at))
    assert tree.verify_row(16) == pytest.approx([20.0 + 2 * kv, 30.0 + 3 * kv])  # a tree of n nodes: n + 1 tokens a row
    every.observe(_step(1, [1] * 16, verify_ms=20.0 + 2 * kv, draft_ms=1.0))
    assert every.verify_ratio[0] == pytest.approx(1.0)
