"""Step and Trace: what one decoding run did, step by step, and the summary the app and benches read.

A `Step` is one iteration of the decode loop for the whole (ragged) batch: one target forward pass,
the draft forwards that fed it, and per sequence what was drafted, accepted, rejected and emitted.
A `Trace` is the run: its config, the sequences, the steps and `summary` (field names fixed by
DESIGN.md §3). Traces are saved as versioned JSON ("speclab.trace/1"); anything else is refused
with a clear `TraceError` — traces are data, never executed or unpickled.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field

SCHEMA = "speclab.trace/1"


class TraceError(ValueError):
    """A trace file that is missing, malformed or of an unknown schema."""


@dataclass
class DraftToken:
    id: int
    text: str
    draft_prob: float  # q(x): the drafter's probability of the token it proposed (1.0 for n-gram)
    target_prob: float  # p(x): the target's probability of the same token at the same position
    accepted: bool

    @property
    def accept_prob(self) -> float:
        """min(1, p/q): the chance that sampling-mode verification keeps this token."""
        return 1.0 if self.draft_prob <= 0 else min(1.0, self.target_prob / self.draft_prob)


@dataclass
class SeqStep:
    seq: int  # index of the sequence in the prompt list
    drafted: list[DraftToken]
    num_accepted: int
    next_id: int  # the target's own token: a correction after a rejection, a bonus after full acceptance
    next_text: str
    next_prob: float
    next_kind: str  # "correction" | "bonus" | "plain" (no draft this step)
    emitted: list[int]  # ids appended to the sequence this step (truncated at EOS / max_new_tokens)
    finished: bool

    @property
    def num_rejected(self) -> int:
        return len(self.drafted) - self.num_accepted


@dataclass
class Step:
    index: int
    kind: str  # "prefill" | "decode"
    depth: int  # k used this step (0 for plain steps)
    batch: int  # sequences in the pass
    tokens_per_pass: int  # tokens the target processed in its one forward: batch * (depth + 1)
    t_start_s: float  # seconds since the run started
    t_end_s: float
    draft_ms: float
    verify_ms: float
    overhead_ms: float  # engine work outside model forwards (acceptance, cache rollback, bookkeeping)
    target_flops: float
    draft_flops: float
    target_bytes: float
    draft_bytes: float
    flops_wasted: float  # spent on rejected draft tokens, in both models
    util_pct: float | None = None  # coarse gauge: NVML GPU utilisation or psutil CPU utilisation
    policy_ms: float = 0.0  # time the depth policy took to choose k (and to learn from the previous step)
    seqs: list[SeqStep] = field(default_factory=list)

    @property
    def step_ms(self) -> float:
        return (self.t_end_s - self.t_start_s) * 1000.0

    @property
    def flops(self) -> float:
        return self.target_flops + self.draft_flops

    @property
    def bytes(self) -> float:
        return self.target_bytes + self.draft_bytes


@dataclass
class Trace:
    config: dict
    sequences: list[dict]  # {prompt, prompt_tokens, output_ids, text}
    steps: list[Step]
    summary: dict
    meta: dict  # device, dtype, model names, drafter name, hardware peaks, versions

    @property
    def output_ids(self) -> list[list[int]]:
        return [s["output_ids"] for s in self.sequences]

    @property
    def texts(self) -> list[str]:
        return [s["text"] for s in self.sequences]

    # --- JSON -------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "config": self.config,
            "meta": self.meta,
            "sequences": self.sequences,
            "steps": [asdict(s) for s in self.steps],
            "summary": self.summary,
        }

    def to_json(self, path: str | os.PathLike) -> None:
        """Write atomically: a temp file in the same folder, then rename, so nothing is half-written."""
        path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".trace-", suffix=".json", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.to_dict(), f, allow_nan=False, default=_json_default)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    @classmethod
    def from_dict(cls, data) -> Trace:
        if not isinstance(data, dict):
            raise TraceError("not a SpecLab trace: the JSON top level must be an object")
        schema = data.get("schema")
        if schema != SCHEMA:
            raise TraceError(f"unsupported trace schema {schema!r}: this SpecLab reads {SCHEMA!r}")
        missing = [k for k in ("config", "sequences", "steps", "summary") if k not in data]
        if missing:
            raise TraceError(f"malformed trace: missing {', '.join(missing)}")
        try:
            steps = []
            for raw in data["steps"]:
                raw = dict(raw)
                seqs = []
                for s in raw.pop("seqs", []):
                    s = dict(s)
                    s["drafted"] = [DraftToken(**d) for d in s.get("drafted", [])]
                    seqs.append(SeqStep(**s))
                steps.append(Step(**raw, seqs=seqs))
            sequences = [dict(s) for s in data["sequences"]]
            for s in sequences:
                if not isinstance(s.get("output_ids"), list):
                    raise TraceError("malformed trace: a sequence has no output_ids list")
            if not isinstance(data["summary"], dict) or not isinstance(data["config"], dict):
                raise TraceError("malformed trace: config and summary must be objects")
        except TraceError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise TraceError(f"malformed trace: {exc}") from None
        return cls(
            config=data["config"], sequences=sequences, steps=steps, summary=data["summary"], meta=data.get("meta", {})
        )

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> Trace:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            raise TraceError(f"trace file not found: {path}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise TraceError(f"not a SpecLab trace: {path} is not valid JSON ({exc})") from None
        return cls.from_dict(data)

    @classmethod
    def from_json_bytes(cls, raw: bytes) -> Trace:
        try:
            data = json.loads(raw.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise TraceError(f"not a SpecLab trace: not valid JSON ({exc})") from None
        return cls.from_dict(data)


def _json_default(obj):
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    raise TypeError(f"cannot serialise {type(obj).__name__} in a trace")


@dataclass
class AcceptanceCounts:
    """Raw acceptance counts over decode steps (counts add up across runs; ratios do not)."""

    drafted: int = 0  # draft tokens proposed
    accepted: int = 0  # draft tokens accepted
    rejections: int = 0  # sequence-steps that ended in a rejection
    seq_steps: int = 0  # sequence-steps that drafted anything
    pos_hits: list[int] = field(default_factory=list)  # per draft position: accepted
    pos_tries: list[int] = field(default_factory=list)  # per draft position: drafted


def acceptance_counts(steps: list[Step]) -> AcceptanceCounts:
    c = AcceptanceCounts()
    for step in steps:
        if step.kind != "decode":
            continue
        for seq in step.seqs:
            if not seq.drafted:
                continue
            c.seq_steps += 1
            c.drafted += len(seq.drafted)
            c.accepted += seq.num_accepted
            c.rejections += 1 if seq.num_accepted < len(seq.drafted) else 0
            for i, tok in enumerate(seq.drafted):
                while len(c.pos_tries) <= i:
                    c.pos_tries.append(0)
                    c.pos_hits.append(0)
                c.pos_tries[i] += 1
                c.pos_hits[i] += 1 if tok.accepted else 0
    return c


def summarize(steps: list[Step], new_tokens: int, wall_s: float, device: str, dtype: str, speculative: bool) -> dict:
    """The run summary; field names are the contract of DESIGN.md §3."""
    c = acceptance_counts(steps)
    drafted, accepted, rejections, seq_steps = c.drafted, c.accepted, c.rejections, c.seq_steps
    pos_hits, pos_tries = c.pos_hits, c.pos_tries
    has_drafts = speculative and drafted > 0
    summary = {
        "new_tokens": new_tokens,
        "wall_s": wall_s,
        "tokens_per_s": new_tokens / wall_s if wall_s > 0 else 0.0,
        "target_forwards": len(steps),
        "device": device,
        "dtype": dtype,
        "acceptance_rate": accepted / drafted if has_drafts else None,
        "alpha": accepted / (accepted + rejections) if has_drafts and accepted + rejections > 0 else None,
        "mean_accepted": accepted / seq_steps if has_drafts else None,
        "tokens_per_step": accepted / seq_steps + 1 if has_drafts else None,
        "per_position_acceptance": [h / t for h, t in zip(pos_hits, pos_tries)] if has_drafts else None,
        "drafted_tokens": drafted,
        "accepted_tokens": accepted,
        "flops": sum(s.flops for s in steps),
        "flops_wasted": sum(s.flops_wasted for s in steps),
        "bytes": sum(s.bytes for s in steps),
        "draft_ms": sum(s.draft_ms for s in steps),
        "verify_ms": sum(s.verify_ms for s in steps),
        "overhead_ms": sum(s.overhead_ms for s in steps),
    }
    for key, value in summary.items():
        if isinstance(value, float) and not math.isfinite(value):
            summary[key] = None
    return summary
