"""The `goodput` depth policy: plain, a chain of k or a tree of n nodes, whichever maximises expected tokens
per second from the measured cost of a pass and the run's own acceptance (the other policies:
engine/decoding/policies.py, which builds this one in `make_policy`).

`goodput` chooses, at every step, the k that maximises expected emitted tokens per second for the batch
in flight: B * E[tokens per row](k) / (T_verify(B * (k + 1)) + (k + 1) * T_draft(B) + T_step), where T_verify
comes from the measured pass-cost curve, corrected online by the ratio of each step's measured verify time to
the curve's (one ratio shared by all pass sizes, following the machine's load, times a slower-learnt factor
per size run lately, for the curve's shape errors), T_draft is the drafter's measured time per draft position
(the catch-up pass that feeds the last step's tokens counted as one more; an estimate from its FLOPs until the
first draft is timed), T_step the measured time a step spends outside passes and drafting (bookkeeping,
acceptance; plain steps priced with their own), and E[tokens](k) from a running estimate of the acceptance a_j
at each draft position j given the ones before it (engine/decoding/chain_value.py), the first position's scaled to
the drafts the rows the batch waits for keep (engine/decoding/binding_rows.py: a batch ends with its last row, the
unluckiest of its draws). It only changes how many
tokens are proposed, so it stays lossless, and it never drafts more than `depth`, the user's maximum.

Context: the curve is measured at a short context (passcurve.CURVE_CONTEXT), but every pass also reads each row's KV
cache, once per pass whatever its tokens per row. Past the short bucket (the longest prompt at least
warmstart.SHORT_CONTEXT tokens) the prior adds that read: the rows' tokens past the curve's context x the target's
KV bytes per token (engine/costs.py) over the rate this machine's passes read KV at (`kv_ms_per_token`, measured
once by engine/decoding/context_curves.py), times 1 + `kv_per_query` x (new tokens per row - 1): what each more query
token adds to attention over the cache, measured beside it (0 where attention streams the cache once for all of a
row's tokens, as on a GPU; a share on a CPU whose attention is bound by its arithmetic). The factors then
learn the measured time against curve + KV. So at a long context a verify pass of k + 1 tokens per row costs
relatively less than at a short one (as much less as the cache is read once), and what is learnt is kept per
(batch, context) bucket (engine/decoding/warmstart.py). In the short bucket nothing is added: the choices are the
curve's alone.

The acceptance estimate is a ratio of decayed counts, a_j = kept_j / reached_j: every step that measures
position j, and every plain step, multiplies both by ACCEPT_DECAY and adds PRIOR_WEIGHT * (1 - ACCEPT_DECAY)
prior observations at PRIOR_ACCEPTANCE, then the step's own rows (those that reached position j; those of them
that kept it). A tree step measures the chain inside it: each level's best child, the draft a chain of the same drafter
would have made (engine/decoding/tree_value.py, `chain_inside`), so a run that draws trees keeps its chain estimates
fed. Positions deeper than the chosen k are measured by every EXPLORE_STEPS-th chain, which drafts
one position more (their estimates rest on those steps alone, so a chain of k does not wash them out). At batch 1
a step is one yes/no per position; with counts an estimate rests on the last ~1 / (1 - ACCEPT_DECAY) observations,
not on the last step or two, and one that stops being fed (plain steps) drifts back to the prior, so a bad stretch
is re-tried, not believed for ever.

Width and depth by measured cost: with tree drafting (`tree_nodes` > 0) `goodput` also chooses the shape. Before
a step it compares plain, the best chain and the best tree (`choose_tree`): a tree of depth d cut to n nodes is
worth B * E[tokens](d, n) / (T_verify(B * (n + 1)) + d * T_level(B)), T_level the measured time per level (EAGLE-2
grows d levels of top-k, one drafter pass each; before the first tree, a draft pass over B * top-k tokens), and
E[tokens](d, n) = 1 + the sum, over the n most likely nodes of depth <= d, of the chance that the node's whole
path is accepted: the product along the path of the drafter's q, each calibrated by the run's measured acceptance
(engine/decoding/tree_value.py, which states what that assumes), lifted where the per-position acceptance prices the
tree's top-1 path (a chain of min(n, d)) higher (`tree_curve`). Before drafting, the recent
trees' calibrated curves (one per depth) stand in for the next tree's; once a tree is drafted, `tree_size` cuts it
to the n that maximises the same rate with its own probabilities (`DraftTree.best` keeps each row's n best nodes,
still a tree). Every EXPLORE_STEPS-th tree grows one level deeper than chosen, so the deeper curves stay measured.
While it speculates, the shape it has not chosen is drawn once every REFRESH_STEPS decode steps (a tree after the run's first chain, if
none was drawn yet), so its estimate follows the text. A cut tree is a deterministic function of the drafter's q
and of past steps, fixed before the target's pass, so tree verification stays lossless.

Warm start: what goodput learns is kept across runs, in the process and on disk (engine/decoding/warmstart.py), the
text's part learnt afresh (`restore`); with nothing stored it starts from this machine's pass-cost curve, the
drafter's cost from its FLOPs and its shipped held-out acceptance per position (engine/drafters/calibration.py;
PRIOR_ACCEPTANCE without one). A run's first draft meets the drafter's first passes, and a draft after plain
steps catches up on their tokens: such a time only bounds the drafter's cost from above (what a step teaches it:
engine/decoding/goodput_steps.py; why: docs/engine.md, "goodput from the first run"); the catch-up itself is learnt
per row and token and priced into a draft after plain steps (`catch_up_ms`). Exploration (EXPLORE_STEPS) measures
acceptance where plain is chosen.
Every policy sees a `PolicyContext` before each step, a drafted tree (`tree_size`) and the finished `Step` after it
(`observe`): engine/decoding/policies.py's `DepthPolicy`."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from engine.decoding import warmstart
from engine.decoding.binding_rows import RowAcceptance
from engine.decoding.chain_value import best_depth, expected_tokens, step_rate
from engine.decoding.goodput_steps import PRIOR_WEIGHT, ema, learn, learn_curves, start_from_task
from engine.decoding.tree_value import Calibration, calibrated_paths, depth_gains
from engine.loadmeter import LoadMeter

PRIOR_ACCEPTANCE = 0.6  # a drafter without a card: a starting guess, worth PRIOR_WEIGHT observations
SHAPE_WEIGHT = 0.05  # a pass size's own verify-time factor (GoodputDepth.verify_ms): slower than the load's EMA_WEIGHT
REFRESH_STEPS = 32  # the shape not chosen (chain or tree) is drawn once after this many decode steps without it
# Exploration (goodput): after EXPLORE_STEPS plain steps in a row one step drafts the best chain; an exploration that
# leaves plain the choice doubles the wait (to EXPLORE_MAX), a speculative choice resets it. Every EXPLORE_STEPS-th
# tree step verifies twice its cut's nodes, every EXPLORE_STEPS-th chain and tree one position or level deeper than chosen.
EXPLORE_STEPS = 16
EXPLORE_MAX = 256
# An exploration is worth its price only while the run has steps left to use what it measures: none while the row the
# batch ends with has fewer than RUNWAY new tokens to go (the counter carries on, so the next run's first draft looks
# instead). Near a run's end an exploring chain paid a catch-up pass over every plain token for nothing: at batch 4 on
# Spec-Bench it was the largest part of goodput's loss to plain (docs/journal.md, "goodput at batch 4: the rows' luck and the run's end").
RUNWAY = EXPLORE_STEPS
REMEMBER_STEPS = 8  # the warm-start store gets a copy of the state every this many decode steps and at a run's last
# A run beside other work learnt the machine's load, not its costs: when other processes kept more than BUSY_CORES
# cores busy on average from the policy's start to its run's last step, what it learnt stays in this process's memory
# but is not written for the next process (the last quiet run's file stays; why: docs/engine.md, "goodput from the
# first run"). Runs shorter than LOAD_MIN_S are too short to judge (CPU time counts in scheduler ticks): quiet.
BUSY_CORES = 0.5
LOAD_MIN_S = 0.25


@dataclass
class GoodputDepth:
    """k per step from the measured cost of a pass and the run's own acceptance (see the module docstring);
    with `tree_nodes`, the shape too: plain, a chain of k, or a tree cut to n nodes.

    State (the acceptance estimates, the cost corrections) lives in the object: `make_policy` builds one for every
    run, starting from what the last run with the same `memory_key` learnt (engine/decoding/warmstart.py)."""

    curve: object  # engine.decoding.passcurve.PassCurve
    max_depth: int
    draft_cost_ratio: float  # drafter FLOPs per draft position / target FLOPs per token: the prior for T_draft
    kv_ms_per_token: float = 0.0  # ms a pass spends reading one cached token of one row past the curve's context (0: unpriced)
    kv_per_query: float = 0.0  # each more new token per row adds this share of that read (context_curves.KVRead.per_query)
    accept: list[float] | None = None  # a_j, derived from `counts` (given: the starting guess, PRIOR_WEIGHT observations)
    prior: list[float] | None = None  # a_j before any step, and where unfed estimates drift back to: the drafter's
    # shipped calibration (its card's held-out acceptance, engine/drafters/calibration.py), else PRIOR_ACCEPTANCE
    counts: list[list[float]] | None = None  # per position [kept, reached], decayed (see the module docstring)
    verify_ratio: dict[int, float] | None = None  # key 0: measured / curve time (EMA, the load); key t: log of size t's own factor
    draft_ms: dict[int, float] | None = None  # log2 bucket of batch -> measured draft ms per position (EMA)
    explore_ms: dict[int, float] = field(default_factory=dict)  # log2 bucket -> ms per row of a draft right after plain steps
    catch_ms: dict[int, float] = field(default_factory=dict)  # log2 bucket -> ms the drafter's catch-up takes per row and plain token
    last_choice: tuple[int, float] | None = None  # (k, or a tree's n; expected tokens per ms) of the latest choice
    stop_below: float = 0.0  # this step's break-even joint draft confidence (see `depth`)
    tree_nodes: int = 0  # the run's largest tree (DecodeConfig.tree_nodes; 0: chains only)
    tree_topk: int = 0
    tree_now: bool = False  # this step drafts a tree (else a chain, or nothing)
    calibration: Calibration = field(default_factory=Calibration)  # joint confidence -> acceptance
    # per depth d (index d - 1), EMA of a tree's expected accepted nodes per row, n = 1..tree_nodes
    tree_gain: list[list[float]] | None = None
    tree_draft_ms: dict[int, float] = field(default_factory=dict)  # log2 bucket of batch -> measured ms per tree level
    tree_depth: int = 0  # the depth this step's tree grows to (`choose_tree`)
    step_ms: dict[int, float] = field(default_factory=dict)  # a step's time outside passes and drafting: 0 plain, 1 chain, 2 tree
    since: dict[str, int] = field(default_factory=lambda: {"chain": 0, "tree": 0})  # decode steps since each shape ran
    plain_run: int = 0  # plain decode steps in a row (exploration), across warm-started runs
    _after_plain: bool = True  # the last decode step seen was plain, or none was: a run's first draft is one-off work too
    plain_here: int = 0  # plain steps in this run since its last draft: the tokens per row a draft now catches up on
    chain_steps: int = 0  # chain steps so far (every EXPLORE_STEPS-th drafts one position deeper)
    explore_every: int = EXPLORE_STEPS  # plain steps in a row before the next exploring chain
    tree_steps: int = 0  # tree steps so far (every EXPLORE_STEPS-th verifies a wider cut)
    memory_key: tuple | None = None  # engine/decoding/warmstart.py: where this policy's learnt state is kept (None: nowhere)
    task: str = ""  # the prompts' task (DecodeConfig.task): its learnt acceptance is the next run's prior (`restore`)
    observed: int = 0  # decode steps observed in this run: every REMEMBER_STEPS-th is written to the store
    _observe_ms: float = 0.0  # how long the last `observe` took (outside the step it learnt from: part of a step's cost)
    name = "goodput"

    def __post_init__(self):
        positions = max(self.max_depth, 1)
        self.prior = list(self.prior or [PRIOR_ACCEPTANCE] * positions)
        self.prior += [self.prior[-1]] * (positions - len(self.prior))  # a card measured fewer positions: its last
        self.accept = self.accept or list(self.prior[:positions])
        self.counts = self.counts or [[PRIOR_WEIGHT * a, PRIOR_WEIGHT] for a in self.accept]
        self.verify_ratio = self.verify_ratio or {}
        self.draft_ms = self.draft_ms or {}
        self._ran: dict[int, int] = {}  # pass size -> the `observed` count when it last ran here (`_fade_stale_sizes`)
        self._drawn: int | None = None  # the depth of the tree this step drafted (`tree_size`)
        self._rows: dict[int, tuple] = {}  # batch -> (curve, its times at batch x (n + 1)): `verify_row`
        self.run_chains = 0  # chain steps in this run (`choose_tree`: a run's first draft is a chain)
        self._kv_ms = 0.0  # this step's KV read past the curve's context at one token per row (`kv_ms`), set by `depth`
        self._kv_batch = 1  # this step's rows, set by `depth` (`kv_at`)
        self._catch = 0.0  # this step's catch-up (`catch_up_ms`), set by `depth`: a tree is priced with it too
        self.row_accept = RowAcceptance()  # each row's own kept drafts per step in this run (the binding row)
        self.bind = 1.0  # the binding rows' kept drafts per step over the batch's, set by `depth`
        learnt = warmstart.recall(self.memory_key) if self.memory_key is not None else None
        if learnt is not None:
            self.restore(learnt)
        self._load, self._load_t0 = LoadMeter(), time.perf_counter()  # other processes' CPU, for `quiet`
        self.other_cores: float | None = None  # set at the run's last step (`quiet`)
        self._load.resume()

    LEARNT = ("accept", "counts", "verify_ratio", "draft_ms", "tree_gain", "tree_draft_ms", "explore_every", "plain_run")
    LEARNT += ("chain_steps", "step_ms", "explore_ms", "catch_ms")

    def learnt(self) -> dict:
        """What a later run with the same key starts from (engine/decoding/warmstart.py)."""
        cal = self.calibration
        return {name: getattr(self, name) for name in self.LEARNT} | {"calibration": (cal.accepted, cal.confidence)}

    TEXT = ("accept", "counts", "tree_gain")  # with the calibration: the text's part, learnt afresh by each run (`restore`)

    def restore(self, learnt: dict) -> None:
        """A warm start meets new text: the machine's part of `learnt` (verify, draft and step costs, exploration
        counters) carries whole; the text's part (per-position acceptance, the calibration of q, the trees' curves)
        stays where a cold run starts, at the drafter's card, and is learnt afresh (why: docs/engine.md, "goodput
        from the first run"); a named task's acceptance is its next run's prior (`start_from_task`)."""
        if len(learnt.get("accept", self.accept)) != len(self.accept):
            return  # another depth's state (the key holds the depth, so only a hand-made state): the priors
        for name in self.LEARNT:
            if name in learnt and name not in self.TEXT:  # a store from before a field existed keeps its default
                setattr(self, name, learnt[name])
        start_from_task(self, learnt)

    @staticmethod
    def _bucket(n: int) -> int:
        return max(int(n), 1).bit_length()

    @staticmethod
    def _nearest(table: dict[int, float], batch: int) -> float:
        b = GoodputDepth._bucket(batch)
        return table[min(table, key=lambda x: (abs(x - b), x))]

    def kv_ms(self, batch: int, context: int, per_row: float = 1.0) -> float:
        """The prior's price of the KV cache a pass of `batch` rows reads past the curve's own context, each row holding
        `context` tokens and adding `per_row` new ones: rows x the tokens past it x `kv_ms_per_token` x (1 +
        `kv_per_query` x (per_row - 1)); with kv_per_query 0 the same for one new token per row or k + 1 (a verify
        pass reads each row's cache once)."""
        return self.kv_ms_per_token * batch * max(0, context - self.curve.context) * self._queries(per_row)

    def _queries(self, per_row: float) -> float:
        """The KV time of `per_row` new tokens per row against one's: 1 + kv_per_query x (per_row - 1)."""
        return 1.0 + self.kv_per_query * (per_row - 1.0)

    def kv_at(self, tokens: int, batch: int | None = None) -> float:
        """This step's KV price (`kv_ms` at its batch and context) for a pass of `tokens` over its rows."""
        return self._kv_ms * self._queries(tokens / (batch or self._kv_batch))

    def verify_ms(self, tokens: int, kv_ms: float | None = None) -> float:
        """The curve's time x the measured/curve ratio over all sizes (it follows the machine's load) x this
        pass size's own factor (the curve's shape error there; 1 for a size not run yet). A size measured once
        during a load spike is not priced on that spike for ever: the spike moves the shared ratio (EMA_WEIGHT per
        step), and a size's own factor, a lasting property of the curve, moves slower (SHAPE_WEIGHT of its log per
        step it runs). The curve's time is measured at its own short context; the KV read past it (the given `kv_ms`,
        else this step's, `kv_at`) is added before the factors, which learn against both."""
        kv = self.kv_at(tokens) if kv_ms is None else kv_ms
        return (self.curve.time_ms(tokens) + kv) * self.verify_ratio.get(0, 1.0) * math.exp(self.verify_ratio.get(tokens, 0.0))

    def _centre_sizes(self) -> None:
        """Keep the sizes' own factors averaging 1 (their logs summing to 0), the shared ratio carrying the rest.
        Shared ratio x own factor is all a size's steps pin down, so without this the split drifts: with one size
        run almost every step (a chain of 2 at batch 1), its factor sank to 0.72 while the shared ratio rose to
        1.5, and every size not run (plain, deeper chains) was priced 30% too slow (docs/measurements.md)."""
        sizes = [t for t in self.verify_ratio if t != 0]
        if not sizes or 0 not in self.verify_ratio:
            return
        mean = sum(self.verify_ratio[t] for t in sizes) / len(sizes)
        for t in sizes:
            self.verify_ratio[t] -= mean
        self.verify_ratio[0] *= math.exp(mean)

    def _fade_stale_sizes(self, tokens: int) -> None:
        """A size not run in this process for REFRESH_STEPS decode steps fades back to the curve's shape (its log
        factor shrinks by SHAPE_WEIGHT a step). Otherwise a factor learnt from a few noisy passes lasts for ever: the
        size it prices dear is never chosen, so never measured again (an example: docs/journal.md, "Code history moved out of engine/")."""
        self._ran[tokens] = self.observed
        for t in self.verify_ratio:
            if t and self.observed - self._ran.get(t, -REFRESH_STEPS) >= REFRESH_STEPS:
                self.verify_ratio[t] *= 1 - SHAPE_WEIGHT

    def draft_ms_per_position(self, batch: int) -> float:
        if self.draft_ms:
            return self._nearest(self.draft_ms, batch)
        return self.draft_cost_ratio * self.verify_ms(batch, kv_ms=0.0)  # a drafter's pass priced at the curve's context

    def explore_draft_ms(self, batch: int) -> float | None:
        """What drafting costs a step that follows plain steps (an exploring chain), its catch-up included: measured per
        row at the nearest batch size, times this batch; None before any (docs/engine.md, "goodput")."""
        return self._nearest(self.explore_ms, batch) * batch if self.explore_ms else None

    def catch_up_ms(self, batch: int) -> float:
        """What a draft now first pays to feed the drafter the tokens this run's plain steps emitted (`plain_here` per
        row): measured per row and token at the nearest batch (`catch_ms`), else `catch_prior_ms`; 0 right after a
        draft (docs/engine.md, "goodput: the catch-up priced")."""
        if not self.plain_here:
            return 0.0
        if self.catch_ms:
            return self._nearest(self.catch_ms, batch) * batch * self.plain_here
        return self.catch_prior_ms(batch, self.plain_here)

    def catch_prior_ms(self, batch: int, plain: int) -> float:
        """A catch-up's price before one is measured: a drafter pass over batch x plain tokens at its FLOPs ratio."""
        return self.draft_cost_ratio * self.verify_ms(batch * plain, kv_ms=0.0)

    def tree_draft(self, batch: int, depth: int) -> float:
        """ms to grow a tree of `depth` levels: the measured time per level, else a drafter pass over batch x top-k
        tokens per level."""
        if self.tree_draft_ms:
            return depth * self._nearest(self.tree_draft_ms, batch)
        return depth * self.draft_ms_per_position(batch * self.tree_topk)

    def tree_curve(self, depth: int) -> list[float]:
        """Expected accepted nodes per row of a tree of `depth` levels cut to n = 1..tree_nodes nodes: the recent trees'
        calibrated curve g at that depth, lifted where the per-position acceptance (the drafter's card, then the run's
        chains) prices the tree's top-1 path higher: g(n) + max(0, chain(m) - g(m)), m = min(n, depth), chain(m) the
        chain of m drafts' worth. A calibration that has seen little prices a node at the drafter's own q, far below an
        underconfident EAGLE head's acceptance (docs/engine.md, "goodput from the first run")."""
        curve = [g * self.bind for g in self.tree_gain[min(depth, len(self.tree_gain)) - 1]]  # as the binding row sees it
        accept = self.priced()
        lift = [expected_tokens(accept, min(m, len(accept))) - 1.0 - curve[m - 1] for m in range(1, depth + 1)]
        return [g + max(0.0, lift[min(n, depth) - 1]) for n, g in enumerate(curve, start=1)]

    def best_tree(self, batch: int, depth: int) -> tuple[int, int, float]:
        """(d, n, expected tokens per ms) of the best tree of at most `depth` levels (`tree_curve`, priced as
        `best_cut` prices a cut; the first best wins: the shallowest depth, then the fewest nodes)."""
        best = (0, 0, float("-inf"))
        verify, fixed = self.verify_row(batch), self._tree_fixed()
        for d in range(1, depth + 1):
            cost = self.tree_draft(batch, d) + fixed + self._catch
            for n, (g, v) in enumerate(zip(self.tree_curve(d), verify), start=1):
                rate = step_rate(batch + batch * g, v, cost)  # cost: the tree's drafting and its fixed time
                if rate > best[2]:
                    best = (d, n, rate)
        return best

    def verify_row(self, batch: int) -> list[float]:
        """`verify_ms(batch * (n + 1))` for n = 1..tree_nodes, the curve's part kept per batch size."""
        kept = self._rows.get(batch)
        if kept is None or kept[0] is not self.curve:
            kept = self._rows[batch] = (self.curve, [self.curve.time_ms(batch * (n + 1)) for n in range(1, self.tree_nodes + 1)])
        shared = self.verify_ratio.get(0, 1.0)
        row = [(t + self._kv_ms * self._queries(n + 1)) * shared for n, t in enumerate(kept[1], start=1)]
        for t, factor in self.verify_ratio.items():  # the sizes run so far (key 0: the shared ratio)
            if t and t % batch == 0 and 2 <= t // batch <= self.tree_nodes + 1:
                row[t // batch - 2] *= math.exp(factor)
        return row

    def _tree_fixed(self) -> float:
        return self.step_ms.get(2, self.fixed_ms()[1])  # a tree step's own (its acceptance walk, its roll-back)

    def fixed_ms(self) -> tuple[float, float]:
        """Measured per-step time outside the passes and the drafting: (a plain step's, a speculative step's)."""
        return self.step_ms.get(0, 0.0), self.step_ms.get(1, 0.0)

    def best_cut(self, batch: int, gain, draft_ms: float) -> tuple[int, float]:
        """(n, expected tokens per ms) maximising (batch + gain[n - 1] x bind) / (verify_ms(batch * (n + 1)) + draft_ms + fixed)."""
        cost = draft_ms + self._tree_fixed()
        rates = [step_rate(batch + g * self.bind, v, cost) for g, v in zip(gain, self.verify_row(batch))]
        n = max(range(len(rates)), key=rates.__getitem__)
        return n + 1, rates[n]

    def priced(self) -> list[float]:
        """The per-position acceptance a step is priced with: the first position's times `bind`, the binding rows' kept
        drafts per step over the batch's (engine/decoding/binding_rows.py), which scales every term of E[tokens] past
        the first; the deeper ones (each given the ones before it) the batch's."""
        return [self.accept[0] * self.bind, *self.accept[1:]]

    def depth(self, ctx) -> int:  # ctx: engine.decoding.policies.PolicyContext
        self._kv_ms, self._kv_batch = self.kv_ms(ctx.batch, ctx.context), ctx.batch  # this step's rows' caches, read by its verify pass
        max_depth = min(ctx.base_depth, self.max_depth, max(ctx.remaining, default=self.max_depth + 1) - 1)  # drafts a row can use
        if max_depth <= 0:  # nothing to choose (a run's last token: the decoder drafts none), so nothing to learn from
            return 0
        self.bind = self.row_accept.factor(ctx.rows, ctx.remaining)  # the row the batch waits for
        batch, draft_ms = ctx.batch, self.draft_ms_per_position(ctx.batch)
        plain, spec = self.fixed_ms()
        self._catch = self.catch_up_ms(batch)  # the plain steps' tokens the drafter reads before it drafts
        fixed = (plain, spec + (draft_ms if self.draft_ms else 0.0) + self._catch)  # a measured drafter's feed: one position
        k, rate = best_depth(batch, max_depth, self.priced(), self.verify_ms, draft_ms, fixed_ms=fixed)
        runway = max(ctx.remaining, default=RUNWAY) >= RUNWAY  # rows not described: as if the run had just begun
        explore = k == 0 and self.plain_run >= self.explore_every and runway and self._could_pay(batch, max_depth, draft_ms, fixed)
        if explore:  # plain for a while: measure this batch's acceptance with the best chain (EXPLORE_STEPS)
            k, rate = best_depth(batch, max_depth, self.priced(), self.verify_ms, draft_ms, min_depth=1, fixed_ms=fixed)
            self.explore_every = min(2 * self.explore_every, EXPLORE_MAX)
        elif k > 0:
            self.explore_every = EXPLORE_STEPS
        self.tree_now = not explore and self.choose_tree(batch, max_depth, k, rate)
        if self.tree_now:
            self.stop_below = 0.0
            return self.tree_depth
        self.last_choice = (k, rate)
        if 0 < k < max_depth and self.chain_steps % EXPLORE_STEPS == EXPLORE_STEPS - 1:
            k += 1  # every EXPLORE_STEPS-th chain drafts one position deeper than chosen, so that position is measured too
        # The drafter's own confidence (EAGLE-2's joint q of the draft prefix) then ends rows early: one more
        # position costs a draft step plus one more token per row in the verify pass; in that time the batch
        # emits rate * cost tokens, rate * cost / batch per row. A row whose joint q (its chance of having
        # every draft so far accepted) is below that stops; drafting ends when every row has stopped.
        self.stop_below = 0.0
        if k > 0:
            cost = draft_ms + self.verify_ms(batch * (k + 1)) - self.verify_ms(batch * k)
            self.stop_below = min(1.0, rate * max(cost, 0.0) / batch)
        return k

    def _could_pay(self, batch: int, max_depth: int, draft_ms: float, fixed) -> bool:
        """Would an exploring chain beat plain here if every draft were accepted? If not, no acceptance can make it
        pay at this batch (the curve's verify cost outgrows what acceptance can return): plain is chosen from the
        first step and no exploring chain is ever paid for. An exploring chain is priced with what a draft after plain
        steps costs (`explore_draft_ms`), not with a steady chain's; before one is timed, its catch-up (a drafter pass
        over every row's plain_run + 1 tokens) is priced on the pass curve at the drafter's FLOPs ratio."""
        explore = self.explore_draft_ms(batch)
        if explore is None:  # none timed yet: the catch-up, one drafter pass over each row's plain_run + 1 tokens, on the curve
            explore = self.draft_cost_ratio * self.verify_ms(batch * (self.plain_run + 1), kv_ms=0.0) + draft_ms
        draft_ms, fixed = 0.0, (fixed[0], self.fixed_ms()[1] + explore)
        return best_depth(batch, max_depth, [1.0] * max_depth, self.verify_ms, draft_ms, fixed_ms=fixed)[0] > 0

    def choose_tree(self, batch: int, depth: int, k: int, chain_rate: float) -> bool:
        """A tree this step? When its expected rate (from the recent trees' calibrated curve) beats the best of
        plain and chains. While speculating, the shape not chosen is drawn once after REFRESH_STEPS decode
        steps without it (a tree after the run's first chain if none was drawn yet), so its estimate follows the text."""
        if not self.tree_nodes:
            return False
        self.tree_depth = depth
        if self.tree_gain is None:  # never drawn: try one, of every level, as soon as speculating looks worth it, after
            return k > 0 and self.run_chains > 0  # the run's first chain, a cheaper first look at this text's acceptance
        d, n, tree_rate = self.best_tree(batch, depth)
        if self.tree_steps % EXPLORE_STEPS == EXPLORE_STEPS - 1:
            d += 1  # every EXPLORE_STEPS-th tree one level deeper than chosen, so that level is measured too
        self.tree_depth = min(d, depth)
        if tree_rate > chain_rate:
            self.last_choice = (n, tree_rate)
            return not (k > 0 and self.since["chain"] >= REFRESH_STEPS)
        return k > 0 and self.since["tree"] >= REFRESH_STEPS

    def tree_size(self, tree):
        """(n, None): verify each row's n nodes of highest joint confidence (`DraftTree.best`, EAGLE-2's order), n
        maximising expected tokens per ms with this tree's own calibrated probabilities (engine/decoding/tree_value.py).
        It also updates the curves that price the next step's shape."""
        batch = int(tree.tokens.shape[0])
        self._drawn = tree.depth  # the levels drafted (the cut may keep fewer): what goodput_steps.learn prices a level by
        curves = depth_gains(tree, calibrated_paths(tree, self.calibration))  # (D, N) summed over rows
        learn_curves(self, [[g / batch for g in curve] for curve in curves], tree.depth)
        n, rate = self.best_cut(batch, curves[-1], self.tree_draft(batch, tree.depth))
        self.last_choice = (n, rate)
        self.tree_steps += 1
        if self.tree_steps % EXPLORE_STEPS == 0:  # re-check the nodes the cut leaves out (EXPLORE_STEPS)
            n = min(tree.nodes, 2 * n)
        return n, None

    def observe(self, step) -> None:
        """Learn from a decode step: its verify time against the curve, its draft time (per position for a
        chain, per tree), each row's acceptance at every chain position it reached (position j counts only
        if 1..j-1 were accepted), and every verified node for the confidence calibration."""
        if step.kind != "decode" or step.verify_ms <= 0:
            return
        started = time.perf_counter()
        tokens = step.tokens_per_pass
        ratio = step.verify_ms / (self.curve.time_ms(tokens) + self.kv_at(tokens, step.batch))  # priced as `depth` priced this step
        overall, own = self.verify_ratio.get(0), self.verify_ratio.get(tokens, 0.0)
        if overall is not None:  # this size against the shared ratio, in logs (see `verify_ms`)
            own = self.verify_ratio[tokens] = (1 - SHAPE_WEIGHT) * own + SHAPE_WEIGHT * math.log(ratio / overall)
        self.verify_ratio[0] = ema(overall, ratio / math.exp(own))
        self._fade_stale_sizes(tokens)
        self._centre_sizes()
        for shape in self.since:
            self.since[shape] += 1
        self.plain_run = self.plain_run + 1 if step.depth == 0 else 0
        learn(self, step)  # with each row's own count (`row_accept`) and the catch-up after plain steps (`plain_here`)
        self.observed += 1
        last = all(row.finished for row in step.seqs)
        if self.memory_key is not None and (last or self.observed % REMEMBER_STEPS == 0):
            durable = last and self.quiet()  # the last step of a quiet run: to disk, for the next process
            warmstart.remember(self.memory_key, self.learnt(), durable=durable)
        self._observe_ms = (time.perf_counter() - started) * 1000

    def quiet(self) -> bool:
        """Did other processes keep at most BUSY_CORES cores busy since this policy started (see BUSY_CORES)?"""
        elapsed = time.perf_counter() - self._load_t0
        self._load.pause()
        other = self._load.fields()["other_cpu_s"]
        self._load.resume()
        self.other_cores = None if other is None or elapsed < LOAD_MIN_S else other / elapsed
        return self.other_cores is None or self.other_cores <= BUSY_CORES
