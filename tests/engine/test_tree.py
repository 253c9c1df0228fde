"""Tree drafting (engine/decoding/verify_tree.py, engine/drafters/tree.py): EAGLE-2's tree is a tree of the best candidates,
tree acceptance is lossless (float32 greedy == plain decoding at batch 1 and ragged, with the real embedded
target and the shipped EAGLE head; tree sampling follows the target's distribution, chi-square), the
caches hold exactly the accepted sequence after every step, the trace records each tree (schema /2)."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import chi2_pvalue

from engine import ConfigError, DecodeConfig, Trace, TraceError, generate, generate_steps
from engine.decoding.verify_tree import accept_tree_greedy, accept_tree_sampling, verify_tree
from engine.drafters.tree import DraftTree, TreeBuilder
from engine.sampling import greedy_ids

PROMPTS = ["Explain how a rainbow forms in simple terms.", "Write a short story about a robot who learns to paint.", "Hi"]


def toy_tree(batch: int = 1) -> DraftTree:
    """root -> a(0) b(1) c(2); a -> d(3) e(4); b -> f(5); d -> g(6). Tokens are the node letters' ids."""
    parents = torch.tensor([-1, -1, -1, 0, 0, 1, 3]).expand(batch, 7)
    depths = torch.tensor([1, 1, 1, 2, 2, 2, 3]).expand(batch, 7)
    tokens = torch.tensor([0, 1, 2, 3, 4, 0, 5]).expand(batch, 7)
    return DraftTree(tokens=tokens, parents=parents, depths=depths, q=torch.full((batch, 7), 0.5), topk=3)


# --- the tree's shape ---------------------------------------------------------------------------
def test_tree_attention_sees_exactly_the_ancestors():
    seen = toy_tree().attention()[0]  # (8, 8) over [root, a..g]
    ancestors = {0: {0}, 1: {0, 1}, 2: {0, 2}, 3: {0, 3}, 4: {0, 1, 4}, 5: {0, 1, 5}, 6: {0, 2, 6}, 7: {0, 1, 4, 7}}
    for col, expected in ancestors.items():
        assert set(torch.nonzero(seen[col]).flatten().tolist()) == expected
    assert toy_tree().offsets[0].tolist() == [0, 1, 1, 1, 2, 2, 2, 3]
    assert toy_tree().children()[0, 1].tolist() == [4, 5, -1]  # a's children d, e (columns), best first


def test_builder_keeps_the_best_candidates_as_a_tree():
    """Reranking keeps the N highest joint scores among every candidate, and their ancestors are kept too."""
    gen = torch.Generator().manual_seed(0)
    batch, vocab, k, depth, budget = 3, 12, 3, 4, 10
    builder = TreeBuilder(k, budget, 0.0, None)
    frontier = builder.root(torch.randn(batch, vocab, generator=gen) * 3)
    for _ in range(depth - 1):
        frontier = builder.grow(frontier, torch.randn(batch, k, vocab, generator=gen) * 3)
    tree = builder.tree()
    scores = torch.cat(builder.scores, 1)  # (B, M): every candidate's joint log confidence
    assert tree.nodes == budget and tree.depth <= depth
    for r in range(batch):
        parents, depths = tree.parents[r].tolist(), tree.depths[r].tolist()
        for i, parent in enumerate(parents):
            assert parent < i and depths[i] == (1 if parent < 0 else depths[parent] + 1)
        # the kept joint confidences are the top-N of all candidates
        log_q = tree.q[r].log().tolist()
        path_scores = []  # a node's joint score: the sum of log q from the root down to it
        for i in range(budget):
            total, j = 0.0, i
            while j >= 0:
                total, j = total + log_q[j], parents[j]
            path_scores.append(total)
        best = scores[r].sort(descending=True).values[:budget]
        assert torch.allclose(torch.tensor(sorted(path_scores, reverse=True)), best, atol=1e-4)


# --- acceptance ---------------------------------------------------------------------------------
def test_greedy_tree_acceptance_takes_the_longest_matching_path():
    tree = toy_tree(2)
    logits = torch.full((2, 8, 8), -10.0)
    # row 0: root -> a, a -> e? no: a -> d, d -> g, after g -> 7 (bonus after a leaf)
    for col, tok in enumerate([0, 3, 6, 6, 5, 6, 6, 7]):
        logits[0, col, tok] = 10.0
    # row 1: root -> b, b -> 6 (b's child f is token 0: rejected; correction 6)
    for col, tok in enumerate([1, 6, 6, 6, 6, 6, 6, 6]):
        logits[1, col, tok] = 10.0
    num_accepted, next_ids, path = accept_tree_greedy(tree, logits)
    assert num_accepted.tolist() == [3, 1] and next_ids.tolist() == [7, 6]
    assert path.tolist() == [[0, 1, 4, 7], [0, 2, 0, 0]]


def _walk(parents: list[int], tokens: list[int], target: list[int]) -> tuple[int, int, list[int]]:
    """Greedy acceptance by hand: from the root, step to the child whose token is the target's argmax."""
    col, path = 0, [0]
    while True:
        child = next((i + 1 for i, p in enumerate(parents) if p + 1 == col and tokens[i] == target[col]), None)
        if child is None:
            return len(path) - 1, target[col], path
        col = child
        path.append(col)


def test_greedy_tree_acceptance_equals_walking_the_tree_by_hand():
    """Random EAGLE-2 trees (3 rows, 16 nodes, depth 5) and target argmaxes planted along random paths: the
    vectorised acceptance (each node's lineage from the tree attention) takes the path a walk from the root takes."""
    gen = torch.Generator().manual_seed(11)
    for trial in range(40):
        builder = TreeBuilder(3, 16, 0.0, None)
        frontier = builder.root(torch.randn(3, 9, generator=gen) * 3)
        for _ in range(4):
            frontier = builder.grow(frontier, torch.randn(3, 3, 9, generator=gen) * 3)
        tree = builder.tree()
        target = torch.randint(0, 9, (3, tree.nodes + 1), generator=gen)
        for r in range(3):  # plant a random path's tokens as the target's argmax after each of its nodes
            col = 0
            while True:
                kids = [i for i, p in enumerate(tree.parents[r].tolist()) if p + 1 == col]
                if not kids or torch.rand(1, generator=gen).item() < 0.2:
                    break
                pick = kids[int(torch.randint(len(kids), (1,), generator=gen))]
                target[r, col] = tree.tokens[r, pick]
                col = pick + 1
        logits = torch.nn.functional.one_hot(target, 9).float()
        num_accepted, next_ids, path = accept_tree_greedy(tree, logits)
        for r in range(3):
            a, nxt, walked = _walk(tree.parents[r].tolist(), tree.tokens[r].tolist(), target[r].tolist())
            assert (num_accepted[r].item(), next_ids[r].item()) == (a, nxt), trial
            assert path[r].tolist() == walked + [0] * (tree.depth + 1 - len(walked)), trial


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_greedy_ids_is_argmax_ties_included(dtype):
    """`greedy_ids` (max(dim).indices, faster than bf16 argmax here) picks argmax's token, the first on ties."""
    gen = torch.Generator().manual_seed(1)
    logits = torch.randint(0, 3, (4, 9, 257), generator=gen).to(dtype)  # many ties
    assert torch.equal(greedy_ids(logits), logits.argmax(-1))
    assert torch.equal(greedy_ids(logits[:, 2]), logits[:, 2].argmax(-1))


def test_greedy_tree_p_chosen_equals_the_full_softmax():
    """Tree verification normalises only the columns it reads; each p must still be the softmax's."""
    gen = torch.Generator().manual_seed(2)
    tree = toy_tree(3)
    logits = torch.randn(3, 8, 8, generator=gen) * 3
    num_accepted, next_ids, p_chosen, path = verify_tree(logits, tree, True, 0.0, 1.0, None)
    probs = torch.softmax(logits, dim=-1)
    rows = torch.arange(3)[:, None]
    cols = torch.cat([tree.parent_columns, path.gather(1, num_accepted[:, None])], dim=1)
    tokens = torch.cat([tree.tokens, next_ids[:, None]], dim=1)
    assert torch.allclose(p_chosen, probs[rows, cols, tokens], atol=1e-6)


def test_tree_sampling_reproduces_the_target_distribution():
    """Recursive rejection sampling over children: the first two emitted tokens follow p(x1) p(x2 | x1)
    exactly (chi-square over all 36 pairs, 60k trials), with a tree that both agrees and disagrees with p."""
    trials, vocab = 60000, 6
    gen = torch.Generator().manual_seed(7)
    p_root = torch.tensor([0.35, 0.05, 0.25, 0.05, 0.20, 0.10])
    p_next = torch.softmax(torch.randn(vocab, vocab, generator=gen) * 1.5, dim=-1)  # p(x2 | x1), any x1
    tree = toy_tree(trials)
    tokens = [0, 1, 2, 3, 4, 0, 5]
    # p at each verify column: the root's, then after each node's path (depth-1 nodes: p_next[token];
    # deeper columns' p only decides acceptance past the second token, any distribution will do)
    columns = [p_root] + [p_next[t] for t in tokens[:3]] + [p_next[3], p_next[4], p_next[0], p_next[5]]
    target_probs = torch.stack(columns).expand(trials, 8, vocab)
    num_accepted, next_ids, path = accept_tree_sampling(tree, target_probs, gen)
    token_at = torch.cat([torch.zeros(trials, 1, dtype=torch.long), tree.tokens], 1)  # by verify column
    first = torch.where(num_accepted >= 1, token_at.gather(1, path[:, 1:2]).squeeze(1), next_ids)
    second_tree = torch.where(num_accepted >= 2, token_at.gather(1, path[:, 2:3]).squeeze(1), next_ids)
    # rows that emitted one token continue from plain sampling of p(. | x1), as the next step would
    second_plain = torch.multinomial(p_next[first], 1, generator=gen).squeeze(1)
    second = torch.where(num_accepted >= 1, second_tree, second_plain)
    joint = p_root[:, None] * p_next  # (V, V)
    assert chi2_pvalue(first * vocab + second, joint.flatten()) > 1e-3
    assert chi2_pvalue(first, p_root) > 1e-3
    assert 0 < (num_accepted >= 2).float().mean() < 1  # the walk really goes past depth 1 and stops too


# --- whole runs with the real target and the shipped head (float32) -----------------------------
def _eagle_pair(embedded_f32):
    if "eagle" not in embedded_f32.loaded:
        pytest.skip("no shipped EAGLE head in assets/eagle")
    return embedded_f32


def _checked_run(pair, prompts, cfg):
    """Run, checking after every step that both caches hold exactly each row's sequence."""
    stream = generate_steps(pair, prompts, cfg)
    steps = 0
    for _ in stream:
        if not stream.active:
            continue
        target, drafter = stream.target_cache, stream.drafter
        lengths = torch.tensor([len(s.tokens) for s in stream.active])
        assert torch.equal(target.lengths + 1, lengths)  # all but the pending last token
        assert torch.equal(target.valid.sum(1), target.lengths)  # no stray tree column survives
        if getattr(target, "kv", None) is not None:  # static buffers (the fast pass): the live columns fit
            assert target.width == target.valid.shape[1] <= target.kv.capacity
        else:
            assert target.cache.layers[0].keys.shape[2] == target.width == target.valid.shape[1]
        assert torch.equal(drafter.entries(), target.lengths)
        assert torch.equal(drafter.cache.valid.sum(1), drafter.cache.lengths)  # the prompts were read in at prefill
        steps += 1
    assert steps > 2
    return stream.trace


@pytest.mark.parametrize(
    "prompts, depth, nodes, topk",
    [
        (PROMPTS[:1], 4, 16, 4),  # batch 1
        (PROMPTS, 5, 24, 4),  # ragged batch: rows accept different path lengths
    ],
)
def test_greedy_tree_equals_plain_decoding(embedded_f32, prompts, depth, nodes, topk):
    pair = _eagle_pair(embedded_f32)
    plain = generate(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=20))
    cfg = DecodeConfig(depth=depth, drafter="eagle", max_new_tokens=20, tree_nodes=nodes, tree_topk=topk)
    tree = _checked_run(pair, prompts, cfg)
    assert tree.output_ids == plain.output_ids
    assert tree.summary["target_forwards"] < plain.summary["target_forwards"]
    decode = [s for s in tree.steps if s.kind == "decode"]
    assert all(s.tokens_per_pass == s.batch * (nodes + 1) for s in decode if s.depth == depth)
    full = [q for s in decode if s.depth == depth for q in s.seqs]  # near the end the policy drafts shallower
    assert full and all(len(q.tree.ids) == nodes for q in full)
    rows = [q for s in decode if s.depth > 0 for q in s.seqs]
    path_tokens = [[q.tree.ids[i] for i in q.tree.path()] for q in rows]
    assert all(q.emitted[: q.num_accepted] == path[: len(q.emitted)] for q, path in zip(rows, path_tokens))
    assert tree.summary["drafted_tokens"] == sum(len(q.tree.ids) for q in rows)
    assert tree.summary["flops_wasted"] > 0


def test_tree_sampling_run_is_seeded_and_keeps_the_caches(embedded_f32):
    pair = _eagle_pair(embedded_f32)
    cfg = DecodeConfig(depth=3, drafter="eagle", max_new_tokens=16, tree_nodes=8, tree_topk=3, temperature=0.8, top_p=0.95, seed=5)
    first = _checked_run(pair, PROMPTS[:2], cfg)
    again = generate(pair, PROMPTS[:2], cfg)
    assert first.output_ids == again.output_ids
    assert first.summary["accepted_tokens"] > 0


def test_tree_trace_round_trips_as_schema_2(embedded_f32, tmp_path):
    pair = _eagle_pair(embedded_f32)
    trace = generate(pair, PROMPTS[:2], DecodeConfig(depth=3, drafter="eagle", max_new_tokens=8, tree_nodes=6, tree_topk=2))
    trace.to_json(tmp_path / "t.json")
    raw = json.loads((tmp_path / "t.json").read_text())
    assert raw["schema"] == "speclab.trace/2"
    back = Trace.from_json(tmp_path / "t.json")
    assert [q.tree for s in back.steps for q in s.seqs] == [q.tree for s in trace.steps for q in s.seqs]
    assert back.summary == trace.summary
    # a chain trace is still written (and read) as /1, with no tree field
    chain = generate(pair, PROMPTS[:1], DecodeConfig(depth=2, drafter="eagle", max_new_tokens=4))
    assert chain.to_dict()["schema"] == "speclab.trace/1"
    assert all("tree" not in q for s in chain.to_dict()["steps"] for q in s["seqs"])

    # refusals: a tree in a /1 trace, an accepted set that is not one path, a parent after its child, a bad q
    def refused(mutate) -> str:
        data = json.loads(json.dumps(raw))
        row = next(q for s in data["steps"] for q in s["seqs"] if q.get("tree"))
        mutate(data, row["tree"])
        with pytest.raises(TraceError) as info:
            Trace.from_dict(data)
        return str(info.value)

    def as_schema_1(data, tree):  # (a /1 trace refuses the steps' tree_nodes too: drop those, leave the rows' trees)
        data.update(schema="speclab.trace/1")
        for step in data["steps"]:
            step.pop("tree_nodes", None)

    assert "unknown field 'tree'" in refused(as_schema_1)
    assert ".tree.accepted" in refused(lambda data, tree: tree.update(accepted=[True] * len(tree["accepted"])))
    assert ".tree.parents[0]" in refused(lambda data, tree: tree["parents"].__setitem__(0, 3))
    assert ".tree.q[0]" in refused(lambda data, tree: tree["q"].__setitem__(0, 2.0))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_draft_model_trees_are_lossless_and_keep_the_caches(tiny, temperature):
    """The distilled-draft path of tree drafting on the tiny pair (float32): greedy output == plain, every
    step's caches exact (the draft's rows re-feed their own ragged counts after a tree step)."""
    prompts = ["Tell me about the sea.", "Why is the sky blue? Explain briefly please.", "Count: one two three"]
    cfg = DecodeConfig(depth=3, drafter="model", max_new_tokens=16, tree_nodes=10, tree_topk=3, temperature=temperature)
    stream = generate_steps(tiny, prompts, cfg)
    for _ in stream:
        if stream.active:
            target, draft = stream.target_cache, stream.drafter
            lengths = torch.tensor([len(s.tokens) for s in stream.active])
            assert torch.equal(target.lengths + 1, lengths) and torch.equal(target.valid.sum(1), target.lengths)
            behind = draft.lags if draft.lags is not None else draft.lag
            assert torch.equal(draft.cache.lengths + behind, lengths)
    trees = [q.tree for s in stream.trace.steps for q in s.seqs if q.tree is not None]
    assert trees
    if temperature == 0:  # (sampling the tiny random models' near-flat 49k-token distributions accepts ~nothing)
        assert stream.trace.summary["accepted_tokens"] > 0
        plain = generate(tiny, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=16))
        assert stream.trace.output_ids == plain.output_ids


# --- options ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tree_nodes": 8}, "tree_nodes and tree_topk go together"),
        ({"tree_nodes": 65, "tree_topk": 4}, "tree_nodes must be between 0"),
        ({"tree_nodes": 8, "tree_topk": 9}, "tree_topk must be between 0"),
        ({"tree_nodes": 8, "tree_topk": 2, "drafter": "ngram"}, "not 'ngram'"),
        ({"tree_nodes": 30, "tree_topk": 2, "depth": 3}, "more than depth 3 with top-2 can draft"),
        ({"tree_nodes": 8, "tree_topk": 2, "confidence_threshold": 0.3}, "use confidence_threshold 0"),
        ({"tree_nodes": True, "tree_topk": 2}, "tree_nodes must be an integer"),
    ],
)
def test_bad_tree_options_are_one_line_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message) as info:
        DecodeConfig(**({"drafter": "eagle", "depth": 4} | kwargs))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "paths, keeps",
    [
        ([[0, 1, 3]], [[1, 1, 1]]),
        ([[0, 1, 2]], [[1, 1, 1]]),
        ([[0]], [[1]]),
        ([[0, 2, 5], [0, 1, 0]], [[1, 1, 1], [1, 1, 0]]),
        ([[0, 1, 2], [0, 1, 2]], [[1, 1, 1], [1, 1, 1]]),
    ],
)
def test_keep_path_packs_exactly_the_path(tiny, paths, keeps):
    """RaggedCache.keep_path keeps each row's path columns, packed after its cache (it skips slots already
    in place): the result equals a gather of the kept columns."""
    from engine.model.kvcache import RaggedCache

    batch, n_new = len(paths), 6
    cache = RaggedCache(tiny.target, torch.device("cpu"), tiny.target_costs)
    cache.prefill([[5, 6, 7, 8]] * batch, 0)
    ids = torch.arange(10, 10 + n_new).expand(batch, n_new)
    attend = torch.ones(batch, n_new, cache.width + n_new, dtype=torch.bool)
    cache.forward_tree(ids, cache.lengths[:, None] + torch.arange(n_new), attend)
    before = [(layer.keys.clone(), layer.values.clone()) for layer in cache.cache.layers]
    path = torch.tensor(paths)
    keep = torch.tensor(keeps, dtype=torch.bool)
    cache.keep_path(path, keep, n_new)
    base = 4
    for (k0, v0), layer in zip(before, cache.cache.layers):
        assert layer.keys.shape[2] == base + path.shape[1]
        assert torch.equal(layer.keys[:, :, :base], k0[:, :, :base])
        for r in range(batch):
            for j, col in enumerate(paths[r]):
                if keep[r, j]:
                    assert torch.equal(layer.keys[r, :, base + j], k0[r, :, base + col])
                    assert torch.equal(layer.values[r, :, base + j], v0[r, :, base + col])
    assert cache.lengths.tolist() == (base + keep.long().sum(1)).tolist()
