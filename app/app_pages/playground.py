"""Playground: the same prompts decoded plainly and speculatively, live, then raced on one clock.

Page shape (docs/design.md §7, Streamlit's demos): title, short prose, controls, results. Controls return values and are all
bound to the URL query string, so a copied link reproduces the run; compute goes through the engine;
drawing goes through the pure views in app/views.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from app import resources
from app.page_helpers import last_resort, link_notices, load_pair_or_error, show_failure
from app.policy_options import (
    POLICIES,
    POLICY_HELP,
    TABLE_EXAMPLE,
    TABLE_MAX_CHARS,
    USES_N,
    BatchTableError,
    format_batch_table,
    parse_batch_table,
)
from app.results import Peaks, gauge_name, show_results
from app.url_keys import bound
from app.views import depth_policy, tokens
from app.views import tree as tree_view
from engine import ConfigError, DecodeConfig, ModelLoadError, TraceError, generate_steps
from engine.decoding.passcurve import pass_curve
from engine.decoding.policies import derived_table_for
from engine.drafters import drafter_name
from engine.hardware import pick_device, thread_line

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = json.loads((ROOT / "assets" / "prompts.json").read_text(encoding="utf-8"))["prompts"]
PROMPT_BY_ID = {p["id"]: p for p in PROMPTS}
CUSTOM = "✏️ Custom text…"
# Bound widgets put their option *labels* in the URL, so the options are stable, readable labels.
PROMPT_BY_TITLE = {p["title"]: p["id"] for p in PROMPTS} | {CUSTOM: "custom"}
PROMPT_TITLES = list(PROMPT_BY_TITLE)
PAIR_BY_LABEL = {p.label: key for key, p in resources.PRESETS.items()}
PAIR_LABELS = list(PAIR_BY_LABEL)
DRAFTERS = {"n-gram": "ngram", "draft model": "model", "EAGLE head": "eagle"}
NO_DRAFTER = {  # drafter kind -> why it cannot run on this pair (available_drafters(pair) lacks it)
    "model": "This model pair has no draft model. Fix: choose the n-gram drafter, or another pair.",
    "eagle": "This model pair has no EAGLE head (one ships for the embedded target only). Fix: choose the draft "
    "model or the n-gram drafter, or the embedded pair.",
}
PAGE = "playground"  # its bound widgets and their labels: app/url_keys.py
CPU_WORK_GUARD = 16_384  # batch × (depth + 1) × max_new_tokens allowed on a CPU server
GPU_WORK_GUARD = 262_144
LIVE_REFRESH_S = 0.25  # redraw the live lanes at most this often, so drawing barely touches the timings
BARROW = "https://jbarrow.ai/2026-10-08-why-is-speculative-decoding-fast"


@dataclass(frozen=True)
class Settings:
    preset: str
    prompt_id: str
    custom_text: str
    batch: int
    depth: int
    temperature: float
    top_p: float
    max_new_tokens: int
    drafter: str
    policy: str
    policy_n: int
    float32: bool
    confidence: float = 0.0
    table: str = ""  # policy batch_table: rows MIN-MAX:K (empty: derived from this machine's measured pass cost)
    tree_nodes: int = 0  # EAGLE tree drafting: nodes verified per row (0 = a chain of k)
    tree_topk: int = 4  # children expanded per tree node

    @property
    def tree(self) -> tuple[int, int]:
        """(tree_nodes, tree_topk) the run uses: a tree only for a model drafter (EAGLE head, draft model) with
        k >= 1, else the chain."""
        if self.tree_nodes and self.drafter in ("eagle", "model") and self.depth > 0:
            return self.tree_nodes, self.tree_topk
        return 0, 0

    @property
    def verified_per_row(self) -> int:
        """Tokens each row puts through a verify pass: k + 1, or a tree's nodes + 1."""
        return (self.tree[0] or self.depth) + 1

    @property
    def dtype(self) -> str:
        return "float32" if self.float32 else "auto"

    @property
    def batch_table(self) -> tuple[tuple[int, int, int], ...] | None:
        """The explicit table of the batch_table policy (None: derived, or another policy); BatchTableError if bad."""
        return parse_batch_table(self.table) if self.policy == "batch_table" else None

    def prompts(self) -> list[str]:
        """The batch: the chosen prompt first, then different curated prompts, so sequences really differ."""
        first = self.custom_text if self.prompt_id == "custom" else PROMPT_BY_ID[self.prompt_id]["text"]
        others = [p["text"] for p in PROMPTS if p["id"] != self.prompt_id]
        return [first] + [others[i % len(others)] for i in range(self.batch - 1)]

    def config(self, mode: str) -> DecodeConfig:
        return DecodeConfig(
            mode=mode,
            depth=self.depth,
            drafter=self.drafter,
            policy=self.policy,
            disable_by_batch_size=self.policy_n,
            temperature=self.temperature,
            top_p=self.top_p,
            max_new_tokens=self.max_new_tokens,
            seed=0,
            confidence_threshold=self.confidence if self.drafter != "ngram" else 0.0,
            batch_table=self.batch_table,
            tree_nodes=self.tree[0] if mode == "speculative" else 0,
            tree_topk=self.tree[1] if mode == "speculative" else 0,
        )


# --- controls ---------------------------------------------------------------------------------
def controls(hub_ok: bool, on_gpu: bool) -> tuple[Settings, bool, bool]:
    """Draw the controls; return (settings, run clicked, auto-run on).

    A link's value that a control cannot take (not an option, out of range, malformed) is ignored by
    Streamlit, which keeps the default; a notice above the controls says which and what is used instead,
    until the next Run. Only a session's first run is checked: that is when the link seeds the controls
    (later, the server's copy of the query string can lag behind the controls the user moved)."""
    max_batch = 128 if on_gpu else 32
    first_run = "url_notices" not in st.session_state
    raw = st.query_params.to_dict() if first_run else {}  # read before any bound widget is drawn
    notices = st.container()
    with st.container(border=True):
        c1, c2 = st.columns([3, 2])
        with c1:
            title = st.selectbox("Prompt (the batch is filled with other curated prompts)", PROMPT_TITLES, **bound(PAGE, "prompt"))
            prompt_id = PROMPT_BY_TITLE[title]
            if prompt_id == "custom":
                custom = st.text_area(
                    "Your prompt", **bound(PAGE, "text"), height=110, placeholder="Type a user message, e.g. 'Copy this paragraph: …'"
                )
            else:
                custom = ""
                st.caption(PROMPT_BY_ID[prompt_id]["text"][:300] + ("…" if len(PROMPT_BY_ID[prompt_id]["text"]) > 300 else ""))
        with c2:
            label = st.selectbox("Model pair (draft → target)", PAIR_LABELS, **bound(PAGE, "pair"))
            preset = PAIR_BY_LABEL[label]
            if not hub_ok:
                st.caption("Hub presets are unavailable offline: this server cannot reach the Hugging Face Hub.")
            drafter = st.radio(
                "Drafter",
                list(DRAFTERS),
                **bound(PAGE, "drafter"),
                horizontal=True,
                help="n-gram: propose the continuation of the latest repeated n-gram (prompt lookup, "
                "no model). draft model: a small LM sharing the target's tokenizer. EAGLE head: "
                "one layer that drafts from the target's own last hidden states (EAGLE, Li et "
                "al. 2024).",
            )
            float32 = st.toggle(
                "float32",  # a short label: "float32 (lanes match exactly; slower on …" was cut off
                **bound(PAGE, "fp32"),
                help="float32: the lanes match exactly, but it is slower on this CPU. Off: auto = "
                "bfloat16 where the hardware computes it natively. In bfloat16 a "
                "k-token verify pass and single-token passes round differently, so greedy lanes "
                "may part.",
            )

        s1, s2, s3, s4, s5 = st.columns(5)
        batch = s1.slider("Batch size", 1, max_batch, 1, **bound(PAGE, "batch"))
        depth = s2.slider(
            "Speculation depth k",
            0,
            12,
            4,
            **bound(PAGE, "depth"),
            help="Draft tokens proposed per step; 0 = plain decoding through the same code path.",
        )
        max_new = s3.slider("Max new tokens", 8, 256, 64, step=8, **bound(PAGE, "tokens"))
        temperature = s4.slider(
            "Temperature", 0.0, 1.5, 0.0, step=0.05, **bound(PAGE, "temp"), help="0 = greedy (the lanes must agree token for token)."
        )
        top_p = s5.slider(
            "Top-p",
            0.05,
            1.0,
            1.0,
            step=0.05,
            **bound(PAGE, "top_p"),
            disabled=temperature == 0,
            help="Only used when sampling (temperature > 0).",
        )

        p1, p2 = st.columns([5, 1], vertical_alignment="bottom")
        policy = p1.radio("Depth policy", list(POLICIES), **bound(PAGE, "policy"), horizontal=True, help=POLICY_HELP)
        policy_n = p2.slider(
            "N",
            1,
            max_batch,
            8,
            **bound(PAGE, "policy_n"),  # a slider: see app/url_keys.py
            disabled=POLICIES[policy] not in USES_N,
            help="off above batch N and heuristic k: no speculation while more than N sequences decode.",
        )
        q1, q2, q3, q4 = st.columns([2.1, 2.1, 1.2, 1], vertical_alignment="bottom")
        table = q1.text_input(
            "Batch table (empty = derived from this machine's measured cost)",
            **bound(PAGE, "table"),
            placeholder=TABLE_EXAMPLE,
            max_chars=TABLE_MAX_CHARS,
            disabled=POLICIES[policy] != "batch_table",
            help="Rows MIN-MAX:K separated by commas (N:K for one batch size): while the batch "
            "is in a row's range, draft K tokens (at most k); K = 0 switches speculation "
            "off; a batch no row covers drafts k. vLLM's num_speculative_tokens_per_batch_size "
            "has these semantics.",
        )
        confidence = q2.slider(
            "Stop drafting below confidence",
            0.0,
            0.9,
            0.0,
            step=0.05,
            **bound(PAGE, "conf"),
            disabled=DRAFTERS[drafter] == "ngram",
            help="Model drafters stop a sequence's draft once the product of their own "
            "probabilities over it falls below this (the joint confidence EAGLE-2 uses; the "
            "token that crosses the threshold is still proposed): k becomes the most a step "
            "drafts. In a batch, drafting continues while any row is still drafting, and the "
            "stopped rows' slots are padding the target still verifies. 0 = always draft k "
            "tokens.",
        )
        t1, t2 = st.columns(2)
        tree_nodes = t1.slider(
            "Tree nodes (EAGLE head or draft model; 0 = a chain of k)",
            0,
            64,
            0,
            **bound(PAGE, "tree"),
            disabled=DRAFTERS[drafter] == "ngram",
            help="Tree drafting (EAGLE-2): each draft step expands the top-k children of the k "
            "best nodes so far; the nodes with the highest joint draft confidence, at most "
            "k deep, are verified in ONE target pass with a tree attention mask. Width is "
            "a third way to fill an idle pass, beside batch and depth.",
        )
        tree_topk = t2.slider(
            "Tree top-k",
            1,
            8,
            4,
            **bound(PAGE, "tree_k"),
            disabled=DRAFTERS[drafter] == "ngram" or tree_nodes == 0,
            help="Children expanded per node (and nodes expanded per level).",
        )
        auto = q3.toggle(
            "Auto-rerun",  # "Rerun on change" was cut to "Rerun…"
            **bound(PAGE, "auto"),
            help="Rerun on change: decode again whenever a setting changes (a change mid-run cancels that run).",
        )
        clicked = q4.button("▶ Run", type="primary", width="stretch", key="run")
    settings = Settings(
        preset=preset,
        prompt_id=prompt_id,
        custom_text=custom,
        batch=int(batch),
        depth=int(depth),
        temperature=float(temperature),
        top_p=float(top_p),
        max_new_tokens=int(max_new),
        drafter=DRAFTERS[drafter],
        policy=POLICIES[policy],
        policy_n=int(policy_n),
        float32=bool(float32),
        confidence=float(confidence),
        table=str(table or ""),
        tree_nodes=int(tree_nodes),
        tree_topk=int(tree_topk),
    )
    if first_run or clicked:
        st.session_state["url_notices"] = link_notices(PAGE, raw) if first_run else []
    for notice in st.session_state["url_notices"]:
        notices.warning(notice, icon=":material/link_off:")
    return settings, clicked, auto


def input_problems(settings: Settings, hub_ok: bool, on_gpu: bool) -> list[str]:
    """Problems we can name before touching the model (the engine names the rest: length, context)."""
    problems = []
    preset = resources.PRESETS[settings.preset]
    if preset.hub and not hub_ok:
        problems.append(
            f"The model pair '{preset.label}' needs the Hugging Face Hub, which this server cannot reach (offline). "
            "Fix: choose the embedded pair, or run SpecLab on a machine with internet access."
        )
    elif preset.gpu_only and not on_gpu:
        problems.append(
            f"The model pair '{preset.label}' needs a GPU: its 7B target does not fit this CPU server's memory. "
            "Fix: choose the embedded or the SmolLM2 pair."
        )
    try:
        parse_batch_table(settings.table if settings.policy == "batch_table" else "")
    except BatchTableError as exc:
        problems.append(str(exc))
    if settings.prompt_id == "custom" and not settings.custom_text.strip():
        problems.append("The custom prompt is empty. Fix: type a prompt, or pick one of the curated prompts.")
    if settings.tree[0] and not problems:
        try:
            settings.config("speculative")
        except ConfigError as exc:  # e.g. more nodes than k levels of top-k hold, or a policy trees do not take
            problems.append(f"{exc}. Fix: change the tree nodes, the tree top-k or k, or set Tree nodes to 0.")
    guard = GPU_WORK_GUARD if on_gpu else CPU_WORK_GUARD
    work = settings.batch * settings.verified_per_row * settings.max_new_tokens
    if work > guard:
        per_row = f"tree nodes {settings.tree[0]}" if settings.tree[0] else f"depth {settings.depth}"
        problems.append(
            f"batch {settings.batch} × ({per_row} + 1) × {settings.max_new_tokens} new tokens = {work:,} "
            f"token slots, above this server's memory guard of {guard:,}. Fix: lower the batch size, the depth "
            "(or tree nodes) or max new tokens."
        )
    return problems


# --- running ----------------------------------------------------------------------------------
def run_lane(pair, prompts: list[str], cfg: DecodeConfig, placeholder, title: str):
    """Decode one lane, redrawing its tokens live; returns the Trace."""
    stream = generate_steps(pair, prompts, cfg)  # validates prompts (ConfigError) before any model work
    steps = []
    last_draw = 0.0
    it = iter(stream)
    try:
        for step in it:
            steps.append(step)
            now = time.perf_counter()
            if now - last_draw >= LIVE_REFRESH_S:
                recs = tokens.token_records(steps, len(prompts), greedy=cfg.greedy)
                n = sum(len(s.emitted) for st_ in steps for s in st_.seqs)
                placeholder.html(
                    tokens.lane_html(
                        recs, max_seqs=4, speculative=cfg.speculative, status=f"{title}: decoding… step {step.index}, {n} tokens"
                    )
                )
                last_draw = time.perf_counter()
    finally:
        it.close()
    trace = stream.trace
    recs = tokens.token_records(trace.steps, len(prompts), greedy=cfg.greedy)
    placeholder.html(
        tokens.lane_html(recs, max_seqs=4, speculative=cfg.speculative, status=f"{title}: done in {trace.summary['wall_s']:.2f} s")
    )
    return trace


def run_both(pair, settings: Settings, live) -> dict:
    """AR first, then speculative: never overlapping, so neither disturbs the other's timings."""
    prompts = settings.prompts()
    ar_cfg, spec_cfg = settings.config("autoregressive"), settings.config("speculative")
    with live.container():
        st.subheader("Decoding live")
        left, right = st.columns(2)
        left.markdown("**Autoregressive**")
        right.markdown("**Speculative**")
        ar_box, spec_box = left.empty(), right.empty()
        ar_box.caption("Prefill: the target reads the prompts…")
        spec_box.caption("Waits for the AR lane: the lanes never run at the same time, so their timings stay honest.")
    ar = run_lane(pair, prompts, ar_cfg, ar_box, "AR")
    spec = run_lane(pair, prompts, spec_cfg, spec_box, "Speculative")
    return {"settings": settings, "ar": ar, "spec": spec}


def policy_basis(pair, settings: Settings) -> dict | None:
    """What a load-aware policy priced k with: this machine's measured pass-cost curve (the run just made
    measured or loaded it, so this reads the cached curve) and, for a derived batch table, the table itself,
    computed by the engine's own engine.policies.derived_table_for."""
    if settings.policy not in ("batch_table", "goodput") or settings.batch_table is not None or settings.depth == 0:
        return None
    curve = pass_curve(pair)
    basis = {"tokens": list(curve.tokens), "ms": list(curve.ms), "measured_at": curve.measured_at, "table": None}
    if settings.policy == "batch_table":
        basis["table"] = derived_table_for(pair, DecodeConfig(depth=settings.depth, drafter=settings.drafter))
    return basis


def show_policy_basis(basis: dict) -> None:
    with st.expander("What the load-aware policy priced k with: this machine's measured pass cost"):
        if basis["table"] is not None:
            st.markdown(
                f"Derived batch table (batch range: k): `{format_batch_table(basis['table'])}`. Each range "
                "gets the k with the most expected tokens per second at its middle batch size, from the curve "
                "below and a prior acceptance; the run's own k per step is in the chart above."
            )
        else:
            st.markdown(
                "goodput prices every step with this curve (corrected by the steps' own measured verify and "
                "draft times) and the run's acceptance at each draft position so far."
            )
        st.plotly_chart(
            depth_policy.curve_figure(basis["tokens"], basis["ms"], basis["measured_at"][:10]), width="stretch", key="chart_curve"
        )


def show_trees(spec) -> None:
    """The speculative lane's draft trees, one (step, sequence) at a time (app/views/tree.py)."""
    items = tree_view.tree_steps(spec.steps)
    if not items:
        return
    totals = tree_view.tree_totals(spec.steps)
    with st.expander(
        f"Draft trees: {totals['mean_nodes']:.1f} nodes drafted, {totals['mean_accepted']:.2f} accepted "
        f"per sequence-step (mean of {totals['row_steps']})"
    ):
        pick = st.slider("Step (sequence-step of the speculative lane)", 1, len(items), 1, key="tree_pick") if len(items) > 1 else 1
        st.html(tree_view.tree_html(items[pick - 1], greedy=spec.config.get("temperature", 0) == 0))


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
    messages.error(NO_DRAFTER.get(settings.drafter, f"This model pair cannot run the {settings.drafter} drafter."), icon=":material/error:")

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
        st.error(f"{exc}. Fix: shorten the prompt or lower max new tokens / depth.", icon=":material/error:")
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
        )
        if result.get("basis"):
            show_policy_basis(result["basis"])
        show_trees(result["spec"])


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
    results.info("Pick a prompt and press **▶ Run**: the AR lane decodes first, then the speculative lane, then both race.")
