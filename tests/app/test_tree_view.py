"""The draft-tree view (app/views/tree.py) and the Sweep's tree columns, as pure functions on hand-built steps."""

from __future__ import annotations

from app.views import sweep
from app.views import tree as tree_view
from engine.trace.records import DraftToken, SeqStep, Step, TreeRecord


def _tree_row(seq: int = 0) -> SeqStep:
    """root -> "The"(0, accepted) " A"(1); "The" -> " cat"(2, accepted) " <b>dog</b>"(3); " cat" -> " sat"(4).
    The target rejected " sat" and corrected to " ran"."""
    tree = TreeRecord(
        parents=[-1, -1, 0, 0, 2],
        ids=[10, 11, 12, 13, 14],
        texts=["The", " A", " cat", " <b>dog</b>", " sat"],
        q=[0.6, 0.3, 0.5, 0.4, 0.9],
        p=[0.7, 0.2, 0.6, 0.1, 0.05],
        accepted=[True, False, True, False, False],
    )
    drafted = [
        DraftToken(id=tree.ids[i], text=tree.texts[i], draft_prob=tree.q[i], target_prob=tree.p[i], accepted=tree.accepted[i])
        for i in tree.shown()
    ]
    return SeqStep(
        seq=seq,
        drafted=drafted,
        num_accepted=2,
        next_id=15,
        next_text=" ran",
        next_prob=0.4,
        next_kind="correction",
        emitted=[10, 12, 15],
        finished=False,
        tree=tree,
    )


def _step(seqs) -> Step:
    return Step(
        index=1,
        kind="decode",
        depth=3,
        batch=len(seqs),
        tokens_per_pass=len(seqs) * 6,
        t_start_s=0.1,
        t_end_s=0.2,
        draft_ms=5.0,
        verify_ms=20.0,
        overhead_ms=1.0,
        target_flops=1e9,
        draft_flops=1e8,
        target_bytes=1e8,
        draft_bytes=1e7,
        flops_wasted=5e8,
        seqs=seqs,
    )


def test_tree_record_shows_its_path_and_best_rejected_child():
    row = _tree_row()
    assert row.tree.path() == [0, 2] and row.tree.shown() == [0, 2, 4] and row.tree.depth == 3
    assert [t.accepted for t in row.drafted] == [True, True, False]


def test_tree_html_marks_the_accepted_path_and_the_target_token():
    items = tree_view.tree_steps([_step([_tree_row(0), _tree_row(1)])], seq=1)
    assert len(items) == 1 and items[0].seq == 1 and items[0].num_accepted == 2
    page = tree_view.tree_html(items[0], greedy=True)
    assert page.count('data-kind="accepted"') == 2 and page.count('data-kind="rejected"') == 3
    assert page.count('data-kind="correction"') == 1 and "↺" in page
    assert "<b>dog</b>" not in page and "&lt;b&gt;dog&lt;/b&gt;" in page  # token text is escaped
    # the correction hangs under " cat", the path's end: after " cat"'s span, before its child " sat"
    assert page.index("cat") < page.index("ran") < page.index("sat")
    assert "joint confidence 0.300" in page  # q("The") x q(" cat") = 0.6 x 0.5
    assert "5 nodes, 3 deep, 2 first tokens; the target accepted 2 and added a correction" in page
    totals = tree_view.tree_totals([_step([_tree_row()])])
    assert totals == {"row_steps": 1, "mean_nodes": 5.0, "mean_accepted": 2.0, "mean_depth": 3.0}
    assert tree_view.tree_totals([]) is None


def _row(batch, depth, tps, nodes=0, topk=0, tokens_per_step=2.0):
    return {
        "batch": batch,
        "depth": depth,
        "policy": "fixed",
        "tree_nodes": nodes,
        "tree_topk": topk,
        "tokens_per_pass": batch * ((nodes or depth) + 1),
        "ar_tokens_per_s": 30.0,
        "spec_tokens_per_s": tps,
        "speedup": tps / 30.0,
        "alpha": 0.6,
        "flops_ratio": 1.5,
        "tokens_per_step": tokens_per_step,
        "spec_decode_runs": [tps * 0.99, tps * 1.01, tps],  # three interleaved rounds: the one rule's input
    }


def test_sweep_puts_trees_in_their_own_columns_and_compares_them_with_the_chains():
    rows = [_row(1, 3, 40.0), _row(1, 4, 42.0), _row(1, 4, 50.0, 16, 4, 3.1), _row(16, 3, 120.0), _row(16, 4, 90.0, 16, 4, 2.9)]
    assert sweep._columns(rows) == ["3", "4", "4 · tree 16/4"]
    assert [r["tree"] for r in sweep.grid_table(rows)] == ["chain", "chain", "16/4", "chain", "16/4"]
    lines = sweep.tree_vs_chain(rows)
    assert lines[0].startswith("batch 1: the best tree (4 · tree 16/4, 17 tokens per pass) ran 50.0 tok/s, 1.19×")
    assert "faster" in lines[0] and "3.10 vs 2.00 tokens" in lines[0]
    assert lines[1].startswith("batch 16:") and "0.75× the best chain (k = 3" in lines[1] and "slower" in lines[1]
    assert sweep.envelope(rows)[0]["best_fixed_depth"] == 4  # the envelope's best fixed k is a chain
    assert sweep.envelope(rows)[0]["best_fixed"] == 42.0
    decoded = [
        r | {"ar_decode_tokens_per_s": 30.0, "spec_decode_tokens_per_s": r["spec_tokens_per_s"] * (2.0 if r["depth"] == 3 else 1.0)}
        for r in rows
    ]
    assert sweep.envelope(decoded)[0]["best_fixed_depth"] == 3 and sweep.envelope(decoded)[0]["best_fixed"] == 80.0  # decoding alone ranks
    assert sweep.envelope(decoded)[0]["ar"] == 30.0
