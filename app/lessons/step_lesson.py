"""Lesson 0, "One speculative step": its experiment (one real step, beside plain decoding of the same prompt)
and the model its prediction is set against. No streamlit; the page part is app/lessons/step_page.py.

The recorded version is assets/lessons/step-through.json (scripts/record/record_lessons.py), a Trace whose
step is chosen by app/views/stepthrough.py `interesting_step`: one that keeps some drafts and rejects one.
"""

from __future__ import annotations

from app.common import measurement
from app.views import metrics, stepthrough
from engine import DecodeConfig, generate
from engine.bench.prompts import batch_prompts
from engine.costs import expected_tokens_per_step
from engine.drafters import drafter_name

STEP_DEPTH, STEP_TOKENS = 4, 16  # the step-through's run: batch 1, greedy, depth 4, 16 new tokens


def one_step_traces(pair) -> tuple:
    """(speculative, plain) traces of one held-out prompt at batch 1, greedy: the run the recorded step-through
    makes (the EAGLE head where the pair has one, else the draft model), and plain decoding of the same prompt."""
    drafter = "eagle" if drafter_name(pair, "eagle") else "model"
    prompts = batch_prompts("heldout", 1)
    spec = generate(pair, prompts, DecodeConfig(depth=STEP_DEPTH, drafter=drafter, max_new_tokens=STEP_TOKENS, seed=0))
    plain = generate(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=STEP_TOKENS))
    return spec, plain


def measure(spec, plain=None) -> dict:
    """The lesson's measurement of a speculative trace's chosen step (ValueError when it drafted nothing)."""
    index = stepthrough.interesting_step(spec)
    if index is None or spec.steps[index].seqs[0].tree is not None:
        raise ValueError("the run has no chain step that drafted: nothing to step through")
    return stepthrough.step_measurement(spec, index, plain)


def trace_label(trace) -> tuple[str, str, str]:
    """(machine, dtype, date) a recorded trace names."""
    probe = trace.meta.get("probe") or {}
    return (
        str(probe.get("device_name") or trace.meta.get("device_name") or trace.meta.get("device") or "machine not recorded"),
        str(trace.meta.get("dtype", "dtype not recorded")),
        str(trace.meta.get("recorded_at", "")),
    )


def record_of(trace) -> dict:
    """A recorded step-through trace as lesson 0's checked recording (MeasurementError / ValueError if unusable)."""
    machine, dtype, date = trace_label(trace)
    note = (
        f"a batch-1 greedy run, {trace.config.get('drafter')} drafter at depth {trace.config.get('depth')}; one step timed "
        "once on a shared machine whose load was not recorded: timings noisy"
    )
    return measurement.make_record("one_step", measure(trace), machine=machine, dtype=dtype, note=note, settings={}, date=date or None)


def one_step(pair, probe, s: dict) -> dict:
    spec, plain = one_step_traces(pair)
    return measure(spec, plain)


def one_step_models(m: dict, s: dict) -> list[tuple[str, float | None]]:
    """Leviathan's expected kept drafts with the run's α: E[tokens per step] − 1 = α(1 − α^k) ÷ (1 − α)."""
    alpha = m.get("alpha")
    expected = expected_tokens_per_step(alpha, m["k"]) - 1 if alpha is not None else None
    return [(f"Leviathan: expected kept drafts, E[tokens per step] − 1, with the run's α = {metrics.fmt(alpha)}", expected)]


def verdict(m: dict) -> str:
    """What the step shows, computed from its measurement: the tokens one pass gained, and whether the step took
    less time than the plain steps it replaced (one step, timed once: a first look, not a benchmark)."""
    gained, step = m["gained"], m["step_ms"]
    own = "bonus" if m["next_kind"] == "bonus" else "correction"
    out = (
        f"The target kept {m['accepted']} of {m['k']} drafts and added its own token (a {own}): {gained} token(s) "
        f"from one pass over {m['tokens_per_pass']} tokens."
    )
    if m.get("same_text") is True:
        out += " Plain decoding of the same prompt wrote the same text: lossless."
    elif m.get("same_text") is False:
        out += " Plain decoding wrote a different text here: a near-tie rounded differently (see 'Greedy and sampling')."
    plain = m.get("plain_step_ms")
    if plain is None:
        return out + " No plain step was measured beside it, so this run cannot say whether the step saved time."
    total, verify = gained * plain, m["verify_ms"] / plain
    cost = (
        f"cost {verify:.2f}× a whole plain step"
        if verify >= 1
        else f"read {verify:.2f}× a whole plain step, the same as one within noise (a pass with more tokens is not cheaper)"
    )
    if step < total:
        return out + (
            f" Plain decoding needs {gained} step(s) for them, {total:.1f} ms at {plain:.1f} ms each; this step took "
            f"{step:.1f} ms ({total / step:.2f}× less), because its one pass over {m['tokens_per_pass']} tokens {cost}. "
            "One step timed once: lessons 1 to 3 measure it properly."
        )
    return out + (
        f" Plain decoding needs {gained} step(s) for them, {total:.1f} ms at {plain:.1f} ms each; this step took "
        f"{step:.1f} ms, no less: drafting and verifying cost more than the plain steps they replaced. One step "
        "timed once: lessons 1 to 3 measure it properly."
    )
