"""Playground: the same prompts decoded plainly and speculatively, live, then raced on one clock.

Page shape (docs/design.md §7, Streamlit's demos): title, short prose, controls, results. Controls return values and are all
bound to the URL query string, so a copied link reproduces the run; compute goes through the engine;
drawing goes through the pure views in app/views.
"""

from __future__ import annotations

import datetime as dt

import streamlit as st

from app.common import drafters, resources
from app.common.page_helpers import last_resort, load_pair_or_error, show_failure
from app.common.results import Peaks, gauge_name, show_results
from app.playground.controls import controls, input_problems
from app.playground.run import policy_basis, run_both, show_h200, show_policy_basis, show_trees
from engine import ConfigError, ModelLoadError, TraceError
from engine.drafters import drafter_name
from engine.hardware import pick_device, thread_line

BARROW = "https://jbarrow.ai/2026-10-08-why-is-speculative-decoding-fast"


# --- page -------------------------------------------------------------------------------------
st.title("⚡ Playground")
st.markdown(
    "The same prompts, decoded twice on this machine: **plain autoregressive** (one target forward per token) "
    "and **speculative** (a cheap drafter guesses *k* tokens, the target checks them all in *one* forward). "
    "A pass over a small batch leaves the arithmetic units mostly idle: its time goes to streaming the weights and "
    "to per-operation overhead, and neither depends much on whether the pass carries 1 token or 5. Where that holds, "
    "verified guesses ride along almost free; once batch × (k+1) tokens per pass fill the arithmetic, every draft "
    "token costs real time. The charts below measure which case this run was in. "
    f"Background: J. Barrow, [“Why is speculative decoding fast?”]({BARROW}), 2026."
)

hub_ok = resources.hub_available()
on_gpu = pick_device().type == "cuda"
settings, clicked, auto = controls(hub_ok, on_gpu)
# Everything drawn only sometimes goes into `messages`, so the live lanes and the results below always sit at
# the same place on the page: a new run's `st.empty()` there removes the previous results from the browser
# before the lanes decode (a page of old figures is not kept, and re-laid out, while the next run is timed).
messages = st.container()
problems = input_problems(settings, hub_ok, on_gpu)
for problem in problems:
    messages.error(problem, icon=":material/error:")

pair = probe = None
if not problems or not resources.PRESETS[settings.preset].hub:
    with messages:
        loaded = load_pair_or_error(settings.preset, settings.dtype, with_probe=True)
    if loaded is None:
        problems.append("the model pair did not load")
    else:
        pair, probe = loaded

if pair is not None and drafter_name(pair, settings.drafter) is None:
    problems.append(f"no {settings.drafter} drafter")
    messages.error(drafters.missing(pair, settings.drafter), icon=":material/error:")

if st.session_state.pop("running", False):  # the previous script run stopped mid-decode
    messages.info(
        "The previous run was interrupted (a setting changed or Run was pressed again); nothing was kept from it.", icon=":material/cancel:"
    )
last = st.session_state.get("result")
want_run = clicked or (auto and (last is None or last["settings"] != settings))


def decode_both(live) -> None:
    """Run both lanes (the caller holds the run lock); the result goes to session_state["result"]."""
    try:
        st.session_state["running"] = True
        result = run_both(pair, settings, live)
        result["basis"] = policy_basis(pair, settings)
        recorded_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        for trace in (result["ar"], result["spec"]):  # a downloaded trace replays with this machine's peaks
            trace.meta["probe"] = probe.to_dict()
            trace.meta["recorded_at"] = recorded_at
        st.session_state["result"] = result
    except ConfigError as exc:
        st.error(f"{exc}. Fix: shorten the prompt or lower the context, max new tokens or depth.", icon=":material/error:")
    except (ModelLoadError, TraceError) as exc:
        st.error(str(exc), icon=":material/error:")
    except (ValueError, OSError, RuntimeError) as exc:  # e.g. torch out of memory (a RuntimeError)
        show_failure("The run failed", exc, "Try smaller settings.")
    # not in `finally`: a rerun that interrupts the run leaves "running" set, and the next script run says so
    st.session_state["running"] = False
    live.empty()


def draw_result() -> None:
    result = st.session_state.get("result")
    if result is None or probe is None:
        return
    with last_resort("Could not draw the results"):
        show_results(
            result["ar"],
            result["spec"],
            Peaks.from_probe(probe),
            gauge_name(result["spec"]),
            stale=result["settings"] != settings,
            offer_float32=not result["settings"].float32,
            threads=thread_line(),
            rounds=result["rounds"],
            shown_round=result["shown_round"],
        )
        if result.get("basis"):
            show_policy_basis(result["basis"])
        show_trees(result["spec"])
        shown = f"round {result['shown_round'] + 1} of {len(result['rounds'])}"
        show_h200(result["ar"], result["spec"], f"{probe.device_name}, {probe.dtype}, {shown}", shown)


if want_run and problems:
    messages.warning("Run skipped: fix the problem above first.")
queue, live, results = st.empty(), st.empty(), st.empty()  # fixed places: see `messages` above
if (want_run and not problems and pair is not None) or (st.session_state.get("result") is not None and probe is not None):
    # Decoding and drawing both happen inside this session's turn on the run lock: drawing a result (or this
    # session's browser redrawing it) never overlaps another session's timed lanes, and a link that auto-runs
    # queues like a click does.
    with resources.model_turn(queue):
        if want_run and not problems and pair is not None:
            decode_both(live)
        with results.container():
            draw_result()
elif not want_run:
    results.info(
        "Pick a prompt and press **▶ Run**: both lanes warm up untimed, then decode in turn (AR, then speculative) for "
        "each round, then both race."
    )
