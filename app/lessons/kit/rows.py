"""Lessons 6 and 7's per-(batch, contender) tables: a row's decoding-alone rate and rounds, the table under their
charts, the ratio against plain decoding by the one rule, and the decode steps a lane kept. No streamlit.
"""

from __future__ import annotations

from app.lessons.kit import noise


def contenders(rows: list[dict]) -> list[str]:
    """Contender names in the order they were measured."""
    return list(dict.fromkeys(r["contender"] for r in rows))


def batches(rows: list[dict]) -> list[int]:
    return sorted({r["batch"] for r in rows})


def load_rate(r: dict) -> float:
    """A row's decoding-alone tokens/s (median of its runs); an older row's whole-run rate (it has no other)."""
    rate = r.get("decode_tokens_per_s")
    return rate if rate is not None else r["tokens_per_s"]


def load_runs(r: dict) -> dict | None:
    """A row's decoding-alone rates over its runs; an older row's whole-run rates."""
    return r.get("decode_tokens_per_s_runs") or r.get("tokens_per_s_runs")


def cell(rows: list[dict], batch: int, contender: str) -> dict | None:
    """The row of (batch, contender) in a per-(batch, contender) table (lessons 6 and 7), None if absent."""
    return next((r for r in rows if r["batch"] == batch and r["contender"] == contender), None)


def ratio(r: dict, base: dict) -> float:
    """r's speed over base's, the one number every table, chart and sentence shows: the one rule's ratio over
    their interleaved rounds (noise.judge), the ratio of their rates where they carry no rounds."""
    v = noise.judge(load_runs(r), load_runs(base))
    return v.ratio if v else load_rate(r) / load_rate(base)


def same_work(a: dict, b: dict) -> bool:
    """Did two contenders do the same work at one batch size: the same mean k and α (e.g. "off above batch 8" and
    "fixed k = 4" at batch 1, where the switch never acts)? Then they ran the same steps and differ only by noise."""
    return a["mean_depth"] == b["mean_depth"] and a.get("alpha") == b.get("alpha")


def load_table(rows: list[dict], plain: str) -> list[dict]:
    """One table row per (batch, contender): tokens/s (median, and every run), × plain decoding at that batch, time
    per output token of a request (TPOT), mean k, α."""
    table = []
    for b in batches(rows):
        base = cell(rows, b, plain)
        for name in contenders(rows):
            r = cell(rows, b, name)
            if r is None:
                continue
            runs = load_runs(r)
            table.append(
                {
                    "batch": b,
                    "policy": name,
                    "decoding tokens/s": round(load_rate(r), 1),
                    "× plain": round(ratio(r, base), 2) if base and load_rate(base) else None,
                    "runs (decoding tokens/s)": ", ".join(f"{v:.1f}" for v in runs["values"]) if runs else "one run",
                    "whole run tokens/s (prefill included)": round(r["tokens_per_s"], 1),
                    "TPOT ms": None if r.get("tpot_ms") is None else round(r["tpot_ms"], 1),
                    "mean k": None if r.get("mean_depth") is None else round(r["mean_depth"], 2),
                    "α": None if r.get("alpha") is None else round(r["alpha"], 2),
                    "against the next (the rule's ratio, 95% range)": _against_next(rows, b, name),
                }
            )
    return table


POWERS = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # batch sizes a lesson may choose from the curve


# --- 6. speculate by load ---------------------------------------------------------------------------
LOAD_TOKENS, LOAD_MAX, LOAD_ROUNDS = 12, 6, 3  # 12 new tokens a run: 16 took a live run past 20 s in a browser (2026-12-04)


PLAIN = "plain decoding"


RATE_KEYS = ("decode_tokens_per_s", "decode_tokens_per_s_runs", "tokens_per_s", "tokens_per_s_runs")  # decoding alone; whole run


SHAPE_KEYS = ("decode_tokens", "passes")  # the median run's decode pass shapes, for the H200 re-timing (app/lessons/retime.py)


ROW_KEYS = (*RATE_KEYS, "alpha", "tpot_ms", "other_cores", *SHAPE_KEYS)


# --- 7. width: a draft tree ------------------------------------------------------------------------------


def _against_next(rows: list[dict], batch: int, name: str) -> str:
    """For the batch's highest median: the rule's ratio against the next, as its verdict sentence states it."""
    w = next((w for w in winners(rows) if w["batch"] == batch), None)
    if not w or w["winner"] != name or w["verdict"] is None:
        return ""
    return f"× {w['runner_up']}: {w['verdict'].interval}"


MAX_STEPS = 512  # steps kept per lane (the schema's list cap, engine/checks.py SPEC_MAX_LIST)


def decode_steps(traces: list) -> list:
    return [st for t in traces for st in t.steps if st.kind == "decode"]


def decode_spread(lane: dict) -> dict | None:
    """A lane's decoding-alone rates over its runs; an older lane's whole-run rates (it has no other)."""
    return lane.get("decode_tokens_per_s_runs") or lane.get("tokens_per_s_runs")


def rate(lane: dict) -> float:
    sp = decode_spread(lane)
    return sp["median"] if sp else lane["summary"]["tokens_per_s"]


def winners(rows: list[dict]) -> list[dict]:
    """Per batch size: the contender with the highest median tokens/s, the runner-up, the one rule's verdict of the
    first against the second (noise.judge: None without rounds), whether it names the first the winner, and whether
    the two did the same work (same mean k and α: the same steps, so any gap is noise)."""
    out = []
    for b in batches(rows):
        ranked = sorted((r for r in rows if r["batch"] == b), key=load_rate, reverse=True)
        first = ranked[0]
        second = ranked[1] if len(ranked) > 1 else None
        v = noise.judge(load_runs(first), load_runs(second)) if second else None
        out.append(
            {
                "batch": b,
                "winner": first["contender"],
                "tokens_per_s": load_rate(first),
                "runner_up": second["contender"] if second else None,
                "runner_up_tokens_per_s": load_rate(second) if second else None,
                "verdict": v,
                "clear": bool(v and v.sign > 0),
                "same_work": bool(second and same_work(first, second)),
            }
        )
    return out


NAMED = {"tree": "the tree", "chain": "the chain"}  # a contender of lessons 6 and 7, in a sentence


def cell_contest(m: dict, a: str, b: str) -> tuple:
    """Contenders a and b at the largest batch of a per-(batch, contender) table, with their rounds."""
    batch = max(r["batch"] for r in m["rows"])
    return f"{NAMED.get(a, a)} at batch {batch}", NAMED.get(b, b), *(load_runs(cell(m["rows"], batch, x)) for x in (a, b))


def smallest_plain(m: dict) -> tuple[int, dict] | None:
    """(the smallest batch, plain decoding's row there) of a per-(batch, contender) table."""
    batch = min(r["batch"] for r in m["rows"])
    row = cell(m["rows"], batch, PLAIN)
    return (batch, row) if row else None


# --- the depth each policy chose, step by step -----------------------------------------------------------
def policies(rows: list[dict], plain: str = "plain decoding") -> list[str]:
    """The contenders that speculate (every one but plain decoding), in the order measured."""
    return [n for n in contenders(rows) if n != plain]
