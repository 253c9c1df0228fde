"""How lessons 1-3's measurements are drawn on the Lessons page (app/lessons/show.py's SHOW table points here): the
settings chosen from this machine's pass curve in words, a chart first, the numbers in a table under it, then the
conclusion computed from the same numbers (app/lessons/pass_conclusions.py). A live run beside other load, or whose
probe fell far below the recording's, is labelled so (noise.disturbed_live)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.lessons import conclusions, knee, pass_figures
from app.lessons.figures import table_height
from app.views import roofline

RECORDINGS = Path(__file__).resolve().parents[2] / "assets" / "lessons"


def _chart(fig, key: str) -> None:
    st.plotly_chart(fig, width="stretch", key=key)


def _table(rows: list[dict]) -> None:
    st.dataframe(rows, hide_index=True, height=table_height(rows))


def chosen_words(m: dict) -> str | None:
    """The settings this run chose from the machine's pass curve, and the room they came from, in words."""
    chosen, curve = m.get("chosen") or {}, m.get("curve")
    room = conclusions.room_of(m)
    if not room or not curve:
        return None
    text = knee.room_words(room, curve["tokens"], curve["ms"])
    if "largest" in chosen:
        text += f" This run timed passes of 1 to {chosen['largest']} tokens (a few times the room measured before it); lessons"
        text += " 2 and 3 choose their settings from the room these rows found."
    if "batch" in chosen:
        n1, n = chosen["depth"] + 1, chosen["batch"] * (chosen["depth"] + 1)
        text += (
            f" Chosen from it: depth k = {chosen['depth']} ({n1} tokens per verify pass at batch 1, "
            f"{'inside' if n1 <= room else 'past'} the room) and a large batch of {chosen['batch']} ({n} tokens per pass, "
            f"{n / room:.1f}× the room)."
        )
    elif "depth" in chosen:
        text += f" Chosen from it: depth k = {chosen['depth']}, so a verify pass carries {chosen['depth'] + 1} tokens, inside the room."
    return text


def _context(name: str, m: dict, label: str) -> None:
    """The settings chosen from this machine's room. A live run's disturbance and its differences from the recording
    are drawn once, beside the recording (app/lessons/page_parts.py `show_against`, its label)."""
    words = chosen_words(m)
    if words:
        st.markdown(f"**This machine's room.** {words}")


def _warmup(m: dict) -> None:
    warm = m.get("warmup")
    if warm:
        st.caption(
            "Warm-up (shown apart, never in a lane): each contender decoded once, a few tokens, before the timed rounds: "
            + ", ".join(f"{w['contender']} {w['s']:.2f} s" for w in warm)
            + "."
        )


def show_memory_bound(m: dict, s: dict, label: str = "") -> None:
    _context("memory_bound", m, label)
    _chart(pass_figures.memory_bound_figure(m, s, label), "lesson1_fig")
    _table(pass_figures.memory_bound_table(m))
    st.success("\n\n".join(conclusions.memory_bound_conclusion(m)))
    _chart(roofline.peak_share_figure(m["rows"], m["peak_bandwidth"], m["peak_flops"], m.get("ridge_tokens")), "lesson1_peaks")
    st.caption(
        f"The regime is read from the numbers: {roofline.REGIME_RULE}. The bandwidth and FLOP/s are SpecLab's "
        "counted bytes and FLOPs over the measured time, not hardware counters; a share above 100% means the "
        "quick probe's copy and matmul underestimate what this pass reaches (caches, a different kernel)."
    )


def show_more_flops(m: dict, s: dict, label: str = "") -> None:
    _context("more_flops", m, label)
    _chart(pass_figures.more_flops_figure(m, s, label), "lesson2_fig")
    _table(pass_figures.more_flops_table(m, s))
    _warmup(m)
    st.success(conclusions.more_flops_conclusion(m))
    seed = m["seed"]
    st.markdown(
        f"**Barrow's example: {seed['passes'][0]['tokens_per_pass']} tokens per pass, made two ways** (one "
        f"target pass each over a {seed['context']}-token context; {seed['rounds']} rounds alternating the two, "
        "median of 5 timed passes per round; FLOPs and bytes are the engine's counts, engine/costs.py)"
    )
    _table(
        [
            {
                "pass": p["label"],
                "ms (median)": round(p["ms"], 2),
                "rounds (ms)": ", ".join(f"{t:.1f}" for t in p["times_ms"]),
                "GFLOP": round(p["flops"] / 1e9, 3),
                "weight MB": round(p["weight_bytes"] / 1e6, 1),
                "KV MB": round(p["kv_bytes"] / 1e6, 2),
            }
            for p in seed["passes"]
        ]
    )
    st.info(conclusions.seed_conclusion(seed))


def show_past_the_ridge(m: dict, s: dict, label: str = "") -> None:
    _context("past_the_ridge", m, label)
    _chart(pass_figures.past_the_ridge_figure(m, s, label), "lesson3_fig")
    _table(pass_figures.past_the_ridge_table(m, s))
    _warmup(m)
    depth = int((m.get("chosen") or {}).get("depth") or s["depth"])
    with st.expander("Each run in words (verify cost, draft share)"):
        name = conclusions.drafter_label(m["drafter"])
        runs = sorted(m["runs"], key=lambda r: r["batch"])
        lines = [conclusions.ridge_run_line(name, r["batch"], r, depth) for r in runs]
        lines.append(conclusions.ridge_run_line("n-gram lookup, extractive prompts", runs[-1]["batch"], m["ngram"], depth))
        st.markdown("\n".join(lines))
    st.success("\n\n".join(conclusions.past_the_ridge_conclusion(m, depth)))
