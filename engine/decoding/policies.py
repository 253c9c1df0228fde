"""Depth policies: how many tokens to speculate this step.

A policy sees the live load (active batch size) and the run so far, and returns k for the next step.
`fixed` always speculates `depth`; `off_above_batch` is the classic load rule: speculation switches off
while more than N sequences are in flight, because then the target's pass is already full of real
tokens and draft tokens only push it past the ridge point into compute-bound territory. It is what
vLLM's V0 engine offered as `--speculative-disable-by-batch-size` (a no-op since v0.10, removed in
February 2026, vllm-project/vllm PR #35060); today's engines set draft length per batch-size range
instead (vLLM `num_speculative_tokens_per_batch_size`, TensorRT-LLM `draft_len_schedule`).
`heuristic` adapts depth to acceptance, as transformers' assisted generation does ("heuristic"
schedule): +2 after a step whose drafts were all accepted, -1 (not below 1) after a rejection, so a
weak draft is asked for fewer tokens and a good one for more. It keeps `off_above_batch`'s point in
mind too: it never speculates while the batch is above `disable_by_batch_size`.

The load-aware policies price the next step before choosing k:
`batch_table` is vLLM's `num_speculative_tokens_per_batch_size` (and TensorRT-LLM's `draft_len_schedule`):
a table of batch ranges -> k, k = 0 switching speculation off. Given explicitly, or derived from this
machine's measured pass-cost curve (engine/decoding/passcurve.py) with a prior acceptance.
`goodput` chooses, at every step, the k that maximises expected emitted tokens per second for the batch
in flight: B * E[tokens per row](k) / (T_verify(B * (k + 1)) + (k + 1) * T_draft(B) + T_step), where T_verify
comes from the measured pass-cost curve, corrected online by the ratio of each step's measured verify time to
the curve's (one ratio shared by all pass sizes, following the machine's load, times a slower-learnt factor
per size for the curve's shape errors), T_draft is the drafter's measured time per draft position (the
catch-up pass that feeds the last step's tokens counted as one more; an estimate from its FLOPs until the
first draft is timed), T_step the measured time a step spends outside passes and drafting (bookkeeping,
acceptance; plain steps priced with their own), and E[tokens](k) = 1 + sum_i prod_{j<=i} a_j from a running
(EMA) estimate of the acceptance a_j at each draft position j given the ones before it (Leviathan et al.
2023's expected tokens per step, with per-position rates instead of one alpha). It only changes how many
tokens are proposed, so it stays lossless, and it never drafts more than `depth`, the user's maximum.

Width by measured cost: with tree drafting (`tree_nodes` > 0) `goodput` also chooses the shape. Before a
step it compares plain, the best chain and a tree (`choose_tree`): a tree of n nodes is worth
B * E[tokens](n) / (T_verify(B * (n + 1)) + T_tree(B)), T_tree the measured time to grow the full tree
(EAGLE-2: `depth` levels of top-k; before the first, `depth` draft passes over B * top-k tokens), and
E[tokens](n) = 1 + the sum, over the n most likely nodes, of the chance that the node's whole path is
accepted: the product along the path of the drafter's q, each calibrated by the run's measured acceptance
(engine/decoding/tree_value.py, which states what that assumes). Before drafting, the recent trees'
calibrated curve stands in for the next tree's; once a tree is drafted, `tree_size` cuts it to the n
that maximises the same rate with its own probabilities (`DraftTree.best` keeps each row's n best nodes,
still a tree). While it speculates, the shape it has not chosen is drawn once every REFRESH_STEPS decode
steps (a tree at once, if none was drawn yet), so its estimate follows the text. A cut tree is a
deterministic function of the drafter's q and of past steps, fixed before the target's pass, so tree
verification stays lossless.

Warm start: what goodput learns (per-position acceptance, the calibration a(q), the trees' value curve, the
verify-time ratios, the drafter's measured cost) is kept across runs in the same process, keyed by target,
drafter, dtype, device, pass-cost curve and shape settings (engine/decoding/warmstart.py): a policy starts from the
last such run's state and writes its own back after every step. A fresh process starts from the priors.

Exploration: a policy that only ever chose plain would never measure acceptance at that batch. So after
EXPLORE_STEPS plain steps in a row goodput drafts one chain (the best k >= 1 by the same rate): see
EXPLORE_STEPS below. Deterministic given the steps seen; like the warm start it only changes what is proposed.

Every policy sees a `PolicyContext` before each step (`depth`; `tree_now`), a drafted tree (`tree_size`: the
static ones verify it whole) and the finished `Step` after it (`observe`: a no-op for the static ones)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from engine.config import MAX_DEPTH, DecodeConfig, PolicyKind
from engine.decoding import warmstart
from engine.decoding.tree_value import Calibration, chain_drafts, tree_drafts, tree_value


@dataclass(frozen=True)
class PolicyContext:
    step: int  # decode step index (1 = first step after prefill)
    batch: int  # sequences still decoding
    base_depth: int  # the user's depth setting
    mean_accepted: float | None  # accepted draft tokens per sequence-step so far (None before any)
    last_depth: int = 0  # depth drafted at the previous step (0: none)
    last_all_accepted: bool = False  # every row accepted every draft at the previous step


class DepthPolicy(Protocol):
    name: str
    stop_below: float  # a joint draft confidence below which rows stop drafting this step (0: none)
    tree_now: bool  # in a tree-drafting run: this step drafts a tree (False: a chain of `depth`)

    def depth(self, ctx: PolicyContext) -> int: ...

    def tree_size(self, tree) -> tuple: ...  # (n, score): verify a drafted tree's n best nodes by score (DraftTree.best)

    def observe(self, step) -> None: ...  # the Step just taken (engine/trace/)


class _Static:
    """Policies that learn nothing from the steps they see (and verify a drafted tree whole)."""

    stop_below = 0.0
    tree_now = True

    def tree_size(self, tree) -> tuple:
        return tree.nodes, None

    def observe(self, step) -> None:
        pass


@dataclass(frozen=True)
class FixedDepth(_Static):
    name = "fixed"

    def depth(self, ctx: PolicyContext) -> int:
        return ctx.base_depth


@dataclass(frozen=True)
class OffAboveBatch(_Static):
    """The classic rule (vLLM V0's `--speculative-disable-by-batch-size N`): no speculation while batch > N."""

    threshold: int
    name = "off_above_batch"

    def depth(self, ctx: PolicyContext) -> int:
        return ctx.base_depth if ctx.batch <= self.threshold else 0


@dataclass
class HeuristicDepth(_Static):
    """Acceptance-driven depth (transformers' `num_assistant_tokens_schedule="heuristic"`), batch-aware.

    State lives in the object, and `make_policy` builds a fresh one for every run."""

    threshold: int
    current: int | None = None
    name = "heuristic"

    def depth(self, ctx: PolicyContext) -> int:
        if ctx.base_depth == 0 or ctx.batch > self.threshold:
            return 0
        if self.current is None:
            self.current = ctx.base_depth
        elif ctx.last_depth > 0:
            self.current = min(self.current + 2, MAX_DEPTH) if ctx.last_all_accepted else max(1, self.current - 1)
        return self.current


# --- load-aware policies ----------------------------------------------------------------------

# The acceptance a policy assumes before a run has verified anything: a starting guess, replaced by the
# run's own measured per-position acceptance after its first speculative steps (EMA_WEIGHT per step).
PRIOR_ACCEPTANCE = 0.6
EMA_WEIGHT = 0.2
SHAPE_WEIGHT = 0.05  # a pass size's own verify-time factor (GoodputDepth.verify_ms): slower than the load's EMA_WEIGHT
# A tree-drafting goodput run draws the shape it has not chosen (chain or tree) once after this many decode
# steps without it, so its estimate follows the text: at most one step in REFRESH_STEPS priced on a guess.
REFRESH_STEPS = 32
# Exploration (goodput): after EXPLORE_STEPS plain steps in a row one step drafts the best chain; an exploration that
# leaves plain the choice doubles the wait (to EXPLORE_MAX), a speculative choice resets it. Every EXPLORE_STEPS-th
# tree step verifies twice its cut's nodes. At most one step in EXPLORE_STEPS is priced on anything but the best guess.
EXPLORE_STEPS = 16
EXPLORE_MAX = 256


def expected_tokens(accept: list[float], k: int) -> float:
    """Expected tokens a row emits in a step of depth k: 1 (the target's own) + sum over i <= k of the
    chance that drafts 1..i are all accepted, with accept[j] the acceptance of position j+1 given the ones
    before it (with a constant alpha this is Leviathan et al.'s (1 - alpha^(k+1)) / (1 - alpha))."""
    total, run = 1.0, 1.0
    for j in range(k):
        run *= accept[j]
        total += run
    return total


def best_depth(batch: int, max_depth: int, accept, verify_ms, draft_ms_per_position: float, min_depth: int = 0, fixed_ms=(0.0, 0.0)):
    """(k, expected tokens per ms) maximising batch * E[tokens](k) / (verify_ms(batch * (k + 1)) + k * draft + fixed), k >= min_depth.
    fixed_ms: per-step time that does not grow with k, (plain step, speculative step); goodput measures it."""
    best_k, best_rate = (0, batch / (verify_ms(batch) + fixed_ms[0])) if min_depth == 0 else (0, float("-inf"))
    for k in range(max(1, min_depth), max_depth + 1):
        rate = batch * expected_tokens(accept, k) / (verify_ms(batch * (k + 1)) + k * draft_ms_per_position + fixed_ms[1])
        if rate > best_rate:
            best_k, best_rate = k, rate
    return best_k, best_rate


@dataclass(frozen=True)
class BatchTable(_Static):
    """vLLM's `num_speculative_tokens_per_batch_size`: rows (min_batch, max_batch, k); a batch no row
    covers speculates the user's `depth`. k is capped at `depth` (the user's maximum)."""

    table: tuple[tuple[int, int, int], ...]
    name = "batch_table"

    def depth(self, ctx: PolicyContext) -> int:
        for low, high, k in self.table:
            if low <= ctx.batch <= high:
                return min(k, ctx.base_depth)
        return ctx.base_depth


# Batch ranges of a derived table: each gets the k that is best at its geometric middle.
TABLE_RANGES = ((1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 32), (33, 64), (65, 128), (129, 256), (257, 1 << 20))


def derived_batch_table(
    curve, max_depth: int, draft_cost_ratio: float, accept: float = PRIOR_ACCEPTANCE
) -> tuple[tuple[int, int, int], ...]:
    """A batch table from this machine's measured pass-cost curve: for each range of TABLE_RANGES the k that
    maximises expected tokens per second with a constant acceptance `accept` and a drafter costing
    `draft_cost_ratio` x a batch-B target pass per draft position (c in Leviathan et al.)."""
    rows = []
    for low, high in TABLE_RANGES:
        batch = max(1, round((low * min(high, 4 * low)) ** 0.5))
        k, _ = best_depth(batch, max_depth, [accept] * max_depth, curve.time_ms, draft_cost_ratio * curve.time_ms(batch))
        rows.append((low, high, k))
    return tuple(rows)


@dataclass
class GoodputDepth:
    """k per step from the measured cost of a pass and the run's own acceptance (see the module docstring);
    with `tree_nodes`, the shape too: plain, a chain of k, or a tree cut to n nodes.

    State (the acceptance estimates, the cost corrections) lives in the object: `make_policy` builds one for every
    run, starting from what the last run with the same `memory_key` learnt (engine/decoding/warmstart.py)."""

    curve: object  # engine.decoding.passcurve.PassCurve
    max_depth: int
    draft_cost_ratio: float  # drafter FLOPs per draft position / target FLOPs per token: the prior for T_draft
    accept: list[float] | None = None
    verify_ratio: dict[int, float] | None = None  # key 0: measured / curve time (EMA, the load); key t: log of size t's own factor
    draft_ms: dict[int, float] | None = None  # log2 bucket of batch -> measured draft ms per position (EMA)
    last_choice: tuple[int, float] | None = None  # (k, or a tree's n; expected tokens per ms) of the latest choice
    stop_below: float = 0.0  # this step's break-even joint draft confidence (see `depth`)
    tree_nodes: int = 0  # the run's largest tree (DecodeConfig.tree_nodes; 0: chains only)
    tree_topk: int = 0
    tree_now: bool = False  # this step drafts a tree (else a chain, or nothing)
    calibration: Calibration = field(default_factory=Calibration)  # joint confidence -> acceptance
    tree_gain: list[float] | None = None  # EMA of a tree's expected accepted nodes per row, n = 1..tree_nodes
    tree_draft_ms: dict[int, float] = field(default_factory=dict)  # log2 bucket of batch -> measured ms to grow a tree
    step_ms: dict[int, float] = field(default_factory=dict)  # a step's time outside passes and drafting: 0 plain, 1 chain, 2 tree
    since: dict[str, int] = field(default_factory=lambda: {"chain": 0, "tree": 0})  # decode steps since each shape ran
    plain_run: int = 0  # plain decode steps in a row (exploration)
    explore_every: int = EXPLORE_STEPS  # plain steps in a row before the next exploring chain
    tree_steps: int = 0  # tree steps so far (every EXPLORE_STEPS-th verifies a wider cut)
    memory_key: tuple | None = None  # engine/decoding/warmstart.py: where this policy's learnt state is kept (None: nowhere)
    name = "goodput"

    def __post_init__(self):
        self.accept = self.accept or [PRIOR_ACCEPTANCE] * max(self.max_depth, 1)
        self.verify_ratio = self.verify_ratio or {}
        self.draft_ms = self.draft_ms or {}
        learnt = warmstart.recall(self.memory_key) if self.memory_key is not None else None
        if learnt is not None:
            self.restore(learnt)

    LEARNT = ("accept", "verify_ratio", "draft_ms", "tree_gain", "tree_draft_ms", "explore_every", "step_ms")

    def learnt(self) -> dict:
        """What a later run with the same key starts from (engine/decoding/warmstart.py)."""
        cal = self.calibration
        return {name: getattr(self, name) for name in self.LEARNT} | {"calibration": (cal.accepted, cal.confidence)}

    def restore(self, learnt: dict) -> None:
        for name in self.LEARNT:
            if name in learnt:  # a store from before a field existed keeps its default
                setattr(self, name, learnt[name])
        self.calibration = Calibration(*map(list, learnt["calibration"]))

    @staticmethod
    def _bucket(n: int) -> int:
        return max(int(n), 1).bit_length()

    @staticmethod
    def _nearest(table: dict[int, float], batch: int) -> float:
        b = GoodputDepth._bucket(batch)
        return table[min(table, key=lambda x: (abs(x - b), x))]

    def verify_ms(self, tokens: int) -> float:
        """The curve's time x the measured/curve ratio over all sizes (it follows the machine's load) x this
        pass size's own factor (the curve's shape error there; 1 for a size not run yet). A size measured once
        during a load spike is not priced on that spike for ever: the spike moves the shared ratio (EMA_WEIGHT per
        step), and a size's own factor, a lasting property of the curve, moves slower (SHAPE_WEIGHT of its log per
        step it runs)."""
        return self.curve.time_ms(tokens) * self.verify_ratio.get(0, 1.0) * math.exp(self.verify_ratio.get(tokens, 0.0))

    def draft_ms_per_position(self, batch: int) -> float:
        if self.draft_ms:
            return self._nearest(self.draft_ms, batch)
        return self.draft_cost_ratio * self.verify_ms(batch)

    def tree_draft(self, batch: int, depth: int) -> float:
        """ms to grow a full tree: measured, else `depth` drafter passes over batch x top-k tokens."""
        if self.tree_draft_ms:
            return self._nearest(self.tree_draft_ms, batch)
        return depth * self.draft_ms_per_position(batch * self.tree_topk)

    def fixed_ms(self) -> tuple[float, float]:
        """Measured per-step time outside the passes and the drafting: (a plain step's, a speculative step's)."""
        return self.step_ms.get(0, 0.0), self.step_ms.get(1, 0.0)

    def best_cut(self, batch: int, gain, draft_ms: float) -> tuple[int, float]:
        """(n, expected tokens per ms) maximising (batch + gain[n - 1]) / (verify_ms(batch * (n + 1)) + draft_ms + fixed)."""
        fixed = self.step_ms.get(2, self.fixed_ms()[1])  # a tree step's own (its acceptance walk, its roll-back)
        rates = [(batch + float(g)) / (self.verify_ms(batch * (n + 1)) + draft_ms + fixed) for n, g in enumerate(gain, start=1)]
        n = max(range(len(rates)), key=rates.__getitem__)
        return n + 1, rates[n]

    def depth(self, ctx: PolicyContext) -> int:
        if ctx.base_depth == 0:
            return 0
        batch = ctx.batch
        draft_ms = self.draft_ms_per_position(batch)
        max_depth = min(ctx.base_depth, self.max_depth)
        plain, spec = self.fixed_ms()
        fixed = (plain, spec + (draft_ms if self.draft_ms else 0.0))  # a measured drafter's catch-up: one position
        k, rate = best_depth(batch, max_depth, self.accept, self.verify_ms, draft_ms, fixed_ms=fixed)
        explore = k == 0 and self.plain_run >= self.explore_every
        if explore:  # plain for a while: measure this batch's acceptance with the best chain (EXPLORE_STEPS)
            k, rate = best_depth(batch, max_depth, self.accept, self.verify_ms, draft_ms, min_depth=1, fixed_ms=fixed)
            self.explore_every = min(2 * self.explore_every, EXPLORE_MAX)
        elif k > 0:
            self.explore_every = EXPLORE_STEPS
        self.tree_now = not explore and self.choose_tree(batch, ctx.base_depth, k, rate)
        if self.tree_now:
            self.stop_below = 0.0
            return ctx.base_depth
        self.last_choice = (k, rate)
        # The drafter's own confidence (EAGLE-2's joint q of the draft prefix) then ends rows early: one more
        # position costs a draft step plus one more token per row in the verify pass; in that time the batch
        # emits rate * cost tokens, rate * cost / batch per row. A row whose joint q (its chance of having
        # every draft so far accepted) is below that stops; drafting ends when every row has stopped.
        self.stop_below = 0.0
        if k > 0:
            cost = draft_ms + self.verify_ms(batch * (k + 1)) - self.verify_ms(batch * k)
            self.stop_below = min(1.0, rate * max(cost, 0.0) / batch)
        return k

    def choose_tree(self, batch: int, depth: int, k: int, chain_rate: float) -> bool:
        """A tree this step? When its expected rate (from the recent trees' calibrated curve) beats the best of
        plain and chains. While speculating, the shape not chosen is drawn once after REFRESH_STEPS decode
        steps without it (a tree at once if none was drawn yet), so its estimate follows the text."""
        if not self.tree_nodes:
            return False
        if self.tree_gain is None:
            return k > 0  # never drawn: try one as soon as speculating looks worth it
        n, tree_rate = self.best_cut(batch, [batch * g for g in self.tree_gain], self.tree_draft(batch, depth))
        if tree_rate > chain_rate:
            self.last_choice = (n, tree_rate)
            return not (k > 0 and self.since["chain"] >= REFRESH_STEPS)
        return k > 0 and self.since["tree"] >= REFRESH_STEPS

    def tree_size(self, tree):
        """(n, score): verify each row's n nodes of highest score (`DraftTree.best`), n maximising expected tokens
        per ms with this tree's own calibrated probabilities (engine/decoding/tree_value.py). It also updates
        the curve that prices the next step's shape."""
        batch = int(tree.tokens.shape[0])
        log_p, gain = tree_value(tree, self.calibration)  # (B, N), (N,) summed over rows
        per_row = (gain / batch).tolist() + [float(gain[-1]) / batch] * (self.tree_nodes - tree.nodes)
        old = self.tree_gain
        self.tree_gain = per_row if old is None else [(1 - EMA_WEIGHT) * a + EMA_WEIGHT * b for a, b in zip(old, per_row)]
        n, rate = self.best_cut(batch, gain.tolist(), self.tree_draft(batch, tree.depth))
        self.last_choice = (n, rate)
        self.tree_steps += 1
        if self.tree_steps % EXPLORE_STEPS == 0:  # re-check the nodes the cut leaves out (EXPLORE_STEPS)
            n = min(tree.nodes, 2 * n)
        return n, log_p

    def observe(self, step) -> None:
        """Learn from a decode step: its verify time against the curve, its draft time (per position for a
        chain, per tree), each row's acceptance at every chain position it reached (position j counts only
        if 1..j-1 were accepted), and every verified node for the confidence calibration."""
        if step.kind != "decode" or step.verify_ms <= 0:
            return
        tokens = step.tokens_per_pass
        ratio = step.verify_ms / self.curve.time_ms(tokens)
        overall, own = self.verify_ratio.get(0), self.verify_ratio.get(tokens, 0.0)
        if overall is not None:  # this size against the shared ratio, in logs (see `verify_ms`)
            own = self.verify_ratio[tokens] = (1 - SHAPE_WEIGHT) * own + SHAPE_WEIGHT * math.log(ratio / overall)
        self.verify_ratio[0] = _ema(overall, ratio / math.exp(own))
        for shape in self.since:
            self.since[shape] += 1
        self.plain_run = self.plain_run + 1 if step.depth == 0 else 0
        self._learn(step)
        if self.memory_key is not None:
            warmstart.remember(self.memory_key, self.learnt())

    def _learn(self, step) -> None:
        bb = self._bucket(step.batch)
        shape = 2 if step.tree_nodes is not None else int(step.depth > 0)  # plain, chain, tree
        self.step_ms[shape] = _ema(self.step_ms.get(shape), step.overhead_ms + step.policy_ms)
        if step.tree_nodes is not None:
            self.since["tree"] = 0
            if step.draft_ms > 0:
                self.tree_draft_ms[bb] = _ema(self.tree_draft_ms.get(bb), step.draft_ms)
            self.calibration.observe([d for row in step.seqs if row.tree is not None for d in tree_drafts(row.tree)])
            return
        if step.depth > 0:
            self.since["chain"] = 0
            if step.draft_ms > 0:  # per position, the catch-up pass counted as one (see `depth`)
                self.draft_ms[bb] = _ema(self.draft_ms.get(bb), step.draft_ms / (step.depth + 1))
            self.calibration.observe([d for row in step.seqs for d in chain_drafts(row.drafted)])
        reached = [0] * len(self.accept)
        kept = [0] * len(self.accept)
        for row in step.seqs:
            for j in range(min(len(row.drafted), len(self.accept))):
                reached[j] += 1
                if j < row.num_accepted:
                    kept[j] += 1
                else:
                    break
        for j, n in enumerate(reached):
            if n:
                self.accept[j] = _ema(self.accept[j], kept[j] / n)


def _ema(old: float | None, new: float) -> float:
    return new if old is None else (1 - EMA_WEIGHT) * old + EMA_WEIGHT * new


def draft_cost_ratio(pair, drafter_kind: str, context: int) -> float:
    """FLOPs of one draft position / FLOPs of one target token at `context` (c's prior; 0 for a lookup)."""
    costs = {"model": pair.draft_costs, "eagle": pair.eagle_costs}.get(drafter_kind)
    return costs.token_flops(context) / pair.target_costs.token_flops(context) if costs is not None else 0.0


def derived_table_for(pair, cfg: DecodeConfig) -> tuple[tuple[int, int, int], ...]:
    """The batch table policy "batch_table" derives for `pair` and `cfg` when none is given."""
    from engine.decoding.passcurve import pass_curve

    curve = pass_curve(pair)
    return derived_batch_table(curve, cfg.depth, draft_cost_ratio(pair, cfg.drafter, curve.context))


def make_policy(cfg: DecodeConfig, pair=None, drafter=None) -> DepthPolicy:
    """The policy `cfg` names. The load-aware ones need the pair (for its measured pass-cost curve) and the
    drafter (for the prior of its cost per draft position)."""
    if cfg.policy in (PolicyKind.BATCH_TABLE.value, PolicyKind.GOODPUT.value):
        if cfg.policy == PolicyKind.BATCH_TABLE.value and cfg.batch_table is not None:
            return BatchTable(cfg.batch_table)
        if pair is None or drafter is None or not cfg.speculative:
            return FixedDepth()  # plain decoding: nothing to choose
        from engine.decoding.passcurve import pass_curve

        if cfg.policy == PolicyKind.BATCH_TABLE.value:
            return BatchTable(derived_table_for(pair, cfg))
        curve = pass_curve(pair)
        ratio = draft_cost_ratio(pair, cfg.drafter, curve.context)
        key = warmstart.policy_key(pair, cfg, curve)  # starts from what the last such run learnt
        return GoodputDepth(curve, cfg.depth, ratio, tree_nodes=cfg.tree_nodes, tree_topk=cfg.tree_topk, memory_key=key)
    if cfg.policy == PolicyKind.OFF_ABOVE_BATCH.value:
        return OffAboveBatch(cfg.disable_by_batch_size)
    if cfg.policy == PolicyKind.HEURISTIC.value:
        return HeuristicDepth(cfg.disable_by_batch_size)
    return FixedDepth()
