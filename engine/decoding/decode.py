"""The decode loop: plain autoregressive and speculative decoding through one code path.

One iteration = one target forward pass for the whole ragged batch (gpt-fast's speculative_decode;
Leviathan et al. 2023, Algorithm 1, batched):
    # 1. draft   the drafter proposes k tokens per sequence (k from the depth policy; k = 0 is plain decoding)
    # 2. verify  the target scores [last token, d_1..d_k] for every sequence in ONE forward pass
    # 3. accept  greedy longest matching prefix, or accept/resample; plus the target's own next token
    # 4. roll back each sequence keeps its own accepted count in both KV caches; finished rows leave the batch
`Decoder.step` is that iteration, on one screen; the bookkeeping (timing, records, wasted FLOPs) lives in
named helpers below it and in bookkeeping.py. Each iteration is yielded as a `Step` (what was drafted/accepted, measured times,
FLOPs, bytes) so the app can animate the run live; `generate` collects them into a `Trace`.

The loop never asks which drafter it holds: it talks to the `Drafter` interface (engine/drafters/).
All mutable state (caches, positions, RNG) lives inside one call: the model pair stays stateless and
can be shared by every session of the app.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time

import torch

from engine.config import DecodeConfig
from engine.decoding.bookkeeping import check_lean_target, next_kind, run_meta, tree_records
from engine.decoding.policies import PolicyContext, make_policy
from engine.decoding.sequence import Sequence, prepare_sequences
from engine.decoding.verify_tree import verify_tree
from engine.drafters import Draft, Verified, drafter_label, make_drafter
from engine.hardware import StepTimer, UtilizationSampler, synchronize, thread_budget
from engine.loadmeter import LoadMeter, run_threads
from engine.model.backend import choose_backend
from engine.model.kvcache import RaggedCache, shared_prefix
from engine.model.pair import ModelPair
from engine.model.prefix_cache import PrefixCache
from engine.model.static_cache import make_cache
from engine.sampling import greedy_ids, probs_from_logits, sample, verify
from engine.trace.file import Trace
from engine.trace.records import DraftToken, SeqStep, Step, summarize


class StepStream:
    """Iterate to get one `Step` per target forward; after the last one, `.trace` holds the run."""

    def __init__(self, pair: ModelPair, prompts: list[str], cfg: DecodeConfig, prefix_cache: PrefixCache | None = None):
        self.pair, self.cfg, self.prefix_cache = pair, cfg, prefix_cache
        self.seqs = prepare_sequences(pair, prompts, cfg)  # validate before any model work
        self.drafter_name = drafter_label(pair, cfg)
        self.trace: Trace | None = None
        self.decoder: Decoder | None = None  # the live run, for tests and introspection (set while iterating)

    # Live decoding state, read-only views for tests and introspection.
    @property
    def target_cache(self) -> RaggedCache | None:
        return self.decoder.target if self.decoder else None

    @property
    def drafter(self):
        return self.decoder.drafter if self.decoder else None

    @property
    def active(self) -> list[Sequence]:
        return self.decoder.active if self.decoder else []

    def __iter__(self):
        self.decoder = Decoder(self.pair, self.seqs, self.cfg)
        for cache in filter(None, (self.decoder.target, self.decoder.drafter_cache)):  # may read a shared prefix warm
            cache.warm = self.prefix_cache
        yield from self.decoder.run()
        self.trace = self.decoder.trace(self.drafter_name)


def generate_steps(pair: ModelPair, prompts: list[str], cfg: DecodeConfig, prefix_cache: PrefixCache | None = None) -> StepStream:
    """The run as a live stream of Steps (for animation); `.trace` is set when it is exhausted. prefix_cache: the
    caller's warm shared prefixes (engine/model/prefix_cache.py), read and filed by the run's shared prefill."""
    return StepStream(pair, prompts, cfg, prefix_cache)


def generate(pair: ModelPair, prompts: list[str], cfg: DecodeConfig, prefix_cache: PrefixCache | None = None) -> Trace:
    """Decode `prompts` (a batch, one user message each) and return the full Trace."""
    stream = generate_steps(pair, prompts, cfg, prefix_cache)
    for _ in stream:
        pass
    return stream.trace


class Decoder:
    """One run: the target's cache, the drafter, the policy, the sequences still decoding, the clock."""

    def __init__(self, pair: ModelPair, seqs: list[Sequence], cfg: DecodeConfig):
        self.pair, self.cfg, self.seqs = pair, cfg, seqs
        self.device = pair.device
        tok = pair.tokenizer
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else (min(pair.eos_ids) if pair.eos_ids else 0)
        self.eos_ids = pair.eos_ids if cfg.stop_at_eos else frozenset()
        self.generator = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self.backend = choose_backend(self.device, cfg.backend, cfg.cuda_graphs)  # how passes run (engine/model/backend.py)
        self.drafter = make_drafter(pair, cfg, self.pad_id, self.backend)  # None for plain decoding; its cache on the run's backend
        context = max(len(s.prompt_ids) for s in seqs)  # goodput's state is kept per (batch, context) bucket
        self.policy = make_policy(cfg, pair, self.drafter, len(seqs), context)  # load-aware ones read the pass-cost curve
        self.features = self.drafter.target_features if self.drafter is not None else False
        self.target = make_cache(pair.target, self.device, pair.target_costs, cfg, backend=self.backend)
        check_lean_target(cfg, self.features, self.target)
        self.active: list[Sequence] = list(seqs)
        self.steps: list[Step] = []
        self.accepted_total = self.seq_steps = 0  # acceptance so far, for the policy
        self.t0 = 0.0
        self.paused = 0.0  # time the consumer spent between steps (e.g. drawing): not decoding, so off the clock
        self.policy_s = 0.0  # time in the policy since the last Step was built (its overhead, in the trace)
        self.util: UtilizationSampler | None = None
        self.load = LoadMeter()  # process CPU time and other processes' CPU time on the same clock
        self.shared = 0  # tokens every prompt begins with, prefilled once (set by `prefill`)

    def run(self):
        """`steps` with this run's CPU threads (engine/loadmeter.py `run_threads`: the budget less the CPUs other work
        keeps busy as it starts, never more than torch's count), torch's own count restored when it ends."""
        before = torch.get_num_threads()
        self.threads = run_threads(min(before, thread_budget().threads)) if self.device.type == "cpu" else before
        torch.set_num_threads(self.threads)
        try:
            yield from self.steps_of_run()
        finally:
            torch.set_num_threads(before)

    def steps_of_run(self):
        """Prefill, then one `step` per target pass until every sequence is finished; yields each Step.

        Inference mode is entered around each piece of work, never held across a `yield`: a generator that
        is suspended (or two streams iterated in lockstep) must not leave the consumer's thread in (or
        restore it to) the wrong grad mode."""
        with UtilizationSampler(self.device) as self.util:
            with torch.inference_mode():
                synchronize(self.device)
                self.t0 = time.perf_counter()
                self.load.resume()
                self.steps.append(self.prefill())
            while True:
                with torch.inference_mode():
                    self.active = self.drop_finished()
                with self.off_the_clock():
                    yield self.steps[-1]
                if not self.active:
                    self.load.pause()
                    break
                with torch.inference_mode():
                    self.steps.append(self.step())
                t = time.perf_counter()
                self.policy.observe(self.steps[-1])  # load-aware policies learn cost and acceptance
                self.policy_s += time.perf_counter() - t

    def prefill(self) -> Step:
        """The target reads every prompt and picks each sequence's first token; the drafter reads them too."""
        t_start = time.perf_counter()
        prompts = [s.prompt_ids for s in self.active]
        self.shared = shared_prefix(prompts) if self.cfg.share_prefix else 0  # a common prefix, prefilled once (kvcache.py)
        with StepTimer(self.device) as verify_timer:
            logits, hidden = self.target_pass(prompts)
        with StepTimer(self.device) as draft_timer:
            if self.drafter is not None:
                self.drafter.prefill(prompts, hidden, self.shared)
        logits = logits[:, -1]  # (B, vocab)
        cfg = self.cfg
        target_probs = probs_from_logits(logits, cfg.temperature or 1.0, cfg.top_p if cfg.temperature else 1.0)
        next_ids = greedy_ids(logits) if cfg.greedy else sample(target_probs, self.generator)
        p_next = target_probs.gather(1, next_ids[:, None]).squeeze(1)
        records = [self.plain_record(seq, token, p) for seq, token, p in zip(self.active, next_ids.tolist(), p_next.tolist())]
        return self.make_step("prefill", 0, sum(len(p) for p in prompts), t_start, draft_timer, verify_timer, 0.0, records)

    def step(self) -> Step:
        """One speculative step for the whole ragged batch (Leviathan et al. 2023, Algorithm 1)."""
        cfg, active, device = self.cfg, self.active, self.device
        t_start = time.perf_counter()
        depth = self.choose_depth()
        past_lengths = [len(s.tokens) for s in active]  # each row's length before this step, as ints

        # 1. draft: up to `depth` tokens per row (None: a plain step, or the drafter found nothing)
        draft: Draft | None = None
        with StepTimer(device) as draft_timer:
            if depth > 0:
                draft = self.drafter.propose([s.tokens for s in active], depth, self.draft_options(), self.generator)
        draft = self.cut_tree(draft)  # the policy may verify only a tree's best nodes
        depth = draft.depth if draft is not None else 0

        # 2. verify: [last token, d_1..d_k] (or the tree's N nodes) for every row in ONE target forward
        last = torch.tensor([[s.tokens[-1]] for s in active], dtype=torch.long, device=device)  # (B, 1)
        verify_ids = torch.cat([last, draft.ids], dim=1) if draft is not None else last  # (B, k+1) or (B, N+1)
        with StepTimer(device) as verify_timer:
            logits, hidden = self.target_pass(verify_ids, draft)  # (B, k+1, vocab), features (B, k+1, F) or None

        # 3. accept: the longest matching prefix/path (greedy) or accept/resample, then the target's own token
        path, rule = None, (cfg.greedy, cfg.temperature, cfg.top_p, self.generator, self.backend)  # the run's backend
        if draft is not None and draft.tree is not None:
            num_accepted, next_ids, p_chosen, path = verify_tree(logits, draft.tree, *rule)  # path: verify columns (B, D+1)
        else:
            num_accepted, next_ids, p_chosen = verify(logits, draft, *rule)
        records = self.append(draft, num_accepted, next_ids, p_chosen, path)
        wasted = self.wasted_flops(draft, num_accepted, past_lengths)

        # 4. roll back: each row keeps its own accepted length (a tree: its accepted path) in both caches
        new_lengths = torch.tensor([p + a + 1 for p, a in zip(past_lengths, (r.num_accepted for r in records))], device=device)
        if draft is not None:
            hidden = self.roll_back(draft, num_accepted, new_lengths, path, hidden)
        if self.drafter is not None:
            self.drafter.commit(Verified(draft, num_accepted, new_lengths, hidden))
        n_verified = draft.nodes if draft is not None else 0
        tree_nodes = n_verified if path is not None else None  # the shape verified: plain, a chain of k, a tree of n
        return self.make_step(
            "decode", depth, len(active) * (n_verified + 1), t_start, draft_timer, verify_timer, wasted, records, tree_nodes
        )

    # --- helpers: the target pass, the policy, records, waste, timing --------------------------------

    def target_pass(self, ids, draft: Draft | None = None):
        """The target's forward: over prompts (list of token lists: the prefill) or (B, n) verify ids; a tree
        draft's nodes attend to their ancestors only, at positions by depth (engine/decoding/verify_tree.py).
        Returns (logits, hidden) — hidden only when the drafter asked for the target's features."""
        if isinstance(ids, list):
            out = self.target.prefill(ids, self.pad_id, return_hidden=self.features, shared=self.shared)
        elif draft is not None and draft.tree is not None:
            tree, cache = draft.tree, self.target
            positions = cache.lengths[:, None] + tree.offsets  # (B, N+1)
            context = cache.valid[:, None].expand(-1, ids.shape[1], -1)  # (B, N+1, W)
            attend = torch.cat([context, tree.attention()], dim=2)  # (B, N+1, W+N+1)
            out = cache.forward_tree(ids, positions, attend, return_hidden=self.features)
        else:
            out = self.target.forward(ids, return_hidden=self.features)
        return out if self.features else (out, None)

    def roll_back(self, draft: Draft, num_accepted, new_lengths, path, hidden):
        """Step 4 in the target's cache; returns the verified features the drafter keeps, in sequence order.
        A chain keeps each row's first num_accepted + 1 columns; a tree its root and accepted path, packed."""
        if path is None:
            self.target.keep(new_lengths - 1)  # the target caches all but the pending last token
            return hidden
        path = path[:, : int(num_accepted.max()) + 1]  # (B, P): verify columns of root + accepted nodes
        keep = torch.arange(path.shape[1], device=path.device)[None, :] <= num_accepted[:, None]  # (B, P)
        self.target.keep_path(path, keep, draft.nodes + 1)
        if hidden is None:
            return None
        return hidden.gather(1, path[..., None].expand(-1, -1, hidden.shape[2]))  # (B, P, F)

    def choose_depth(self) -> int:
        """The policy's depth for this step, never more than the longest remaining sequence can use."""
        if self.drafter is None:
            return 0
        prev = self.steps[-1]
        ctx = PolicyContext(
            step=len(self.steps),
            batch=len(self.active),
            base_depth=self.cfg.depth,
            mean_accepted=self.accepted_total / self.seq_steps if self.seq_steps else None,
            last_depth=prev.depth,
            last_all_accepted=all(s.num_accepted == len(s.drafted) for s in prev.seqs if s.drafted),
            context=sum(len(s.tokens) - 1 for s in self.active) // len(self.active),  # the pending last token is not cached yet
            rows=tuple(s.index for s in self.active),
            remaining=tuple(s.remaining for s in self.active),
        )
        t = time.perf_counter()
        depth = self.policy.depth(ctx)
        self.policy_s += time.perf_counter() - t
        return min(depth, max(s.remaining for s in self.active) - 1)

    def draft_options(self) -> DecodeConfig:
        """The options the drafter drafts with: the run's; a chain where the policy chose one in a tree-drafting
        run; with the policy's confidence stop for a chain if it set one."""
        cfg = self.cfg
        if cfg.tree and not self.policy.tree_now:
            cfg = dataclasses.replace(cfg, tree_nodes=0, tree_topk=0)
        stop = self.policy.stop_below
        if cfg.tree or stop <= cfg.confidence_threshold:
            return cfg
        return dataclasses.replace(cfg, confidence_threshold=stop)

    def cut_tree(self, draft: Draft | None) -> Draft | None:
        """A drafted tree cut to the nodes the policy verifies (goodput's best n; the others keep it whole)."""
        if draft is None or draft.tree is None:
            return draft
        t = time.perf_counter()
        draft = draft.cut(*self.policy.tree_size(draft.tree))
        self.policy_s += time.perf_counter() - t
        return draft

    def append(self, draft: Draft | None, num_accepted, next_ids, p_chosen, path=None) -> list[SeqStep]:
        """Append each row's accepted drafts and the target's token to its sequence; one record per row."""
        accepted, next_list, p_rows = num_accepted.tolist(), next_ids.tolist(), p_chosen.tolist()  # host lists, once
        p_next, p_x = [row[-1] for row in p_rows], [row[:-1] for row in p_rows]
        if draft is None:
            return [self.plain_record(seq, t, p) for seq, t, p in zip(self.active, next_list, p_next)]
        ids, q_x = draft.ids.tolist(), draft.q_x.tolist()
        n_valid = [sum(row) for row in draft.valid.tolist()]
        trees = tree_records(draft.tree, path, num_accepted, self.pair.token_text, q_x, p_x) if path is not None else None
        records = []
        for r, seq in enumerate(self.active):
            a, n = accepted[r], n_valid[r]
            if trees is not None:  # the accepted path, then the best rejected child of its end (if any)
                shown = trees[r].shown()
                n = len(shown)
            else:
                shown = list(range(n))
            drafted = [
                DraftToken(id=ids[r][j], text=self.pair.token_text(ids[r][j]), draft_prob=q_x[r][j], target_prob=p_x[r][j], accepted=i < a)
                for i, j in enumerate(shown)
            ]
            emitted = seq.append([ids[r][j] for j in shown[:a]] + [next_list[r]], self.eos_ids)
            records.append(
                SeqStep(
                    seq=seq.index,
                    drafted=drafted,
                    num_accepted=a,
                    next_id=next_list[r],
                    next_text=self.pair.token_text(next_list[r]),
                    next_prob=p_next[r],
                    next_kind=next_kind(a, n),
                    emitted=emitted,
                    finished=seq.finished,
                    tree=trees[r] if trees is not None else None,
                )
            )
            if n:
                self.seq_steps += 1
                self.accepted_total += a
        return records

    def plain_record(self, seq: Sequence, token: int, prob: float) -> SeqStep:
        emitted = seq.append([token], self.eos_ids)
        return SeqStep(
            seq=seq.index,
            drafted=[],
            num_accepted=0,
            next_id=token,
            next_text=self.pair.token_text(token),
            next_prob=prob,
            next_kind="plain",
            emitted=emitted,
            finished=seq.finished,
        )

    def wasted_flops(self, draft: Draft | None, num_accepted, past_lengths) -> float:
        """FLOPs spent on rejected drafts: every verified position past the accepted prefix (n-gram padding
        included) cost the target a token, and every rejected real draft cost the drafter one."""
        if draft is None:
            return 0.0
        wasted = 0.0
        n_valid = [sum(row) for row in draft.valid.tolist()]
        # A tree: every node off the accepted path cost the target a token, and the drafter fed k entries per
        # level after the first ((forwards - 1) * k), of which at most num_accepted lay on the accepted path.
        tree_entries = (draft.forwards - 1) * draft.tree.topk if draft.tree is not None else 0
        for past, a, n in zip(past_lengths, num_accepted.tolist(), n_valid):
            context = past + a
            wasted += (draft.nodes - a) * self.pair.target_costs.token_flops(context)
            rejected = max(0, tree_entries - a) if draft.tree is not None else n - a
            wasted += rejected * self.drafter.token_flops(context)
        return wasted

    def drop_finished(self) -> list[Sequence]:
        """Finished sequences leave the batch and both caches: they stop costing work."""
        keep = [i for i, s in enumerate(self.active) if not s.finished]
        if len(keep) == len(self.active) or not keep:
            return [self.active[i] for i in keep]
        rows = torch.tensor(keep, dtype=torch.long, device=self.device)
        self.target.select(rows)
        if self.drafter is not None:
            self.drafter.select(rows)
        return [self.active[i] for i in keep]

    @contextlib.contextmanager
    def off_the_clock(self):
        t = time.perf_counter()
        self.load.pause()
        yield
        self.load.resume()
        self.paused += time.perf_counter() - t

    def make_step(
        self,
        kind: str,
        depth: int,
        tokens_per_pass: int,
        t_start: float,
        draft_timer: StepTimer,
        verify_timer: StepTimer,
        wasted: float,
        records: list[SeqStep],
        tree_nodes: int | None = None,
    ) -> Step:
        """The one place a Step is built: times relative to the run's clock, and the passes' counts."""
        t_end = time.perf_counter()
        target_flops, target_bytes = self.target.take_counts()
        draft_flops, draft_bytes = self.drafter.take_counts() if self.drafter is not None else (0.0, 0.0)
        t_start_s = 0.0 if kind == "prefill" else t_start - self.t0 - self.paused
        # no CUDA-graph capture happens inside a run: captures are warm-up at set-up (engine/model/graph_pool.py)
        draft_ms, verify_ms = draft_timer.ms, verify_timer.ms
        return Step(
            index=len(self.steps),
            kind=kind,
            depth=depth,
            batch=len(records),
            tokens_per_pass=tokens_per_pass,
            t_start_s=t_start_s,
            t_end_s=t_end - self.t0 - self.paused,
            draft_ms=draft_ms,
            verify_ms=verify_ms,
            overhead_ms=max(0.0, (t_end - t_start) * 1000 - draft_timer.ms - verify_timer.ms),
            target_flops=target_flops,
            draft_flops=draft_flops,
            target_bytes=target_bytes,
            draft_bytes=draft_bytes,
            flops_wasted=wasted,
            util_pct=self.util.mean_between(t_start, t_end),
            policy_ms=self._take_policy_ms(),
            seqs=records,
            tree_nodes=tree_nodes,
            **dict(zip(("sm_clock_mhz", "power_w"), self.util.gpu_between(t_start, t_end))),
        )

    def _take_policy_ms(self) -> float:
        ms, self.policy_s = self.policy_s * 1000, 0.0
        return ms

    def trace(self, drafter_name: str | None) -> Trace:
        pair, cfg, tok = self.pair, self.cfg, self.pair.tokenizer
        sequences = [
            {
                "prompt": s.prompt,
                "prompt_tokens": len(s.prompt_ids),
                "output_ids": s.generated,
                "text": tok.decode(s.generated, skip_special_tokens=True),
            }
            for s in self.seqs
        ]
        new_tokens = sum(len(s.generated) for s in self.seqs)
        wall_s = self.steps[-1].t_end_s
        summary = summarize(self.steps, new_tokens, wall_s, self.device.type, pair.dtype_name, cfg.speculative)
        summary.update(self.load.fields())  # optional fields: cpu_s, other_cpu_s, load_avg, cpus
        summary["threads"] = self.threads  # the CPU threads the run used
        return Trace(config=cfg.to_dict(), sequences=sequences, steps=self.steps, summary=summary, meta=self.meta(drafter_name))

    def meta(self, drafter_name: str | None) -> dict:
        caches = [c for c in (self.target, self.drafter_cache) if c is not None]
        meta = run_meta(self.pair, self.cfg, drafter_name, self.util.source, self.target.lean is not None, caches)
        warm = sum(cache.warm_hits for cache in caches)  # shared prefixes read warm (engine/model/prefix_cache.py)
        prompts = sum(cache.warm_prompt_hits for cache in caches)  # whole prompt batches read warm
        return meta | {"shared_prefix": self.shared, "warm_prefix": warm, "warm_prompts": prompts}

    @property
    def drafter_cache(self) -> RaggedCache | None:
        """The drafter's own KV cache (model and EAGLE drafters; the n-gram lookup has none)."""
        return getattr(self.drafter, "cache", None)
