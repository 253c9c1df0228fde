"""The decode loop: plain autoregressive and speculative decoding through one code path.

One iteration = one target forward pass for the whole ragged batch (gpt-fast's speculative_decode,
Leviathan et al. 2023 Algorithm 1, batched):
    # 1. draft   the drafter proposes k tokens per sequence (k from the depth policy; k = 0 is plain decoding)
    # 2. verify  the target scores [last token, d_1..d_k] for every sequence in ONE forward pass
    # 3. accept  greedy longest matching prefix, or accept/resample; plus the target's own next token
    # 4. roll back each sequence keeps its own accepted count in both KV caches; finished rows leave the batch
Each iteration is yielded as a `Step` (what was drafted/accepted, measured times, FLOPs, bytes) so the
app can animate the run live; `generate` collects them into a `Trace`.

All mutable state (caches, positions, RNG) lives inside one call: the model pair stays stateless and
can be shared by every session of the app.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .config import ConfigError, DecodeConfig, DrafterKind
from .drafters import Draft, EagleDrafter, ModelDrafter, NgramDrafter
from .hardware import StepTimer, UtilizationSampler, synchronize
from .kvcache import RaggedCache
from .models import ModelPair
from .policies import PolicyContext, make_policy
from .sampling import accept_greedy, accept_or_resample, probs_from_logits, sample
from .trace import DraftToken, SeqStep, Step, Trace, summarize


@dataclass
class Sequence:
    """Per-sequence state (nano-vllm style): the prompt, its tokens so far and whether it is done."""

    index: int
    prompt: str
    prompt_ids: list[int]
    max_new_tokens: int
    tokens: list[int] = field(default_factory=list)  # prompt + generated
    finished: bool = False

    def __post_init__(self):
        self.tokens = list(self.prompt_ids)

    @property
    def generated(self) -> list[int]:
        return self.tokens[len(self.prompt_ids) :]

    @property
    def remaining(self) -> int:
        return self.max_new_tokens - len(self.generated)

    def append(self, new: list[int], eos_ids: frozenset[int]) -> list[int]:
        """Append tokens, stopping at EOS or max_new_tokens; returns what was actually appended."""
        taken = []
        for token in new[: self.remaining]:
            taken.append(token)
            if token in eos_ids:
                self.finished = True
                break
        self.tokens.extend(taken)
        if self.remaining <= 0:
            self.finished = True
        return taken


def prepare_sequences(pair: ModelPair, prompts: list[str], cfg: DecodeConfig) -> list[Sequence]:
    """Validate the prompts against the model and encode them (chat template applied)."""
    if isinstance(prompts, str) or not isinstance(prompts, (list, tuple)):
        raise ConfigError("prompts must be a list of strings (one user message per sequence)")
    if not prompts:
        raise ConfigError("prompts is empty: give at least one prompt")
    seqs = []
    for i, prompt in enumerate(prompts):
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError(f"prompt {i + 1} is empty: every prompt needs some text")
        ids = pair.encode_prompt(prompt)
        if len(ids) < 2:
            raise ConfigError(f"prompt {i + 1} encodes to {len(ids)} token(s); at least 2 are needed")
        room = pair.max_context - len(ids) - cfg.depth - 1
        if room < 1:
            raise ConfigError(
                f"prompt {i + 1} is {len(ids)} tokens long; the model's context window is {pair.max_context} tokens"
            )
        if cfg.max_new_tokens > room:
            raise ConfigError(
                f"max_new_tokens={cfg.max_new_tokens} is beyond the context window: prompt {i + 1} has {len(ids)} "
                f"tokens of {pair.max_context}, so at most {room} new tokens fit (1..{room})"
            )
        seqs.append(Sequence(index=i, prompt=prompt, prompt_ids=ids, max_new_tokens=cfg.max_new_tokens))
    return seqs


def make_drafter(pair: ModelPair, cfg: DecodeConfig, pad_id: int):
    if not cfg.speculative:
        return None
    if cfg.drafter == DrafterKind.NGRAM.value:
        vocab = pair.target.get_output_embeddings().weight.shape[0]
        special = frozenset(getattr(pair.tokenizer, "all_special_ids", []) or [])
        return NgramDrafter(cfg.ngram_size, vocab, pair.device, special - pair.eos_ids)
    if cfg.drafter == DrafterKind.EAGLE.value:
        if pair.eagle is None:
            raise ConfigError("drafter='eagle' needs an EAGLE head for this target, but none is loaded: "
                              "use drafter='model' or 'ngram'")
        return EagleDrafter(pair.eagle, pair.device, pair.eagle_costs, pad_id)
    if pair.draft is None:
        raise ConfigError("drafter='model' needs a draft model, but this pair has none: use drafter='ngram'")
    return ModelDrafter(pair.draft, pair.device, pair.draft_costs, pad_id, vocab=pair.draft_vocab)


def drafter_name(pair: ModelPair, cfg: DecodeConfig) -> str | None:
    if not cfg.speculative:
        return None
    if cfg.drafter == DrafterKind.NGRAM.value:
        return f"n-gram prompt lookup (n <= {cfg.ngram_size})"
    if cfg.drafter == DrafterKind.EAGLE.value:
        return pair.eagle_name
    return pair.draft_name


class StepStream:
    """Iterate to get one `Step` per target forward; after the last one, `.trace` holds the run."""

    def __init__(self, pair: ModelPair, prompts: list[str], cfg: DecodeConfig):
        self.pair, self.cfg = pair, cfg
        self.seqs = prepare_sequences(pair, prompts, cfg)  # validate before any model work
        self.drafter_name = drafter_name(pair, cfg)
        self.trace: Trace | None = None
        # Live decoding state, exposed read-only for tests and introspection (set while iterating).
        self.target_cache: RaggedCache | None = None
        self.drafter = None
        self.active: list[Sequence] = []

    def __iter__(self):
        return _decode(self)


def generate_steps(pair: ModelPair, prompts: list[str], cfg: DecodeConfig) -> StepStream:
    """The run as a live stream of Steps (for animation); `.trace` is set when it is exhausted."""
    return StepStream(pair, prompts, cfg)


def generate(pair: ModelPair, prompts: list[str], cfg: DecodeConfig) -> Trace:
    """Decode `prompts` (a batch, one user message each) and return the full Trace."""
    stream = generate_steps(pair, prompts, cfg)
    for _ in stream:
        pass
    return stream.trace


def _decode(stream: StepStream):
    pair, cfg, seqs = stream.pair, stream.cfg, stream.seqs
    device = pair.device
    tok = pair.tokenizer
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else (min(pair.eos_ids) if pair.eos_ids else 0)
    eos_ids = pair.eos_ids if cfg.stop_at_eos else frozenset()
    generator = torch.Generator(device=device).manual_seed(cfg.seed)
    policy = make_policy(cfg)
    drafter = make_drafter(pair, cfg, pad_id)
    target = RaggedCache(pair.target, device, pair.target_costs)
    eagle = isinstance(drafter, EagleDrafter)  # the target hands its final hidden states to the drafter
    # ... and, for a head with EAGLE-3 fusion, those of some earlier layers too
    features = (pair.eagle.feature_layers or True) if eagle else False
    if eagle and target.lean is None:
        raise ConfigError("drafter='eagle' needs the lean forward (a plain Llama target, SPECLAB_LEAN not 0)")
    stream.target_cache, stream.drafter = target, drafter
    steps: list[Step] = []
    accepted_total = seq_steps = 0

    with torch.inference_mode(), UtilizationSampler(device) as util:
        synchronize(device)
        t0 = time.perf_counter()
        paused = 0.0  # time the consumer spent between steps (e.g. drawing): not decoding, so off the clock
        active = list(seqs)

        # Prefill: the target reads every prompt and picks each sequence's first token.
        with StepTimer(device) as verify_timer:
            if eagle:
                logits, hidden = target.prefill([s.prompt_ids for s in active], pad_id, return_hidden=features)
                logits = logits[:, -1]  # (B, vocab); hidden (B, W, H)
            else:
                logits = target.prefill([s.prompt_ids for s in active], pad_id)[:, -1]  # (B, vocab)
        with StepTimer(device) as draft_timer:
            if isinstance(drafter, ModelDrafter):
                drafter.prefill([s.prompt_ids for s in active])
            elif eagle:
                drafter.prefill([s.prompt_ids for s in active], hidden)
        target_probs = probs_from_logits(logits, cfg.temperature or 1.0, cfg.top_p if cfg.temperature else 1.0)
        next_ids = logits.argmax(-1) if cfg.greedy else sample(target_probs, generator)
        seq_records = []
        next_list, p_next = next_ids.tolist(), target_probs.gather(1, next_ids[:, None]).squeeze(1).tolist()
        for seq, token, prob in zip(active, next_list, p_next):
            emitted = seq.append([token], eos_ids)
            seq_records.append(_plain_record(pair, seq, token, prob, emitted))
        t_end = time.perf_counter()
        target_flops, target_bytes = target.take_counts()
        draft_flops, draft_bytes = drafter.cache.take_counts() if _has_model(drafter) else (0.0, 0.0)
        steps.append(
            Step(
                index=0, kind="prefill", depth=0, batch=len(active),
                tokens_per_pass=sum(len(s.prompt_ids) for s in active),
                t_start_s=0.0, t_end_s=t_end - t0 - paused,
                draft_ms=draft_timer.ms, verify_ms=verify_timer.ms,
                overhead_ms=max(0.0, (t_end - t0) * 1000 - draft_timer.ms - verify_timer.ms),
                target_flops=target_flops, draft_flops=draft_flops,
                target_bytes=target_bytes, draft_bytes=draft_bytes, flops_wasted=0.0,
                util_pct=util.mean_between(t0, t_end), seqs=seq_records,
            )
        )  # fmt: skip
        active = stream.active = _drop_finished(active, target, drafter)
        t_yield = time.perf_counter()
        yield steps[-1]
        paused += time.perf_counter() - t_yield

        while active:
            t_start = time.perf_counter()
            batch = len(active)
            prev = steps[-1]
            ctx = PolicyContext(
                step=len(steps), batch=batch, base_depth=cfg.depth if drafter else 0,
                mean_accepted=accepted_total / seq_steps if seq_steps else None,
                last_depth=prev.depth,
                last_all_accepted=all(s.num_accepted == len(s.drafted) for s in prev.seqs if s.drafted),
            )  # fmt: skip
            depth = min(policy.depth(ctx), max(s.remaining for s in active) - 1)
            past_lengths = [len(s.tokens) for s in active]

            # 1. draft
            draft: Draft | None = None
            with StepTimer(device) as draft_timer:
                if depth > 0:
                    draft = drafter.propose([s.tokens for s in active], depth, cfg.temperature, cfg.top_p, generator,
                                           cfg.confidence_threshold)
                    if draft.depth == 0:  # the n-gram drafter found nothing for any row
                        draft = None
            depth = draft.depth if draft is not None else 0

            # 2. verify: [last token, d_1..d_k] for every row in one target forward
            last = torch.tensor([[s.tokens[-1]] for s in active], dtype=torch.long, device=device)  # (B, 1)
            verify_ids = torch.cat([last, draft.ids], dim=1) if draft is not None else last  # (B, k+1)
            with StepTimer(device) as verify_timer:
                if eagle:
                    logits, hidden = target.forward(verify_ids, return_hidden=features)  # (B, k+1, vocab), (B, k+1, F)
                else:
                    logits = target.forward(verify_ids)  # (B, k+1, vocab)

            # 3. accept / resample
            if cfg.greedy:
                # p for the trace, at T = 1: only the chosen tokens' probabilities are needed, so normalise
                # with logsumexp instead of materialising a full (B, k+1, vocab) softmax.
                target_logz = torch.logsumexp(logits.float(), dim=-1, keepdim=True)  # (B, k+1, 1)
                target_probs = None
                if draft is not None:
                    num_accepted, next_ids = accept_greedy(draft.ids, logits, draft.valid)
                else:
                    num_accepted, next_ids = torch.zeros(batch, dtype=torch.long, device=device), logits[:, -1].argmax(-1)
            else:
                target_probs = probs_from_logits(logits, cfg.temperature, cfg.top_p)  # (B, k+1, vocab)
                if draft is not None:
                    num_accepted, next_ids = accept_or_resample(
                        draft.ids, draft.probs, target_probs, draft.valid, generator
                    )
                else:
                    num_accepted, next_ids = torch.zeros(batch, dtype=torch.long, device=device), sample(
                        target_probs[:, -1], generator
                    )
            rows = torch.arange(batch, device=device)
            # p of each drafted token at its position, and of the next token at position num_accepted: (B, k+1)
            tokens = torch.cat([draft.ids, next_ids[:, None]], 1) if draft is not None else next_ids[:, None]
            where = torch.cat([torch.arange(depth, device=device).expand(batch, depth), num_accepted[:, None]], 1)
            if target_probs is None:
                picked = logits[rows[:, None], where, tokens].float()  # (B, k+1) single elements, no copy of vocab
                p_chosen = torch.exp(picked - target_logz[rows[:, None], where, 0])
            else:
                p_chosen = target_probs[rows[:, None], where, tokens]
            p_next = p_chosen[:, -1]  # (B,)
            accepted_list, next_list, p_next_list = num_accepted.tolist(), next_ids.tolist(), p_next.tolist()
            if draft is not None:
                p_draft = p_chosen[:, :depth]  # (B, k)
                draft_ids, q_x, p_x, valid = (draft.ids.tolist(), draft.q_x.tolist(), p_draft.tolist(), draft.valid.tolist())

            # 4. append, then roll back both caches to each row's own accepted length
            seq_records, wasted = [], 0.0
            for r, seq in enumerate(active):
                a = accepted_list[r]
                if draft is None:
                    emitted = seq.append([next_list[r]], eos_ids)
                    seq_records.append(_plain_record(pair, seq, next_list[r], p_next_list[r], emitted))
                    continue
                n_valid = sum(valid[r])
                drafted = [
                    DraftToken(id=t, text=pair.token_text(t), draft_prob=q, target_prob=p, accepted=j < a)
                    for j, (t, q, p) in enumerate(zip(draft_ids[r][:n_valid], q_x[r][:n_valid], p_x[r][:n_valid]))
                ]
                emitted = seq.append(draft_ids[r][:a] + [next_list[r]], eos_ids)
                seq_records.append(
                    SeqStep(
                        seq=seq.index, drafted=drafted, num_accepted=a, next_id=next_list[r],
                        next_text=pair.token_text(next_list[r]), next_prob=p_next_list[r],
                        next_kind=_next_kind(a, n_valid), emitted=emitted, finished=seq.finished,
                    )
                )  # fmt: skip
                if n_valid:
                    seq_steps += 1
                    accepted_total += a
                # Rejected drafts (and n-gram padding) were verified for nothing; model drafts also cost a draft token.
                rejected_ctx = past_lengths[r] + a
                wasted += (depth - a) * pair.target_costs.token_flops(rejected_ctx)
                if _has_model(drafter):
                    wasted += (n_valid - a) * drafter.cache.costs.token_flops(rejected_ctx)
            if draft is not None:
                new_lengths = torch.tensor([p + a + 1 for p, a in zip(past_lengths, accepted_list)], device=device)
                target.keep(new_lengths - 1)  # the target caches all but the pending last token
                if isinstance(drafter, ModelDrafter):
                    drafter.commit(new_lengths)
                elif eagle:
                    drafter.commit(num_accepted, hidden)
            elif isinstance(drafter, ModelDrafter):
                drafter.advance(1)
            elif eagle:
                drafter.advance(hidden)

            t_end = time.perf_counter()
            target_flops, target_bytes = target.take_counts()
            draft_flops, draft_bytes = drafter.cache.take_counts() if _has_model(drafter) else (0.0, 0.0)
            steps.append(
                Step(
                    index=len(steps), kind="decode", depth=depth, batch=batch,
                    tokens_per_pass=batch * (depth + 1),
                    t_start_s=t_start - t0 - paused, t_end_s=t_end - t0 - paused,
                    draft_ms=draft_timer.ms, verify_ms=verify_timer.ms,
                    overhead_ms=max(0.0, (t_end - t_start) * 1000 - draft_timer.ms - verify_timer.ms),
                    target_flops=target_flops, draft_flops=draft_flops,
                    target_bytes=target_bytes, draft_bytes=draft_bytes, flops_wasted=wasted,
                    util_pct=util.mean_between(t_start, t_end), seqs=seq_records,
                )
            )  # fmt: skip
            active = stream.active = _drop_finished(active, target, drafter)
            t_yield = time.perf_counter()
            yield steps[-1]
            paused += time.perf_counter() - t_yield

        wall_s = steps[-1].t_end_s

    sequences = [
        {
            "prompt": s.prompt,
            "prompt_tokens": len(s.prompt_ids),
            "output_ids": s.generated,
            "text": tok.decode(s.generated, skip_special_tokens=True),
        }
        for s in seqs
    ]
    new_tokens = sum(len(s.generated) for s in seqs)
    summary = summarize(steps, new_tokens, wall_s, device.type, pair.dtype_name, cfg.speculative)
    stream.trace = Trace(config=cfg.to_dict(), sequences=sequences, steps=steps, summary=summary, meta=_meta(pair, cfg, stream, util))


def _has_model(drafter) -> bool:
    """Drafters that run a network with its own KV cache (and so cost FLOPs and bytes)."""
    return isinstance(drafter, (ModelDrafter, EagleDrafter))


def _next_kind(num_accepted: int, num_drafted: int) -> str:
    """The target's own token is a bonus after a full acceptance, a correction after a rejection."""
    if num_drafted == 0:
        return "plain"
    return "bonus" if num_accepted == num_drafted else "correction"


def _plain_record(pair: ModelPair, seq: Sequence, token: int, prob: float, emitted: list[int]) -> SeqStep:
    return SeqStep(
        seq=seq.index, drafted=[], num_accepted=0, next_id=token, next_text=pair.token_text(token),
        next_prob=prob, next_kind="plain", emitted=emitted, finished=seq.finished,
    )  # fmt: skip


def _drop_finished(active: list[Sequence], target: RaggedCache, drafter) -> list[Sequence]:
    """Finished sequences leave the batch and both caches: they stop costing work."""
    keep = [i for i, s in enumerate(active) if not s.finished]
    if len(keep) == len(active):
        return active
    if keep:
        rows = torch.tensor(keep, dtype=torch.long, device=target.device)
        target.select(rows)
        if _has_model(drafter):
            drafter.select(rows)
    return [active[i] for i in keep]


def _meta(pair: ModelPair, cfg: DecodeConfig, stream: StepStream, util: UtilizationSampler) -> dict:
    import transformers

    from .hardware import device_name

    return {
        "device": pair.device.type,
        "device_name": device_name(pair.device),
        "dtype": pair.dtype_name,
        "target_name": pair.target_name,
        "draft_name": stream.drafter_name,
        "target_params": sum(p.numel() for p in pair.target.parameters()),
        "draft_params": _draft_params(pair, cfg),
        "util_source": util.source,
        "forward": "speclab lean Llama (engine/fastllama.py)" if stream.target_cache.lean is not None else "transformers",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def _draft_params(pair: ModelPair, cfg: DecodeConfig) -> int:
    if not cfg.speculative:
        return 0
    if cfg.drafter == "model" and pair.draft is not None:
        return sum(p.numel() for p in pair.draft.parameters())
    if cfg.drafter == "eagle" and pair.eagle is not None:
        return pair.eagle.params  # the head's own weights (it borrows the target's embedding and head)
    return 0
