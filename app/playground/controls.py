"""The Playground's controls and settings: the widgets (bound to the link), the `Settings` they make, and the
problems a setting has before any model work (app/playground/playground.py draws them)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from app.common import drafters, resources
from app.common.kv_guard import context_problem
from app.common.page_helpers import link_notices
from app.common.url_keys import bound
from app.playground.policy_options import (
    POLICIES,
    POLICY_HELP,
    TABLE_EXAMPLE,
    TABLE_MAX_CHARS,
    USES_N,
    BatchTableError,
    parse_batch_table,
)
from engine import ConfigError, DecodeConfig
from engine.bench.context import with_context
from engine.bench.prompts import SPEC_BENCH_SET, batch_prompts, prompt_set_list, spec_bench_sets

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = json.loads((ROOT / "assets" / "prompts.json").read_text(encoding="utf-8"))["prompts"]
PROMPT_BY_ID = {p["id"]: p for p in PROMPTS}
# Each Spec-Bench task as a prompt choice: its first prompt shown, and a batch filled with the task's own prompts
TASKS = {
    key: {"id": key, "title": f"{name} (a batch of its prompts)", "text": prompt_set_list(key)[0]}
    for key, name in spec_bench_sets().items()
}
PROMPT_BY_ID |= TASKS
CUSTOM = "✏️ Custom text…"
# Bound widgets put their option *labels* in the URL, so the options are stable, readable labels.
PROMPT_BY_TITLE = {p["title"]: p["id"] for p in PROMPTS} | {t["title"]: key for key, t in TASKS.items()} | {CUSTOM: "custom"}
PROMPT_TITLES = list(PROMPT_BY_TITLE)
PAIR_BY_LABEL = {p.label: key for key, p in resources.PRESETS.items()}
PAIR_LABELS = list(PAIR_BY_LABEL)
PAGE = "playground"  # its bound widgets and their labels: app/common/url_keys.py
MAX_ROUNDS = 9  # interleaved rounds (AR, speculative) per run
DEFAULT_ROUNDS = 3  # the fewest that give the one rule (engine/verdict.py) a range; a few seconds on a 2-core CPU
CPU_WORK_GUARD = 16_384  # batch × (depth + 1) × max_new_tokens allowed on a CPU server
GPU_WORK_GUARD = 262_144
# Context: the shipped document before every prompt (engine/bench/context.py), about this many tokens per row
CONTEXT_CHOICES = (0, 256, 512, 1024, 2048, 4096)


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
    rounds: int = DEFAULT_ROUNDS  # interleaved rounds: AR, speculative, AR, speculative …
    context: int = 0  # tokens of the shipped document before every prompt (0: none)

    @property
    def tree(self) -> tuple[int, int]:
        """(tree_nodes, tree_topk) the run uses: a tree only for a drafter that branches (the registry's `branches`:
        EAGLE head, draft model) with k >= 1, else the chain."""
        if self.tree_nodes and drafters.branches(self.drafter) and self.depth > 0:
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

    def prompts(self, pair=None) -> list[str]:
        """The batch: the chosen prompt first, then different curated prompts, so sequences really differ; a
        Spec-Bench task's batch is its own first prompts. With a context, each is preceded by the shipped document,
        cut so the longest row holds about `context` tokens (its tokenizer is `pair`'s; ConfigError where it cannot)."""
        if self.prompt_id in TASKS:
            prompts = batch_prompts(self.prompt_id, self.batch)
        else:
            first = self.custom_text if self.prompt_id == "custom" else PROMPT_BY_ID[self.prompt_id]["text"]
            others = [p["text"] for p in PROMPTS if p["id"] != self.prompt_id]
            prompts = [first] + [others[i % len(others)] for i in range(self.batch - 1)]
        return with_context(pair, prompts, self.context, self.max_new_tokens + self.depth + 1) if self.context else prompts

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
            confidence_threshold=self.confidence if drafters.confident(self.drafter) else 0.0,
            batch_table=self.batch_table,
            tree_nodes=self.tree[0] if mode == "speculative" else 0,
            tree_topk=self.tree[1] if mode == "speculative" else 0,
            task=self.prompt_id[len(SPEC_BENCH_SET) :] if self.prompt_id in TASKS else "",  # goodput learns per task, as the bench
        )


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
        prompt_id, custom, preset, drafter, float32 = _prompt_and_pair(hub_ok)
        batch, depth, max_new, temperature, top_p, context = _size_sliders(max_batch)
        policy, policy_n, table, confidence, tree_nodes, tree_topk, rounds, auto, clicked = _policy_controls(max_batch, drafter)
    settings = Settings(
        preset=preset,
        prompt_id=prompt_id,
        custom_text=custom,
        batch=int(batch),
        depth=int(depth),
        temperature=float(temperature),
        top_p=float(top_p),
        max_new_tokens=int(max_new),
        drafter=drafters.choices()[drafter],
        policy=POLICIES[policy],
        policy_n=int(policy_n),
        float32=bool(float32),
        confidence=float(confidence),
        table=str(table or ""),
        tree_nodes=int(tree_nodes),
        tree_topk=int(tree_topk),
        rounds=int(rounds),
        context=int(context),
    )
    if first_run or clicked:
        st.session_state["url_notices"] = link_notices(PAGE, raw) if first_run else []
    for notice in st.session_state["url_notices"]:
        notices.warning(notice, icon=":material/link_off:")
    return settings, clicked, auto


def _prompt_and_pair(hub_ok: bool) -> tuple:
    """The prompt, the model pair, the drafter and the float32 toggle: (prompt id, custom text, preset, drafter label, float32)."""
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
        drafter = st.radio("Drafter", list(drafters.choices()), **bound(PAGE, "drafter"), horizontal=True, help=drafters.help_text())
        float32 = st.toggle(
            "float32 (lanes match exactly; slower on this CPU)",
            **bound(PAGE, "fp32"),
            help="auto = bfloat16 where the hardware computes it natively. In bfloat16 a "
            "k-token verify pass and single-token passes round differently, so greedy lanes "
            "may part.",
        )
    return prompt_id, custom, preset, drafter, float32


def _size_sliders(max_batch: int) -> tuple:
    """(batch, depth k, max new tokens, temperature, top-p, context)."""
    s1, s2, s3 = st.columns(3)  # two rows of three: six in a row broke their labels mid-word on a laptop
    s4, s5, s6 = st.columns(3)
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
    context = s6.select_slider(
        "Context (tokens)",
        CONTEXT_CHOICES,
        0,
        **bound(PAGE, "context"),
        help="Long context: every prompt preceded by the same document (a guidebook shipped in assets/context/), so each "
        "row's KV cache holds about this many tokens when decoding starts. The rows share it as a prefix, prefilled once. "
        "Every pass then also reads each row's cache: the longer the context, the more a pass costs whatever tokens it "
        "carries, and the cheaper a verify pass's extra tokens are against a one-token pass (lesson 8).",
    )
    return batch, depth, max_new, temperature, top_p, context


def _policy_controls(max_batch: int, drafter: str) -> tuple:
    """The depth policy and its N or table, the confidence stop, the tree, auto-run and Run (drafter: its label)."""
    kind = drafters.choices()[drafter]
    p1, p2 = st.columns([5, 1], vertical_alignment="bottom")
    policy = p1.radio("Depth policy", list(POLICIES), **bound(PAGE, "policy"), horizontal=True, help=POLICY_HELP)
    policy_n = p2.slider(
        "N",
        1,
        max_batch,
        8,
        **bound(PAGE, "policy_n"),  # a slider: see app/common/url_keys.py
        disabled=POLICIES[policy] not in USES_N,
        help="off above batch N and heuristic k: no speculation while more than N sequences decode.",
    )
    q1, q2, q3, q4 = st.columns([2.2, 2.2, 1, 1], vertical_alignment="bottom")
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
        disabled=not drafters.confident(kind),
        help="Model drafters stop a sequence's draft once the product of their own "
        "probabilities over it falls below this (the joint confidence EAGLE-2 uses; the "
        "token that crosses the threshold is still proposed): k becomes the most a step "
        "drafts. In a batch, drafting continues while any row is still drafting, and the "
        "stopped rows' slots are padding the target still verifies. 0 = always draft k "
        "tokens.",
    )
    t1, t2, t3 = st.columns([2, 2, 1])
    tree_nodes = t1.slider(
        "Tree nodes (EAGLE head or draft model; 0 = a chain of k)",
        0,
        64,
        0,
        **bound(PAGE, "tree"),
        disabled=not drafters.branches(kind),
        help="Tree drafting (EAGLE-2): each draft step expands the top-k children of the k "
        "best nodes so far; the nodes with the highest joint draft confidence, at most "
        "k deep, are verified in ONE target pass with a tree attention mask. Width is "
        "a third way to fill an idle pass, beside batch and depth. With the goodput policy this is "
        "the most a step verifies: it cuts the tree to the size its measured cost pays for.",
    )
    tree_topk = t2.slider(
        "Tree top-k",
        1,
        8,
        4,
        **bound(PAGE, "tree_k"),
        disabled=not drafters.branches(kind) or tree_nodes == 0,
        help="Children expanded per node (and nodes expanded per level).",
    )
    rounds = t3.slider(
        "Rounds",
        1,
        MAX_ROUNDS,
        DEFAULT_ROUNDS,
        **bound(PAGE, "rounds"),
        help="Interleaved rounds, AR then speculative, each lane warmed up untimed first: a drift of the machine hits "
        "both lanes alike, and a winner is named only when the rounds' speed ratios agree (the rule under the summary).",
    )
    auto = q3.toggle(
        "Rerun on change", **bound(PAGE, "auto"), help="Decode again whenever a setting changes (a change mid-run cancels that run)."
    )
    clicked = q4.button("▶ Run", type="primary", width="stretch", key="run")
    return policy, policy_n, table, confidence, tree_nodes, tree_topk, rounds, auto, clicked


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
    if not 1 <= settings.rounds <= MAX_ROUNDS:
        problems.append(f"Rounds must be 1 to {MAX_ROUNDS}, not {settings.rounds}. Fix: pick a number of rounds on the slider.")
    if settings.prompt_id == "custom" and not settings.custom_text.strip():
        problems.append("The custom prompt is empty. Fix: type a prompt, or pick one of the curated prompts.")
    if settings.tree[0] and not problems:
        try:
            settings.config("speculative")
        except ConfigError as exc:  # e.g. more nodes than k levels of top-k hold, or a confidence stop beside a tree
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
    too_long = context_problem(settings.batch, settings.context, on_gpu)  # the guard every page applies (app/common/kv_guard.py)
    if too_long:
        problems.append(too_long)
    return problems
