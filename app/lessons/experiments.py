"""The Lessons' experiments: what each one measures, its settings, and the prediction a student makes first.

Each experiment takes (pair, probe, settings) and returns a *measurement*: plain numbers checked by
app/common/measurement.py, the same dict scripts/record/record_lessons.py records under assets/lessons/. Its settings
are Knobs the page binds to the URL; its Prediction names the number a student guesses before the run,
how that number is read from the measurement, and the models (Leviathan et al. 2023, Theorem 3.8, or the
roofline) it is set against. No streamlit here: the page (app/lessons/lessons.py) draws, the recording
script runs these same functions.
"""

from __future__ import annotations

from app.lessons import conclusions, figures, knee, load, pass_conclusions, pass_figures
from app.lessons.experiment_kit import Claim, Experiment, Knob, Prediction, _leviathan_models, _leviathan_of
from app.lessons.load import cell, load_runs
from app.lessons.load_lessons import (
    PLAIN,
    WIDTH_BATCHES,
    WIDTH_CONTENDERS,
    WIDTH_DEPTH,
    WIDTH_PROMPTS,
    WIDTH_ROUNDS,
    WIDTH_TOKENS,
    adaptive,
    by_load,
    gate_models,
    gate_ratio,
    load_leviathan,
    load_models,
    load_speedup,
    turn_it_off,
    width,
)
from app.lessons.noise import rate_runs
from app.lessons.pass_conclusions import per_token
from app.lessons.pass_lessons import (
    LARGEST,
    large_batch_speedup,
    memory_bound,
    more_flops,
    operations_models,
    pass_ratio,
    past_the_ridge,
    read_tokens,
    roofline_ratio,
)
from app.lessons.runs import LARGE_BATCHES
from app.lessons.step_lesson import STEP_DEPTH, one_step, one_step_models
from app.lessons.switch import SWITCH_BATCHES, always_on_speedup
from app.lessons.width import has_room as width_has_room
from app.lessons.width import width_models, width_ratio

__all__ = [
    "EXPERIMENTS",
    "PLAIN",
    "WIDTH_CONTENDERS",
    "WIDTH_DEPTH",
    "WIDTH_PROMPTS",
    "WIDTH_ROUNDS",
    "WIDTH_TOKENS",
    "Experiment",
    "Knob",
    "Prediction",
    "width",
]


# --- the claims, as data: where each contender's rounds are in a measurement ---------------------------
def _lanes(a: str, b: str, key=lambda m: m):
    """(a's rounds, b's rounds) of two lanes of one run (`key` finds the run): decoding alone where recorded."""
    return lambda m: (rate_runs(key(m)[a])[0], rate_runs(key(m)[b])[0])


def _by_batch(i: int):
    return lambda m: sorted(m["runs"], key=lambda r: r["batch"])[i]


def _cells(a, b, batch):
    """Two rows of a per-(batch, contender) table (lessons 6 and 7): a, b, batch read from the measurement."""
    return lambda m: tuple(load_runs(cell(m["rows"], batch(m), name(m) if callable(name) else name)) for name in (a, b))


def _pass_past_room(m: dict) -> tuple[dict, dict]:
    """Lesson 1: the pass at four times the room, and the one-token pass, in ms per round."""
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    past = next(r for r in rows if r["tokens_per_pass"] == read_tokens(m))
    return past["ms_runs"], rows[0]["ms_runs"]


def _phase(lane: str, phase: str):
    return lambda m: m["phases"][lane][phase]


def _fixed(m: dict) -> str:
    return f"fixed k = {m['chosen']['k']}"


def _table(m: dict) -> str:
    return next(r["contender"] for r in m["rows"] if r["contender"].startswith("batch table"))


CLAIMS = {
    "memory_bound": (
        Claim(
            "Past the room every extra token costs real time",
            "the pass at 4× the room",
            "a one-token pass",
            "batch 1",
            _pass_past_room,
            1,
            lead=True,
            costs=True,
            metric="ms per pass",
            times=knee.ROOM,
        ),
    ),
    "more_flops": (Claim("More FLOPs, yet faster", "speculation", "plain decoding", "batch 1", _lanes("spec", "ar"), 1, lead=True),),
    "past_the_ridge": (
        Claim(
            "Inside the room speculation pays", "speculation", "plain decoding", "batch 1", _lanes("spec", "ar", _by_batch(0)), 1, lead=True
        ),
        Claim(
            "Past the room the verify pass costs real time",
            "speculation (model drafter)",
            "plain decoding",
            "the large batch",
            _lanes("spec", "ar", _by_batch(-1)),
            -1,
            lead=True,
        ),
        Claim(
            "Cheap drafts accepted often still pay past the room",
            "n-gram lookup",
            "plain decoding",
            "the large batch, extractive prompts",
            _lanes("spec", "ar", lambda m: m["ngram"]),
            1,
            lead=True,
        ),
    ),
    "turn_it_off": (
        Claim(
            "Past the knee, always-on speculation costs",
            "always-on",
            "plain decoding",
            "the full batch",
            lambda m: (_phase("on", "full")(m), _phase("ar", "full")(m)),
            -1,
            lead=True,
        ),
        Claim(
            "As rows finish, the switch's speculation pays",
            "the switch",
            "plain decoding",
            "N rows or fewer",
            lambda m: (_phase("off", "shrunk")(m), _phase("ar", "shrunk")(m)),
            1,
            lead=True,
        ),
    ),
    "adaptive": (
        Claim(
            "Stopping where unsure costs nothing",
            "the gated run",
            "drafting all k",
            "the larger batch",
            _lanes("gated", "fixed", lambda m: m["batches"][-1]),
            0,
            lead=True,
        ),
        Claim(
            "Stopping where unsure pays",
            "the gated run",
            "drafting all k",
            "batch 1",
            _lanes("gated", "fixed", lambda m: m["batches"][0]),
            1,
        ),
        Claim(
            "…and at a larger batch",
            "the gated run",
            "drafting all k",
            "the larger batch",
            _lanes("gated", "fixed", lambda m: m["batches"][-1]),
            1,
        ),
    ),
    "by_load": (
        Claim(
            "Past the knee, fixed depth loses",
            "fixed k",
            "plain decoding",
            "the largest batch",
            _cells(_fixed, PLAIN, lambda m: m["chosen"]["past"]),
            -1,
            lead=True,
        ),
        Claim(
            "A batch table from the room keeps up with plain there",
            "the batch table",
            "plain decoding",
            "the largest batch",
            _cells(_table, PLAIN, lambda m: m["chosen"]["past"]),
            0,
            lead=True,
        ),
    ),
    "width": (
        Claim(
            "Inside the room a tree is no slower than a chain",
            "the tree",
            "the chain",
            "batch 1",
            _cells("tree", "chain", lambda m: 1),
            0,
            lead=True,
            applies=lambda m: None if width_has_room(m) else "this machine's room fits no tree wider than the chain",
        ),
        Claim(
            "Past the knee width costs",
            "the tree",
            "the chain",
            "the large batch",
            _cells("tree", "chain", lambda m: m["chosen"]["batch"]),
            -1,
            lead=True,
        ),
    ),
}


# --- the table the page reads -------------------------------------------------------------------------
DEPTHS = tuple(range(1, 9))
CURVE_HELP = "0: chosen from this machine's pass curve (app/lessons/knee.py)"
EXPERIMENTS = {  # the names lessons/*.md use in their front matter ("experiment: memory_bound")
    "memory_bound": Experiment(
        memory_bound,
        (
            Knob("l1_context", "Context already in the KV cache (tokens)", (64, 150, 512, 1024), 150),
            Knob("l1_largest", "Largest pass (tokens)", LARGEST, 0, CURVE_HELP + ": twice the pass it reads past the room, at least 16"),
        ),
        Prediction(
            "A pass carrying four times this machine's room (the most tokens a pass carries at about the cost of one) costs "
            "how many times the time of a 1-token pass?",
            "e.g. 4",
            pass_ratio,
            roofline_ratio,
        ),
        verdict=lambda m, s: pass_conclusions.memory_bound_conclusion(m),
        table=lambda m, s: pass_figures.memory_bound_table(m),
        claims=CLAIMS["memory_bound"],
    ),
    "more_flops": Experiment(
        more_flops,
        (
            Knob("l2_depth", "Speculation depth k", (0, *DEPTHS), 0, CURVE_HELP + ": the deepest draft whose verify pass fits in the room"),
            Knob("l2_tokens", "New tokens", (16, 32, 64), 32),
        ),
        Prediction(
            "Per decoded token (decoding alone: the prompt's pass left out), speculative decoding does how many times "
            "the FLOPs of plain decoding?",
            "e.g. 0.8",
            lambda m, s: (per_token(m) or {}).get("flops"),
            operations_models,
        ),
        leviathan=lambda m, s: _leviathan_of(m["m"], m),
        verdict=lambda m, s: [pass_conclusions.more_flops_conclusion(m)],
        table=pass_figures.more_flops_table,
        claims=CLAIMS["more_flops"],
    ),
    "past_the_ridge": Experiment(
        past_the_ridge,
        (
            Knob(
                "l3_depth",
                "Speculation depth k",
                (0, *DEPTHS),
                0,
                CURVE_HELP + ": the deepest draft whose batch-1 verify fits the room",
            ),
            Knob(
                "l3_batch",
                "Large batch",
                (0, *LARGE_BATCHES),
                0,
                CURVE_HELP + ": the smallest batch whose verify pass carries at least four times the room",
            ),
            Knob("l3_tokens", "New tokens per sequence (twice this at batch 1)", (8, 12, 16, 24, 32), 12),
        ),
        Prediction(
            "The speedup of speculation over plain decoding, decoding alone, at the large batch (its verify pass past this "
            "machine's room)?",
            "e.g. 1.5",
            large_batch_speedup,
            lambda m, s: _leviathan_models(m["runs"][-1]["m"]),
        ),
        needs=("eagle", "model"),
        leviathan=lambda m, s: _leviathan_of(m["runs"][-1]["m"], m["runs"][-1]),
        verdict=lambda m, s: pass_conclusions.past_the_ridge_conclusion(m, int(s.get("depth") or 0)),
        table=pass_figures.past_the_ridge_table,
        claims=CLAIMS["past_the_ridge"],
    ),
    "turn_it_off": Experiment(
        turn_it_off,
        (
            Knob(
                "l4_batch",
                "Batch size",
                (0, *SWITCH_BATCHES),
                0,
                CURVE_HELP + ": the smallest of 4 and 8 whose verify pass carries 8× the room, else 8",
            ),
            Knob("l4_n", "Off above batch N", (0, 1, 2, 4, 8), 0, CURVE_HELP + ": the most rows whose verify pass fits the room"),
            Knob("l4_depth", "Speculation depth k", (0, 1, 2, 3, 4), 0, CURVE_HELP + ": the deepest one-row draft inside the room"),
            Knob("l4_tokens", "New tokens per sequence (the longest answer)", (32, 48, 64), 48),
        ),
        Prediction(
            "The speedup of always-on speculation (n-gram lookup) over plain decoding, decoding alone over the whole run, "
            "at this lesson's batch (chosen from this machine's room)?",
            "e.g. 1.2",
            always_on_speedup,
            lambda m, s: _leviathan_models(m["m"]),
        ),
        leviathan=lambda m, s: _leviathan_of(m["m"], {"ar": m["ar"], "spec": m["on"]}),
        verdict=lambda m, s: conclusions.turn_it_off_conclusion(m, s)[:-1],
        table=figures.turn_it_off_table,
        claims=CLAIMS["turn_it_off"],
    ),
    "adaptive": Experiment(
        adaptive,
        (
            Knob("l5_depth", "Speculation depth k", (0, *range(2, 9)), 0, CURVE_HELP + ": the deepest one-row draft inside the room"),
            Knob("l5_conf", "Stop drafting below joint confidence", (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9), 0.3),
        ),
        Prediction(
            "At batch 1, the gated run's tokens/s ÷ the always-draft-k run's (decoding alone)?", "e.g. 1.1", gate_ratio, gate_models
        ),
        needs=("eagle", "model"),
        leviathan=lambda m, s: _leviathan_of(m["batches"][0]["m_gated"]),
        verdict=lambda m, s: [conclusions.adaptive_conclusion(m, int(s.get("depth") or 0))],
        table=figures.adaptive_table,
        claims=CLAIMS["adaptive"],
    ),
    "by_load": Experiment(
        by_load,
        (Knob("l6_k", "Fixed depth k", (0, *DEPTHS), 0, CURVE_HELP + ": the deepest one-row draft inside the room (at most 3)"),),
        Prediction(
            "The speedup of fixed depth k over plain decoding (decoding alone) at the largest batch (1.0 = the same speed)?",
            "e.g. 1.3",
            load_speedup,
            load_models,
        ),
        needs=("eagle", "model"),
        leviathan=load_leviathan,
        verdict=lambda m, s: [x for x in (load.room_line(m),) if x] + load.depth_lines(m) + load.conclusion(m["rows"]),
        table=lambda m, s: load.load_table(m["rows"], PLAIN),
        claims=CLAIMS["by_load"],
    ),
    "width": Experiment(
        width,
        (
            Knob("l7_nodes", "Tree nodes", (0, 4, 6, 8, 16, 24), 0, CURVE_HELP + ": the widest tree whose one-row pass fits the room"),
            Knob("l7_topk", "Children per node (top-k)", (0, 2, 3, 4, 6), 0, "0: half the tree's nodes, 2 to 4"),
            Knob(
                "l7_batch", "Large batch", (0, *WIDTH_BATCHES), 0, CURVE_HELP + ": the smallest batch whose tree pass carries 4× the room"
            ),
        ),
        Prediction(
            "At the large batch, the tree's tokens/s ÷ the chain's (decoding alone; 1.0 = the same speed)?",
            "e.g. 1.2",
            width_ratio,
            width_models,
        ),
        needs=("eagle", "model"),
        verdict=lambda m, s: conclusions.width_conclusion(m),
        table=lambda m, s: conclusions.width_table(m),
        claims=CLAIMS["width"],
    ),
    "one_step": Experiment(  # lesson 0: no knobs; its recording is the step-through trace (app/lessons/step_page.py)
        one_step,
        (),
        Prediction(
            f"Out of k = {STEP_DEPTH} drafts, how many will the target accept in this step?",
            "e.g. 2",
            lambda m, s: float(m["accepted"]),
            one_step_models,
            unit=" drafts",
        ),
        needs=("eagle", "model"),
    ),
}
