"""Draft-tree view: the tree a sequence drafted in one step, and the path the target accepted.

Tree drafting (EAGLE-2, engine/decoding/verify_tree.py) proposes several continuations at once; the target verifies every
node in one pass and keeps the longest path it agrees with. This view draws one row's tree of one step as
an indented outline, root (the sequence's last token) first, siblings best first:
- nodes on the accepted path: green, underlined (the token view's "accepted draft");
- every other node: red, struck through (drafted and verified, then thrown away);
- the target's own token after the path: blue, boxed, ↺ for a correction, + for a bonus at a leaf.
Hovering a node shows the drafter's q after its parent, the joint confidence (the product of q down the
path: what EAGLE-2 ranks nodes by) and the target's p. Colour is never the only signal. Pure functions of
the trace's `SeqStep.tree` records (engine/trace/): no Streamlit, every token text escaped.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from app.views.tokens import STYLE, _display_text

TREE_STYLE = """<style>
.sl-tree{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:0.86rem;line-height:1.7;
 border:1px solid rgba(128,128,128,.35);border-radius:6px;padding:6px 8px;margin:0 0 6px 0;max-height:28rem;overflow-y:auto}
.sl-tree ul{list-style:none;margin:0;padding-left:1.4rem;border-left:1px dotted rgba(128,128,128,.5)}
.sl-tree>ul{padding-left:.4rem;border-left:none}
.sl-tree li{margin:0}
.sl-tree .tree-q{font-size:.7em;opacity:.65;margin-left:4px}
</style>"""


@dataclass(frozen=True)
class TreeStep:
    """One row's tree in one step, with what the target did after the accepted path."""

    step: int
    seq: int
    tree: object  # engine.trace.records.TreeRecord
    next_text: str
    next_kind: str  # "correction" | "bonus"
    next_prob: float

    @property
    def num_accepted(self) -> int:
        return sum(self.tree.accepted)

    def summary(self) -> str:
        tree = self.tree
        what = "a bonus at a leaf" if self.next_kind == "bonus" else "a correction"
        return (
            f"step {self.step}, sequence {self.seq + 1}: {len(tree.ids)} nodes, {tree.depth} deep, "
            f"{len(tree.children(-1))} first tokens; the target accepted {self.num_accepted} "
            f"and added {what}"
        )


def tree_steps(steps, seq: int | None = None) -> list[TreeStep]:
    """Every (step, row) that drafted a tree, in order; only sequence `seq` when given."""
    out = []
    for step in steps:
        for s in step.seqs:
            if s.tree is not None and (seq is None or s.seq == seq):
                out.append(TreeStep(step.index, s.seq, s.tree, s.next_text, s.next_kind, s.next_prob))
    return out


def _joint(tree) -> list[float]:
    joint: list[float] = []
    for q, parent in zip(tree.q, tree.parents):
        joint.append(q * (joint[parent] if parent >= 0 else 1.0))
    return joint


def _node_html(tree, i: int, joint: list[float], greedy: bool) -> str:
    accepted = tree.accepted[i]
    kind, cls = ("accepted", "tok tok-acc") if accepted else ("rejected", "tok tok-rej")
    decided = (
        ("the target's argmax after its parent" if accepted else "not the target's argmax (or its parent was rejected)")
        if greedy
        else ("kept by rejection sampling" if accepted else "not kept")
    )
    tip = (
        f"draft node, {kind}\ndraft q = {tree.q[i]:.3f} after its parent; joint confidence {joint[i]:.3f}\n"
        f"target p = {tree.p[i]:.3f}\n{decided}"
    )
    return (
        f'<span class="{cls}" data-kind="{kind}" title="{html.escape(tip, quote=True)}">'
        f'{_display_text(tree.texts[i])}</span><span class="tree-q">{tree.q[i]:.2f}</span>'
    )


def _target_html(item: TreeStep) -> str:
    kind = item.next_kind if item.next_kind in ("correction", "bonus") else "correction"
    marker = "↺" if kind == "correction" else "+"
    what = "correction after the rejected children" if kind == "correction" else "bonus token: the path reached a leaf"
    tip = html.escape(f"target's {what}\ntarget p = {item.next_prob:.3f}", quote=True)
    return (
        f'<span class="tok tok-{"fix" if kind == "correction" else "bonus"}" data-kind="{kind}" title="{tip}">'
        f'{_display_text(item.next_text)}<span class="tok-mark">{marker}</span></span>'
    )


def tree_html(item: TreeStep, greedy: bool = False) -> str:
    """The tree as a nested outline; the target's token hangs under the accepted path's last node."""
    tree = item.tree
    joint = _joint(tree)
    path = tree.path()
    end = path[-1] if path else -1

    def branch(parent: int) -> str:
        items = []
        if parent == end:
            items.append(f"<li>{_target_html(item)}</li>")
        for child in tree.children(parent):
            items.append(f"<li>{_node_html(tree, child, joint, greedy)}{branch(child)}</li>")
        return f"<ul>{''.join(items)}</ul>" if items else ""

    root = '<span class="tok tok-plain" title="the sequence so far (its last token)">▸ context</span>'
    head = f'<div class="sl-seqhead">{html.escape(item.summary())}</div>'
    return f'{STYLE}{TREE_STYLE}{head}<div class="sl-tree"><ul><li>{root}{branch(-1)}</li></ul></div>'


def tree_totals(steps) -> dict | None:
    """Mean nodes drafted and accepted per row-step over the run's trees (None: no trees)."""
    items = tree_steps(steps)
    if not items:
        return None
    return {
        "row_steps": len(items),
        "mean_nodes": sum(len(i.tree.ids) for i in items) / len(items),
        "mean_accepted": sum(i.num_accepted for i in items) / len(items),
        "mean_depth": sum(i.tree.depth for i in items) / len(items),
    }
