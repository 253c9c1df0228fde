"""What every lesson's drawing shares: a chart and a table at the page's width, the settings a run chose from the
room (named), the warm-up shown apart, and the sentences lessons 1-3 build from the one rule's speedup.
"""

from __future__ import annotations

import streamlit as st

from app.lessons.kit import figures, knee, noise
from app.lessons.kit.noise import step_costs
from engine import verdict as rule


def show_chart(fig, key: str) -> None:
    st.plotly_chart(fig, width="stretch", key=key)


def show_table(rows: list[dict]) -> None:
    st.dataframe(rows, hide_index=True, height=figures.table_height(rows))


def noise_note(rows: list[dict]) -> None:
    if not any(figures.spread_of(r) for r in rows):
        st.caption("One run per cell: single runs are noisy, so read trends, not the second decimal.")


SETTING_NAMES = {  # what a chosen setting is, in the lesson's words (the glossary's "room")
    "k": "depth k",
    "depth": "depth k",
    "batch": "batch",
    "n": "switch N (speculate at N rows or fewer)",
    "tokens": "new tokens",
    "most": "deepest k the load-aware policies may draft",
    "mid": "middle batch (one guess a row fits the room)",
    "past": "largest batch (fixed k's verify pass at 4× the room)",
    "nodes": "tree nodes",
    "topk": "children per node",
}


def settings_note(m: dict, s: dict) -> None:
    """The settings the run resolved to (a setting left at 0 is chosen from this machine's pass curve), named."""
    c = m.get("chosen")
    if c:
        chosen = [f"{SETTING_NAMES.get(k, k)} {v}" for k, v in c.items() if k != "room"]
        from_curve = [SETTING_NAMES.get(k, k) for k, v in s.items() if v == 0 and k in c]
        st.caption(
            f"Settings of this run: {', '.join(chosen)}; this machine's room: {c['room']} tokens per pass"
            + (
                f" ({', '.join(from_curve)}: chosen from this machine's pass curve, because the setting was left at 0)."
                if from_curve
                else "."
            )
        )


NEARLY_FREE = knee.ROOM  # a pass within this factor of the one-token (or plain) pass counts as nearly free


def consistent(run: dict) -> dict:
    """A run's compare numbers with its step cost taken from the lanes' means (step_costs), so the speedup's
    reason and the verify figure use one statistic, and its speedup the median over rounds (noise.speedup)."""
    verify, step = step_costs(run)
    sp = noise.speedup(run) if "ar" in run else None
    return run["m"] | {"median_verify_ratio": verify, "step_cost_ratio": step} | ({"speedup": sp["value"]} if sp else {})


def speedup_words(run: dict) -> str:
    """'1.42× (rounds 1.30–1.55×; whole run, prefill included: 1.21×)': the speedup every chart, table and sentence of
    lessons 2 and 3 shows, decoding alone, with the whole-run figure beside it, labelled."""
    sp, whole = noise.speedup(run), noise.speedup(run, whole=True)
    if sp is None:
        return f"{run['m']['speedup']:.2f}× (one run each)"
    parts = [f"95% range {sp['lo']:.2f}–{sp['hi']:.2f}× over {sp['rounds']} rounds"] if sp["lo"] is not None else ["one round"]
    parts += [noise.far_text(run)] if sp["far"] else []
    parts += [f"whole run, prefill included: {whole['value']:.2f}×"] if whole and sp["decode"] else []
    parts += [] if sp["decode"] else ["whole run: this recording did not time decoding apart from the prompt's pass"]
    return f"{sp['value']:.2f}×" + (f" ({'; '.join(parts)})" if parts else "")


def verdict_words(run: dict) -> str:
    """'faster than plain by the rule' / 'slower …' / 'level with plain (within 3%)' / "can't tell with 3 rounds"."""
    sp = noise.speedup(run)
    if sp is None:
        return "one run each: can't tell"
    v = sp["verdict"]
    return {
        "faster": "faster than plain by the rule",
        "slower": "slower than plain by the rule",
        "level": f"level with plain (within {rule.MIN_GAP:.0%})",
    }.get(v.kind, f"can't tell with {v.rounds} round{'s' if v.rounds != 1 else ''}")


def step_cost_words(ratio: float | None, what: str = "a verify pass") -> str:
    """'a verify pass cost 1.12× a plain step (within 1.25×)' (whether that is nearly free depends on where the pass
    sits on the curve: curve_line), and a pass with more tokens that read below one plain step is never cheaper."""
    if ratio is None:
        return ""
    if ratio < 1:
        return f"{what} read {ratio:.2f}× a plain step: the same as a plain step within noise (a pass with more tokens is not cheaper)"
    free = f"within {NEARLY_FREE}×" if ratio <= NEARLY_FREE else f"above {NEARLY_FREE}×"
    return f"{what} cost {ratio:.2f}× a plain step ({free})"


def room_of(result: dict) -> int | None:
    """The room the run chose its settings from (its `chosen`), else read from its recorded curve, else None."""
    chosen, curve = result.get("chosen") or {}, result.get("curve")
    if chosen.get("room"):
        return int(chosen["room"])
    return knee.room_tokens(curve["tokens"], curve["ms"]) if curve else None


def chosen_words(m: dict) -> str | None:
    """The settings this run chose from the machine's pass curve, and the room they came from, in words."""
    chosen, curve = m.get("chosen") or {}, m.get("curve")
    room = room_of(m)
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


def context_note(name: str, m: dict, label: str) -> None:
    """The settings chosen from this machine's room. A live run's disturbance and its differences from the recording
    are drawn once, beside the recording (app/lessons/page_parts.py `show_against`, its label)."""
    words = chosen_words(m)
    if words:
        st.markdown(f"**This machine's room.** {words}")


def warmup_note(m: dict) -> None:
    warm = m.get("warmup")
    if warm:
        st.caption(
            "Warm-up (shown apart, never in a lane): each contender decoded once, a few tokens, before the timed rounds: "
            + ", ".join(f"{w['contender']} {w['s']:.2f} s" for w in warm)
            + "."
        )
