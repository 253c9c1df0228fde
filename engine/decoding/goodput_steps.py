"""What the goodput policy (engine/decoding/goodput.py) learns from a finished decode step: the acceptance at each
chain position, the drafter's time (per chain position, per tree level, right after plain steps), a step's time
outside its passes, the trees' value curves and the calibration of the drafter's confidence.

The acceptance a_j is a ratio of decayed counts, kept_j / reached_j: every step that measures position j, and every
plain step, multiplies both by ACCEPT_DECAY and adds PRIOR_WEIGHT * (1 - ACCEPT_DECAY) prior observations at the
policy's prior (its drafter's card), then the step's own rows. Costs are running averages (EMA_WEIGHT); a drafting
time that also holds one-off work (a catch-up after plain steps, a run's first draft) only bounds the known cost
from above (`bounded`; why: docs/engine.md, "goodput from the first run"). Each function takes the policy whose
state it updates (a `GoodputDepth`).
"""

from __future__ import annotations

from engine.decoding.tree_value import chain_drafts, chain_inside, tree_drafts

PRIOR_WEIGHT = 2.0  # the prior acceptance counts as this many observations
ACCEPT_DECAY = 0.96  # per decode step: an estimate rests on the last ~25 observed rows of each position
EMA_WEIGHT = 0.2  # the costs' running averages (verify-time ratio, draft time, step time)
# A step's time outside its passes is learnt from each step at most SPIKE x the known average + a millisecond: one
# unclipped pause in a stored state priced plain steps dozens of times their cost, so goodput drafted at batch 16,
# where every draft loses (docs/journal.md, "where goodput loses on Spec-Bench").
SPIKE = 3.0
CATCH_TOKENS = 16  # a catch-up over this many row-tokens moves `catch_ms` by EMA_WEIGHT (`learn_catch_up`)
TASK_FLOOR = 0.02  # a task's acceptance prior stays within [TASK_FLOOR, 1 - TASK_FLOOR] (`start_from_task`)


def start_from_task(policy, learnt: dict) -> None:
    """A run that names its task (`DecodeConfig.task`) starts from the acceptance its task's last run ended with, as
    the prior that plain steps drift back to, not from the drafter's card. One task's texts accept alike far more than
    two prompts picked at random do, so a task whose first drafts fail (RAG's rows at batch 4) stops paying, every run,
    a first draft priced on the card; each run moves the prior by what it measured, plain steps fading it
    (ACCEPT_DECAY). Kept within TASK_FLOOR of 0 and 1, so an exploring chain can still move it."""
    accept = learnt.get("accept")
    if policy.task and accept and len(accept) == len(policy.prior):
        policy.prior = [min(max(a, TASK_FLOOR), 1 - TASK_FLOOR) for a in accept]
        policy.accept = list(policy.prior)
        policy.counts = [[PRIOR_WEIGHT * a, PRIOR_WEIGHT] for a in policy.accept]


def learn(policy, step) -> None:
    """Fold one decode step into `policy`: its step time, the acceptance of every chain position it measured, its
    drafting time (with the catch-up over the run's plain steps before it, `plain_here`) and the confidence calibration."""
    bb = policy._bucket(step.batch)
    shape = 2 if step.tree_nodes is not None else int(step.depth > 0)  # plain, chain, tree
    # A step's own time outside its passes: its overhead (which holds the policy's choice and cut, made inside the
    # step) and the policy's learning after the last step (`observe`, outside it); not + policy_ms, which holds the
    # choice and the cut too (counted twice, a 32-node tree's cut priced trees out of steps they would have won).
    # One step's overhead can hold a pause that is not the step's (a garbage collection, a page fault, another process):
    # it moves the average by at most SPIKE x the average known, so one such step cannot make plain look slow.
    old = policy.step_ms.get(shape)
    spent = step.overhead_ms + policy._observe_ms
    policy.step_ms[shape] = ema(old, spent if old is None else min(spent, SPIKE * old + 1.0))
    # A draft right after plain steps also feeds the drafter every token those steps emitted (its catch-up
    # pass), and a run's first draft meets the drafter's first passes (the prompts it read at prefill): one-off
    # work, not drafting. Such a time bounds the cost from above (`bounded`): it may lower what is known, never
    # raise it (docs/engine.md, "goodput from the first run").
    plain = step.depth == 0 and step.tree_nodes is None
    after_plain, policy._after_plain = policy._after_plain, plain
    caught, policy.plain_here = policy.plain_here, policy.plain_here + 1 if plain else 0
    if caught and step.draft_ms > 0 and not plain:
        learn_catch_up(policy, step, caught, bb)
    drafts = first_drafts(step)  # read once: the chain positions each row reached, and which it kept
    reached, kept = observed(policy, drafts)
    policy.row_accept.observe(kept_drafts(step))
    for j, counts in enumerate(policy.counts):
        if reached[j] or plain:  # a position this step measured; on a plain step every position (it drifts to the prior)
            counts[0] = ACCEPT_DECAY * counts[0] + (1 - ACCEPT_DECAY) * PRIOR_WEIGHT * policy.prior[j] + kept[j]
            counts[1] = ACCEPT_DECAY * counts[1] + (1 - ACCEPT_DECAY) * PRIOR_WEIGHT + reached[j]
            policy.accept[j] = counts[0] / counts[1]
    if step.tree_nodes is not None:
        policy.since["tree"] = 0
        if step.draft_ms > 0:
            drawn, policy._drawn = policy._drawn or step.depth, None  # the levels drafted, not the cut's depth
            level = step.draft_ms / max(drawn, 1)  # a tree of d levels: d drafter passes (the root's, d - 1 growing)
            bounded(policy.tree_draft_ms, bb, level, after_plain, policy.tree_draft(step.batch, 1))
        policy.calibration.observe([d for row in step.seqs if row.tree is not None for d in tree_drafts(row.tree)])
    elif step.depth > 0:
        policy.since["chain"] = 0
        policy.chain_steps += 1
        policy.run_chains += 1
        if after_plain and step.draft_ms > 0:  # what an exploring chain pays (`explore_draft_ms`), per row
            policy.explore_ms[bb] = ema(policy.explore_ms.get(bb), step.draft_ms / step.batch)
        if step.draft_ms > 0:  # per position, the catch-up counted as one
            bounded(policy.draft_ms, bb, step.draft_ms / (step.depth + 1), after_plain, policy.draft_ms_per_position(step.batch))
        policy.calibration.observe([d for row in step.seqs for d in chain_drafts(row.drafted)])


def learn_catch_up(policy, step, caught: int, bucket: int) -> None:
    """A draft after `caught` plain steps of this run: what it took beyond the same draft made step after step (the
    drafting known so far, one position more for the feed), per row and plain token, into `catch_ms`: a running
    average from the prior's price (`catch_prior_ms`), each step weighted by the tokens it read over
    CATCH_TOKENS (so a catch-up over two tokens, whose time is mostly the draft's own noise, barely moves it)."""
    if step.tree_nodes is not None:
        steady = policy.tree_draft(step.batch, policy._drawn or step.depth)
    else:
        steady = (step.depth + 1) * policy.draft_ms_per_position(step.batch)
    tokens = step.batch * caught
    old = policy.catch_ms.get(bucket)
    if old is None:
        old = policy.catch_prior_ms(step.batch, caught) / tokens
    weight = min(1.0, EMA_WEIGHT * tokens / CATCH_TOKENS)
    policy.catch_ms[bucket] = (1 - weight) * old + weight * max(0.0, step.draft_ms - steady) / tokens


def kept_drafts(step) -> list[tuple[int, int]]:
    """(row, drafts it kept) for every row that drafted this step: a chain's accepted drafts, a tree's accepted path
    (which may leave the chain inside: a rejected best child whose sibling was kept)."""
    return [(row.seq, row.num_accepted) for row in step.seqs if row.drafted or row.tree is not None]


def first_drafts(step) -> list[tuple[int, list[bool]]]:
    """(row, acceptance of each chain position it reached) for every row that drafted this step: a chain row's
    drafts up to the first rejection; a tree row's chain inside (`tree_value.chain_inside`: each level's best child,
    the draft a chain would have made), so a run that draws trees keeps measuring the chain positions too."""
    out = []
    for row in step.seqs:
        if step.tree_nodes is not None:
            hits = chain_inside(row.tree) if row.tree is not None else []
        else:
            hits = [j < row.num_accepted for j in range(min(len(row.drafted), row.num_accepted + 1))]
        if hits:
            out.append((row.seq, hits))
    return out


def observed(policy, drafts) -> tuple[list[int], list[int]]:
    """(reached, kept) per chain position over a step's `first_drafts`: a row reaches position j if it drafted it (in a
    tree, on the chain inside) and kept 1..j-1."""
    reached = [0] * len(policy.accept)
    kept = [0] * len(policy.accept)
    for _, hits in drafts:
        for j, hit in enumerate(hits[: len(policy.accept)]):
            reached[j] += 1
            kept[j] += hit
    return reached, kept


def learn_curves(policy, per_row, drawn: int) -> None:
    """Fold a tree's per-depth curves (D, N) into `tree_gain` (a first tree also stands for deeper ones: a lower bound)."""
    curves = [row + [row[-1]] * (policy.tree_nodes - len(row)) for row in per_row]  # a tree with fewer nodes: flat past them
    if policy.tree_gain is None:
        policy.tree_gain = [curves[min(d, drawn) - 1] for d in range(1, max(policy.max_depth, drawn) + 1)]
        return
    for d, new in enumerate(curves[: len(policy.tree_gain)]):
        policy.tree_gain[d] = [(1 - EMA_WEIGHT) * a + EMA_WEIGHT * b for a, b in zip(policy.tree_gain[d], new)]


def bounded(table: dict[int, float], bucket: int, measured: float, one_off: bool, known: float) -> None:
    """Learn a measured drafting time into `table`: as a running average, or, when the time also holds one-off
    work (`one_off`: a catch-up after plain steps, a run's first draft), as an upper bound on `known`."""
    if not one_off:
        table[bucket] = ema(table.get(bucket), measured)
    elif measured < known:
        table[bucket] = measured


def ema(old: float | None, new: float) -> float:
    return new if old is None else (1 - EMA_WEIGHT) * old + EMA_WEIGHT * new
