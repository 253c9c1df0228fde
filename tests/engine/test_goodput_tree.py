"""Goodput with draft trees (engine/decoding/goodput.py, engine/decoding/tree_value.py): the cut of an EAGLE-2
tree to its best n nodes is a tree of the highest joint confidences; the calibration and the expected tokens of
a tree are the sums the docstring states; the policy chooses plain, a chain or a tree from the measured cost;
and runs that switch shapes from step to step stay lossless (float32 greedy == plain decoding, batch 1 and
ragged, with the real embedded target and the shipped EAGLE head, and with the draft model on the tiny pair;
sampling through a cut tree follows the target's distribution); the trace records each tree step's size."""

from __future__ import annotations

import dataclasses
import json
import statistics
import threading

import numpy
import pytest
import torch
from conftest import chi2_pvalue
from test_policies import COMPUTE_BOUND, FLAT, KNEE_32, _step, assert_warm_from, ctx, curve
from test_tree import PROMPTS, _checked_run, _eagle_pair, toy_tree

from engine import DecodeConfig, Trace, TraceError, generate, generate_steps
from engine.decoding import goodput as goodput_policy
from engine.decoding import passcurve, warmstart
from engine.decoding.goodput import EXPLORE_STEPS, PRIOR_ACCEPTANCE, REFRESH_STEPS, REMEMBER_STEPS, RUNWAY, GoodputDepth
from engine.decoding.policies import PolicyContext
from engine.decoding.tree_value import CALIBRATION_DECAY, PRIOR_NODES, Calibration, bucket, depth_gains, pricing_check, tree_value
from engine.decoding.verify_tree import accept_tree_sampling
from engine.drafters.tree import DraftTree, TreeBuilder

KNEE_8 = curve(lambda n: 10.0 if n <= 8 else 10.0 * n / 8)  # flat to 8 tokens per pass, then linear


def grown_tree(batch: int = 3, budget: int = 20, seed: int = 0) -> DraftTree:
    gen = torch.Generator().manual_seed(seed)
    builder = TreeBuilder(3, budget, 0.0, None)
    frontier = builder.root(torch.randn(batch, 12, generator=gen) * 3)
    for _ in range(3):
        frontier = builder.grow(frontier, torch.randn(batch, 3, 12, generator=gen) * 3)
    return builder.tree()


def paths(tree: DraftTree, row: int) -> list[tuple[list[int], float]]:
    """Each node's (tokens root -> node, joint confidence), by walking its parents."""
    parents, tokens, q = tree.parents[row].tolist(), tree.tokens[row].tolist(), tree.q[row].tolist()
    out = []
    for i in range(len(parents)):
        toks, conf, j = [], 1.0, i
        while j >= 0:
            toks.insert(0, tokens[j])
            conf *= q[j]
            j = parents[j]
        out.append((toks, conf))
    return out


# --- the cut and what it is worth ----------------------------------------------------------------
def test_cut_keeps_each_rows_best_joint_confidences_and_stays_a_tree():
    tree = grown_tree()
    assert torch.allclose(tree.joint().exp()[1], torch.tensor([c for _, c in paths(tree, 1)]), rtol=1e-4)
    for n in (1, 4, 11, 19):
        cut = tree.best(n)
        assert cut.nodes == n and cut.topk == tree.topk
        for r in range(3):
            parents, depths = cut.parents[r].tolist(), cut.depths[r].tolist()
            assert all(p < i and depths[i] == (1 if p < 0 else depths[p] + 1) for i, p in enumerate(parents))
            full = paths(tree, r)
            kept = paths(cut, r)
            assert all(path in [p for p, _ in full] for path, _ in kept)  # every kept node is one of the tree's
            best = sorted((c for _, c in full), reverse=True)[:n]
            assert sorted((c for _, c in kept), reverse=True) == pytest.approx(best, rel=1e-4)
    assert tree.best(20) is tree and tree.best(64) is tree


def test_calibration_maps_q_to_measured_acceptance():
    """a(q) starts as q; with evidence it moves to accepted / summed q of its bucket, shrunk by PRIOR_NODES drafts."""
    cal = Calibration()
    q = [1.0, 0.6, 0.3, 0.01]
    assert cal.acceptance(q) == pytest.approx(q)  # nothing verified yet: the drafter's own q
    assert [bucket(c) for c in (1.0, 0.6, 0.5, 0.3, 0.01, 0.0)] == [0, 0, 1, 1, 6, 7]
    for _ in range(300):  # q 0.6 accepted 5 times in 6; q 0.3 never
        cal.observe([(0.6, True)] * 5 + [(0.6, False)] + [(0.3, False)] * 4)
    a0 = (5 / (1 - CALIBRATION_DECAY) + PRIOR_NODES * 2**-0.5) / (3.6 / (1 - CALIBRATION_DECAY) + PRIOR_NODES * 2**-0.5)
    a = cal.acceptance([0.6, 0.8, 0.3, 0.1])
    assert a[0] == pytest.approx(min(1.0, 0.6 * a0), rel=1e-3) and a[1] == 1.0  # underconfident: up, capped at 1
    assert 0 < a[2] < 0.3 * 0.2  # bucket 1 saw only rejections: far below q, not 0 (the prior)
    assert a[3] == pytest.approx(0.1)  # bucket 3 saw nothing: still q


def test_tree_value_is_the_sum_of_the_best_nodes_path_probabilities():
    tree = toy_tree(2)  # q = 0.5 everywhere: path probability 0.5 at depth 1, 0.25 at depth 2, 0.125 at depth 3
    p, gain = tree_value(tree, Calibration())
    assert numpy.allclose(numpy.log(p), tree.joint())
    assert gain == pytest.approx([2 * sum([0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125][:n]) for n in range(1, 8)])
    deep = dataclasses.replace(
        toy_tree(1), q=torch.tensor([[0.9, 0.05, 0.05, 0.9, 0.05, 0.9, 0.9]])
    )  # a confident chain a -> d -> g beside weak siblings
    p, _ = tree_value(deep, Calibration())
    assert deep.best(3, torch.tensor(p).log()).tokens[0].tolist() == [0, 3, 5]  # a, d, g: the path, before the weak depth-1 siblings


def test_the_cut_keeps_eagle2s_order_where_the_calibration_is_not_monotone_in_q():
    """A bucket of well-accepted q 0.25-0.5 drafts beside a poorly accepted q > 0.5 one prices a q = 0.45 node above
    its q = 0.55 sibling; the cut still keeps the 0.55 one (joint order), and the gain prices what it keeps."""
    tree = DraftTree(
        tokens=torch.tensor([[7, 8]]),
        parents=torch.tensor([[-1, -1]]),
        depths=torch.tensor([[1, 1]]),
        q=torch.tensor([[0.45, 0.55]]),
        topk=2,
    )
    cal = Calibration()
    for _ in range(100):
        cal.observe([(0.45, True), (0.55, False)])
    a_low, a_high = cal.acceptance([0.45, 0.55])
    assert a_low > a_high  # the calibration alone would rank the 0.45 node first
    policy = goodput(FLAT, calibration=cal)
    n, score = policy.tree_size(tree)
    assert tree.best(1, score).tokens.tolist() == [[8]]  # the q = 0.55 node
    assert tree_value(tree, cal)[1] == pytest.approx([a_high, a_high + a_low])


# --- the policy's choices ------------------------------------------------------------------------
def goodput(curve_, **kwargs) -> GoodputDepth:
    return GoodputDepth(curve=curve_, max_depth=4, draft_cost_ratio=0.02, tree_nodes=16, tree_topk=4, **kwargs)


def per_depth(curve_: list[float], depths: int = 4) -> list[list[float]]:
    return [list(curve_) for _ in range(depths)]


def test_goodput_tries_a_tree_then_prices_it_against_chains_and_plain():
    policy = goodput(FLAT)
    assert policy.depth(ctx(1, 4)) == 4 and not policy.tree_now  # a run's first draft: a chain, a cheaper first look
    policy.observe(_step(4, [4], verify_ms=10.0, draft_ms=1.0))
    assert policy.depth(ctx(1, 4)) == 4 and policy.tree_now  # no tree seen yet: the next speculative step draws one
    policy.tree_gain = [[0.5 * d + 0.15 * n for n in range(16)] for d in range(1, 5)]  # confident: free nodes are worth verifying
    assert policy.depth(ctx(1, 4)) == 4 and policy.tree_now and policy.last_choice[0] == 16
    policy.tree_gain = per_depth([0.2] * 16)  # worth no more than the chain inside it (the floor) ...
    policy.tree_draft_ms = {1: 2.0}  # ... and a level costs more than a chain's position (0.2 ms): the chain
    assert policy.depth(ctx(1, 4)) == 4 and not policy.tree_now and policy.last_choice[0] == 4
    compute = goodput(COMPUTE_BOUND, tree_gain=per_depth([0.5 + 0.1 * n for n in range(16)]))
    assert compute.depth(ctx(4, 4)) == 0 and not compute.tree_now  # every token costs: plain wins


def test_a_tree_is_priced_at_least_as_the_chain_inside_it():
    """A cold calibration prices a node at the drafter's own q; an underconfident head's tree (q = 0.3 everywhere)
    would then be worth far less than the chain its card promises, and lose to chains for the whole run. The tree's
    top-1 path is that chain, so its curve is floored by the chain of min(n, d) drafts."""
    policy = goodput(FLAT, prior=[0.8, 0.8, 0.8, 0.8])
    tree = grown_tree(batch=1, budget=16)
    tree = dataclasses.replace(tree, q=torch.full_like(tree.q, 0.3))
    policy.tree_size(tree)
    raw = depth_gains(tree, tree_value(tree, Calibration())[0])[2]  # depth 3, priced at q
    chain = [0.8, 0.8 + 0.64, 0.8 + 0.64 + 0.512]
    curve3 = policy.tree_curve(3)
    assert raw[2] < chain[2] / 2  # what the cold calibration alone says
    assert curve3[:3] == pytest.approx(chain)  # the first three nodes: the chain's worth
    assert curve3[3:] == pytest.approx([r + chain[2] - raw[2] for r in raw[3:]])  # beyond: the other nodes' value on top
    one = depth_gains(tree, tree_value(tree, Calibration())[0])[0]
    assert policy.tree_curve(1) == pytest.approx([r + 0.8 - one[0] for r in one])
    assert policy.depth(ctx(1, 4)) >= 1 and policy.tree_now  # on a flat curve the tree (the chain and more) is chosen
    assert goodput(FLAT, prior=[0.1] * 4, tree_gain=per_depth([0.5] * 16)).tree_curve(2) == [0.5] * 16  # no lift needed


def test_goodput_grows_a_tree_only_as_deep_as_pays():
    """Each depth has its own curve; a level costs a drafter pass. Where deeper levels add little and a level is
    dear, the tree stops early (the depth it returns is what the drafter grows); where levels are cheap, it grows
    to the run's depth. Every EXPLORE_STEPS-th tree grows one level deeper than chosen."""
    shallow = [[0.9] * 16, [1.5] * 16, [1.55] * 16, [1.57] * 16]  # levels 3 and 4 add 0.05 and 0.02 tokens
    dear = goodput(FLAT, prior=[0.1] * 4, tree_gain=[list(c) for c in shallow], tree_draft_ms={1: 3.0})
    assert dear.depth(ctx(1, 4)) == 2 and dear.tree_now and dear.tree_depth == 2
    cheap = goodput(FLAT, prior=[0.1] * 4, tree_gain=[list(c) for c in shallow], tree_draft_ms={1: 0.01})
    assert cheap.depth(ctx(1, 4)) == 4 and cheap.tree_now
    dear.tree_steps = EXPLORE_STEPS - 1
    assert dear.depth(ctx(1, 4)) == 3 and dear.tree_now  # the exploring tree: one level deeper


def test_a_tree_teaches_the_curves_of_its_own_depths():
    """The first tree stands for every depth (its first levels are a deeper tree's); a later, shallower tree moves
    only the curves of the depths it has; a level's drafting time is the tree's time over the levels it drafted,
    not over the depth its cut kept (a 4-level tree cut to 3 levels priced a level 4/3 of its cost, so deep trees
    looked dear)."""
    policy = goodput(KNEE_32)
    deep = grown_tree(batch=1, budget=16)  # 4 levels
    policy.tree_size(deep)
    assert len(policy.tree_gain) == 4 and all(len(c) == 16 for c in policy.tree_gain)
    before = [list(c) for c in policy.tree_gain]
    shallow = deep.best(3, torch.where(deep.depths == 1, 0.0, -1.0))  # the three depth-1 nodes only
    assert shallow.depth == 1
    policy.tree_size(shallow)
    assert policy.tree_gain[1:] == before[1:] and policy.tree_gain[0] != before[0]
    policy.tree_size(deep)  # four levels drafted ...
    step = _step(3, [1], verify_ms=10.0, draft_ms=6.0)  # ... and the cut verified kept three
    step.tree_nodes = 8
    policy._after_plain = False
    policy.observe(step)
    assert policy.tree_draft(1, 1) == pytest.approx(1.5) and policy.tree_draft(1, 4) == pytest.approx(6.0)


def test_goodput_cuts_a_tree_where_the_pass_stops_being_free():
    policy = goodput(KNEE_32)
    tree = grown_tree(batch=1, budget=16)
    gain = tree_value(tree, Calibration())[1]
    draft = policy.tree_draft(1, tree.depth)
    rates = [(1 + g) / (KNEE_32.time_ms(n + 1) + draft) for n, g in enumerate(gain, start=1)]
    assert policy.tree_size(tree)[0] == 1 + max(range(16), key=rates.__getitem__) == 16  # flat to 32 tokens: keep all
    busy = goodput(KNEE_32)
    n, score = busy.tree_size(grown_tree(batch=8, budget=16))  # 8 rows x 17 tokens is past the knee
    assert score is None  # the cut keeps EAGLE-2's order (DraftTree.best's joint confidence)
    assert 1 <= n < 16 and busy.tree_gain is not None and [len(c) for c in busy.tree_gain] == [16] * 4


def test_goodput_refreshes_the_shape_it_has_not_drawn():
    policy = goodput(FLAT, accept=[0.9] * 4, tree_gain=per_depth([0.05] * 16), tree_draft_ms={1: 2.0})  # chains win clearly
    for _ in range(REFRESH_STEPS - 1):
        assert policy.depth(ctx(1, 4)) == 4 and not policy.tree_now
        policy.observe(_step(4, [4], verify_ms=10.0, draft_ms=1.0))
    policy.observe(_step(4, [4], verify_ms=10.0, draft_ms=1.0))
    assert policy.depth(ctx(1, 4)) == 4 and policy.tree_now  # REFRESH_STEPS chain steps: one tree to re-measure


def test_goodput_explores_a_chain_while_plain_wins_at_most_one_step_in_explore_steps():
    """Plain by its acceptance estimate, on a curve where a well-accepted chain would pay: after EXPLORE_STEPS plain
    steps one step drafts the best chain, so acceptance is measured at this batch; each exploration that leaves plain
    the choice doubles the wait. Where no acceptance could pay (a compute-bound curve) it never explores."""
    gentle = curve(lambda n: 10.0 + n / 4)  # at batch 16 a chain of 1 pays once a > 0.29
    policy = goodput(gentle, prior=[0.1] * 4)
    explored = []
    for i in range(200):
        k = policy.depth(ctx(16, 4))
        assert not policy.tree_now  # an exploration drafts a chain, never a tree
        if k:
            explored.append(i)
            policy.observe(_step(k, [0] * 16, verify_ms=gentle.time_ms(16 * (k + 1)), draft_ms=1.0))  # every draft rejected
        else:
            policy.observe(_step(0, [0] * 16, verify_ms=gentle.time_ms(16), draft_ms=0.0))
    assert explored == [16, 49, 114]  # after 16, 32, 64 plain steps in a row
    assert len(explored) <= 200 / EXPLORE_STEPS and policy.accept[0] < 0.1  # it measured this batch's acceptance
    hopeless = goodput(COMPUTE_BOUND)
    for _ in range(200):
        assert hopeless.depth(ctx(16, 4)) == 0
        hopeless.observe(_step(0, [0] * 16, verify_ms=16.0, draft_ms=0.0))
    free = goodput(FLAT)
    for _ in range(40):
        free.observe(_step(4, [4], verify_ms=10.0, draft_ms=1.0))
        assert free.depth(ctx(1, 4)) == 4 and free.explore_every == EXPLORE_STEPS  # speculating: nothing to explore


def test_goodput_explores_only_while_the_run_has_steps_left_to_use_what_it_measures():
    """The same plain steps in a row, on a curve where a well-accepted chain would pay: with RUNWAY new tokens left in
    the row the batch ends with, the exploring chain drafts; with one fewer it does not (its catch-up would be paid for
    steps that cannot use it), and the counter carries on, so the next step with runway explores. A caller that does
    not describe its rows explores as before."""
    gentle = curve(lambda n: 10.0 + n / 4)
    rows = tuple(range(16))

    def at(left: int) -> PolicyContext:
        return PolicyContext(step=2, batch=16, base_depth=4, mean_accepted=None, rows=rows, remaining=(left,) * 15 + (1,))

    for left, explores in ((RUNWAY, True), (RUNWAY - 1, False)):
        policy = goodput(gentle, prior=[0.1] * 4)
        for _ in range(EXPLORE_STEPS):
            assert policy.depth(at(left)) == 0
            policy.observe(_step(0, [0] * 16, verify_ms=gentle.time_ms(16), draft_ms=0.0))
        assert (policy.depth(at(left)) > 0) == explores
        if not explores:
            assert policy.plain_run == EXPLORE_STEPS and policy.depth(at(RUNWAY)) > 0


def test_goodput_rechecks_the_nodes_its_cut_leaves_out():
    """Every EXPLORE_STEPS-th tree step verifies twice the nodes the cut would keep (never more than were drafted)."""
    policy = goodput(KNEE_32)
    tree = grown_tree(batch=8, budget=16)
    sizes = [policy.tree_size(tree)[0] for _ in range(2 * EXPLORE_STEPS)]
    cut = sizes[0]
    assert cut < 16 and sizes.count(cut) == 2 * EXPLORE_STEPS - 2
    assert sizes[EXPLORE_STEPS - 1] == sizes[-1] == min(16, 2 * cut)


# --- warm start: what goodput learnt carries to the next run ---------------------------------------
def test_warm_start_store_is_keyed_bounded_copied_and_thread_safe():
    key = ("t", 1)
    learner = goodput(FLAT, memory_key=key)
    for _ in range(REMEMBER_STEPS + 2):
        learner.observe(_step(4, [1], verify_ms=20.0, draft_ms=2.0))
    assert warmstart.recall(key)["chain_steps"] == REMEMBER_STEPS  # written every REMEMBER_STEPS steps, not each
    last = _step(4, [1], verify_ms=20.0, draft_ms=2.0)
    last.seqs[0].finished = True
    learner.observe(last)  # ... and on the run's last step
    warm = goodput(FLAT, memory_key=key)
    assert_warm_from(warm, learner.learnt())  # the machine's part whole, the text's from the prior
    assert warm.verify_ms(5) == pytest.approx(20.0) and warm.draft_ms == learner.draft_ms and learner.accept[0] > 0.9
    assert warm.accept == [PRIOR_ACCEPTANCE] * 4 and any(learner.calibration.accepted)  # learnt, not carried to new text
    warm.accept[0] = 0.0  # a copy: the store and the first policy are untouched
    assert warmstart.recall(key)["accept"][0] > 0.9 and learner.accept[0] > 0.9
    assert goodput(FLAT, memory_key=("other",)).accept == [PRIOR_ACCEPTANCE] * 4  # another key: the priors
    assert goodput(FLAT).learnt()["accept"] == [PRIOR_ACCEPTANCE] * 4  # no key: the priors, and nothing is stored

    errors = []

    def hammer(worker: int):
        for i in range(300):
            warmstart.remember(("w", worker, i % 50), {"i": i})
            got = warmstart.recall(("w", worker, i % 50))
            if got is not None and got["i"] != i:
                errors.append((worker, i, got))  # only this thread writes its keys: it reads back its own value

    threads = [threading.Thread(target=hammer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert warmstart.size() == warmstart.MAX_ENTRIES and key not in warmstart._store  # the least recently used went
    assert warmstart.recall(key) == learner.learnt()  # ... from memory: its run's last step left it on disk
    warmstart.forget()
    assert warmstart.size() == 0 and goodput(FLAT, memory_key=("w", 0, 49)).accept == [PRIOR_ACCEPTANCE] * 4


def test_a_second_run_starts_from_what_the_first_learnt_and_stays_lossless(tiny, monkeypatch):
    """Two runs in one process (the tiny pair, the draft model, priced on a fixed curve rather than one measured
    here): the second policy is built holding the first's learnt state, and both outputs equal plain decoding."""
    monkeypatch.setattr(passcurve, "pass_curve", lambda pair: KNEE_8)
    cfg = DecodeConfig(depth=3, drafter="model", policy="goodput", max_new_tokens=16, tree_nodes=8, tree_topk=2)
    first = generate(tiny, PROMPTS[:2], cfg)
    key = warmstart.policy_key(tiny, cfg, passcurve.pass_curve(tiny), 2)
    learnt = warmstart.recall(key)
    assert learnt is not None and learnt["verify_ratio"] and learnt != goodput(FLAT).learnt()
    assert warmstart.policy_key(tiny, DecodeConfig.from_dict(cfg.to_dict() | {"tree_nodes": 10}), passcurve.pass_curve(tiny), 2) != key
    stream = generate_steps(tiny, PROMPTS[:2], cfg)
    for step in stream:
        if step.kind == "prefill":  # built, nothing observed yet: it holds the first run's state
            assert_warm_from(stream.decoder.policy, learnt)
    assert first.output_ids == stream.trace.output_ids == plain_ids(tiny, PROMPTS[:2], 16)


# --- the tree's pricing against a recorded run ------------------------------------------------------
def test_pricing_check_sets_predicted_against_measured_accepted_nodes(embedded_f32):
    """A fixed 16-node tree run (the shipped EAGLE head, batch 1): for each cut size the calibrated prediction of
    accepted nodes is what tree_value gives, the measurement the accepted path's nodes inside the cut; both grow
    with n, and the model is within a factor of two of the measurement (it is a calibration, not a fit)."""
    pair = _eagle_pair(embedded_f32)
    trace = generate(pair, PROMPTS[:1], DecodeConfig(depth=4, drafter="eagle", max_new_tokens=16, tree_nodes=16, tree_topk=4))
    checked = pricing_check(trace.steps, sizes=(1, 4, 16))
    trees = [q.tree for s in trace.steps if s.tree_nodes for q in s.seqs]
    full = [t for t in trees if len(t.ids) >= 16]  # near the end a fixed tree is drafted shallower
    assert checked[1][2] == len(trees) and checked[16][2] == len(full) > 0
    assert checked[16][1] == pytest.approx(statistics.mean(len(t.path()) for t in full))
    predicted, measured = [v[0] for v in checked.values()], [v[1] for v in checked.values()]
    assert predicted == sorted(predicted) and measured == sorted(measured) and measured[-1] > 0.5
    assert 0.5 < predicted[-1] / measured[-1] < 2.0
    own = pricing_check(trace.steps, sizes=None)  # each row at the size it was verified: the full 16 here
    assert own[16] == pytest.approx(checked[16]) and sum(v[2] for v in own.values()) == len(trees)


# --- whole runs: lossless while the shape changes -------------------------------------------------
# The embedded target with the shipped EAGLE head (the pair whose head drafts real trees), float32, 12 tokens:
# long enough for every shape to run several times. Plain outputs are decoded once per prompt set.
TOKENS = 12
_plain: dict[tuple, list] = {}


def plain_ids(pair, prompts, tokens: int = TOKENS) -> list:
    key = (id(pair), tuple(prompts), tokens)
    if key not in _plain:
        _plain[key] = generate(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=tokens)).output_ids
    return _plain[key]


def test_goodput_tree_equals_plain_decoding(embedded_f32):
    """The machine's own measured curve prices the shapes: whatever it picks, greedy output equals plain."""
    pair = _eagle_pair(embedded_f32)
    cfg = DecodeConfig(depth=4, drafter="eagle", policy="goodput", max_new_tokens=8, tree_nodes=16, tree_topk=4)
    trace = _checked_run(pair, PROMPTS[:1], cfg)
    assert trace.output_ids == plain_ids(pair, PROMPTS[:1], 8)
    decode = [s for s in trace.steps if s.kind == "decode"]
    trees = [s for s in decode if s.tree_nodes is not None]
    assert trees and all(1 <= s.tree_nodes <= 16 and s.tokens_per_pass == s.batch * (s.tree_nodes + 1) for s in trees)
    assert all(len(q.tree.ids) == s.tree_nodes for s in trees for q in s.seqs)


def shape_switching(monkeypatch):
    """Make every run's goodput switch shape every other step: a pass-cost curve flat to 8 tokens (rather than
    this machine's), and the refresh after 2 steps. The decoding itself is the real one."""
    monkeypatch.setattr(passcurve, "pass_curve", lambda pair: KNEE_8)
    monkeypatch.setattr(goodput_policy, "REFRESH_STEPS", 2)


def shapes(trace) -> set[str]:
    return {"plain" if s.depth == 0 else "chain" if s.tree_nodes is None else "tree" for s in trace.steps if s.kind == "decode"}


@pytest.mark.parametrize("prompts", [PROMPTS[:1], PROMPTS[1:]], ids=["batch1", "ragged2"])  # ragged: a long prompt and "Hi"
def test_eagle_switching_between_chains_and_cut_trees_is_lossless(embedded_f32, monkeypatch, prompts):
    pair = _eagle_pair(embedded_f32)
    shape_switching(monkeypatch)
    cfg = DecodeConfig(depth=4, drafter="eagle", policy="goodput", max_new_tokens=TOKENS, tree_nodes=12, tree_topk=4)
    trace = _checked_run(pair, prompts, cfg)
    assert trace.output_ids == plain_ids(pair, prompts)
    assert {"chain", "tree"} <= shapes(trace)
    assert any(s.tree_nodes < 12 for s in trace.steps if s.tree_nodes)  # 8 tokens per pass are free: trees are cut
    if len(prompts) > 1:  # rows accepted different counts in one step: the batch really was ragged
        assert any(len({q.num_accepted for q in s.seqs}) > 1 for s in trace.steps if s.kind == "decode" and s.batch > 1)


def test_draft_model_switching_shapes_keeps_its_cache(embedded_f32, monkeypatch):
    """The distilled draft re-feeds each row's own ragged count after a tree, then drafts a chain or a tree."""
    if "draft" not in embedded_f32.loaded:
        pytest.skip("no draft model in this pair")
    shape_switching(monkeypatch)
    cfg = DecodeConfig(depth=3, drafter="model", policy="goodput", max_new_tokens=TOKENS, tree_nodes=10, tree_topk=3)
    stream = generate_steps(embedded_f32, PROMPTS[1:], cfg)  # a long prompt and "Hi": ragged rows
    for _ in stream:
        if stream.active:
            draft = stream.drafter
            lengths = torch.tensor([len(s.tokens) for s in stream.active])
            behind = draft.lags if draft.lags is not None else draft.lag
            assert torch.equal(draft.cache.lengths + behind, lengths)
            assert torch.equal(stream.target_cache.lengths + 1, lengths)
    assert {"chain", "tree"} <= shapes(stream.trace)
    assert stream.trace.output_ids == plain_ids(embedded_f32, PROMPTS[1:])


def test_eagle_goodput_tree_sampling_keeps_the_caches(embedded_f32, monkeypatch):
    """Sampling while the shape changes keeps both caches exact. (Not seed-reproducible: the shapes follow
    measured times, and each shape draws its own random numbers; the distribution test below holds the maths.)"""
    pair = _eagle_pair(embedded_f32)
    shape_switching(monkeypatch)
    cfg = DecodeConfig(
        depth=3, drafter="eagle", policy="goodput", max_new_tokens=TOKENS, tree_nodes=12, tree_topk=3, temperature=0.8, seed=5
    )
    first = _checked_run(pair, PROMPTS[:2], cfg)
    assert first.summary["accepted_tokens"] > 0 and {"chain", "tree"} <= shapes(first)


def test_sampling_through_a_cut_tree_follows_the_target():
    """Recursive rejection sampling over the cut tree (root -> a, b, c; a -> d): the first two emitted tokens
    follow p(x1) p(x2 | x1) (chi-square over all 36 pairs, 60k trials)."""
    trials, vocab = 60000, 6
    gen = torch.Generator().manual_seed(11)
    tree = toy_tree(trials).best(4)
    assert tree.parents[0].tolist() == [-1, -1, -1, 0] and tree.tokens[0].tolist() == [0, 1, 2, 3]
    p_root = torch.tensor([0.30, 0.10, 0.25, 0.05, 0.20, 0.10])
    p_next = torch.softmax(torch.randn(vocab, vocab, generator=gen) * 1.5, dim=-1)
    columns = [p_root, p_next[0], p_next[1], p_next[2], p_next[3]]  # p after root, a, b, c, d
    num_accepted, next_ids, path = accept_tree_sampling(tree, torch.stack(columns).expand(trials, 5, vocab), gen)
    token_at = torch.cat([torch.zeros(trials, 1, dtype=torch.long), tree.tokens], 1)
    first = torch.where(num_accepted >= 1, token_at.gather(1, path[:, 1:2]).squeeze(1), next_ids)
    second_tree = torch.where(num_accepted >= 2, token_at.gather(1, path[:, 2:3]).squeeze(1), next_ids)
    second_plain = torch.multinomial(p_next[first], 1, generator=gen).squeeze(1)
    second = torch.where(num_accepted >= 1, second_tree, second_plain)
    assert chi2_pvalue(first * vocab + second, (p_root[:, None] * p_next).flatten()) > 1e-3
    assert 0 < (num_accepted >= 2).float().mean() < 1


# --- the trace and the CLI ------------------------------------------------------------------------
def test_cli_goodput_tree_run_writes_each_steps_shape(embedded_f32, monkeypatch, tmp_path, capsys):
    """`python -m engine run --policy goodput --tree-nodes 32 --tree-topk 4` is accepted; its trace holds each tree
    step's size (chain steps hold none) and reads back; the strict loader refuses a size that does not fit."""
    from engine.__main__ import main

    _eagle_pair(embedded_f32)
    shape_switching(monkeypatch)
    out = tmp_path / "t.json"
    args = ["run", "--prompt", PROMPTS[0], "--prompt", "Hi", "--drafter", "eagle", "--policy", "goodput", "--tree-nodes", "32"]
    assert main(args + ["--tree-topk", "4", "--max-new-tokens", "12", "--dtype", "float32", "--json", str(out)]) == 0
    assert "summary" in capsys.readouterr().out
    raw = json.loads(out.read_text())
    assert raw["schema"] == "speclab.trace/2"
    decode = [s for s in raw["steps"] if s["kind"] == "decode"]
    assert any("tree_nodes" in s for s in decode) and any("tree_nodes" not in s and s["depth"] > 0 for s in decode)
    back = Trace.from_json(out)
    assert [s.tree_nodes for s in back.steps] == [s.get("tree_nodes") for s in raw["steps"]]

    def refused(mutate) -> str:
        data = json.loads(json.dumps(raw))
        mutate(next(s for s in data["steps"] if "tree_nodes" in s), data)
        with pytest.raises(TraceError) as info:
            Trace.from_dict(data)
        return str(info.value)

    assert ".tokens_per_pass must be batch x (tree_nodes + 1)" in refused(lambda s, d: s.update(tokens_per_pass=s["tokens_per_pass"] + 1))
    assert ".tree_nodes must be between 1 and 64" in refused(lambda s, d: s.update(tree_nodes=0, tokens_per_pass=s["batch"]))
    assert "unknown field 'tree_nodes'" in refused(lambda s, d: d.update(schema="speclab.trace/1"))
    bigger = lambda s, d: s.update(tree_nodes=s["tree_nodes"] + 1, tokens_per_pass=s["batch"] * (s["tree_nodes"] + 2))  # noqa: E731
    assert ".tree.ids must hold the step's tree_nodes" in refused(bigger)
