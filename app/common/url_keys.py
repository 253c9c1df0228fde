"""Every widget bound to the URL query string, in one registry: page -> key -> label.

A page binds a widget with `**bound("playground", "batch")` (which gives Streamlit `key` and
`bind="query-params"`); a key that is not registered here raises, so no page can bind one that the
registry, the link notices (`app.common.page_helpers.link_notices`) and the URL fuzz test
(tests/app/test_url_fuzz.py) do not know about. A contract test checks that no page passes `bind=`
itself. Plain data, no streamlit.
"""

from __future__ import annotations

BIND = "query-params"

# page -> its script under app/ (what AppTest opens) and its bound keys -> the label the notices use
PAGE_FILES = {
    "playground": "playground/playground.py",
    "predictor": "predictor/predictor.py",
    "sweep": "sweep/sweep.py",
    "lessons": "lessons/lessons.py",
    "benchmarks": "benchmarks/benchmarks.py",
}
BOUND: dict[str, dict[str, str]] = {
    "playground": {
        "prompt": "Prompt",
        "text": "Your prompt",
        "pair": "Model pair",
        "drafter": "Drafter",
        "fp32": "float32",
        "batch": "Batch size",
        "depth": "Speculation depth k",
        "tokens": "Max new tokens",
        "temp": "Temperature",
        "top_p": "Top-p",
        "policy": "Depth policy",
        "policy_n": "N",
        "table": "Batch table",
        "conf": "Stop drafting below confidence",
        "auto": "Auto-rerun",
        "tree": "Tree nodes",
        "tree_k": "Tree top-k",
        "rounds": "Rounds",
        "context": "Context (tokens)",
    },
    "predictor": {
        "gpu": "GPU",
        "model": "Model size",
        "dtype": "dtype",
        "ctx": "Context length",
        "alpha": "α",
        "c": "c",
        "floor": "Overhead per pass",
    },
    "sweep": {
        "pass_batches": "Batch sizes (passes)",
        "pass_tokens": "Tokens per row, up to",
        "pass_context": "KV cache length per row",
        "grid_batches": "Batch sizes (grid)",
        "grid_depths": "Depths k",
        "grid_drafter": "Drafter",
        "grid_tokens": "New tokens per sequence",
        "grid_conf": "Stop drafting below confidence",
        "grid_adaptive": "Adaptive policies",
        "grid_trees": "Tree sizes",
        "grid_topk": "Tree top-k",
        "grid_rounds": "Rounds per cell",
        "grid_prompts": "Prompts",
        "grid_contexts": "Contexts (tokens per row)",
    },
    # Each lesson's knobs join this table from its record (app/lessons/registry.py calls `register`), so a new
    # lesson's settings are bound without an edit here.
    "lessons": {"teacher": "Teacher mode"},
    "benchmarks": {
        "batch": "Batch",
        "contender": "Drafter in the batch chart",
    },
}
# Link parameters a page reads without a widget: never bound, so never in a link notice. A class session's
# `class` (the code) and `desk` (the teacher's secret token, removed from the address bar on the first run and
# never repeated in a notice; not `teacher`, the toggle above) and a joined student's `seat` (a reload keeps it) are
# read by app/lessons/kit/class_page.py.
LINK_ONLY: dict[str, tuple[str, ...]] = {"lessons": ("lesson", "class", "desk", "seat")}
# No st.number_input here: Streamlit 1.67 seeds it from the URL with int(float(text)) before its range check, so
# "?N=inf" raised OverflowError inside Streamlit, where no page can catch it (tests/app/test_url_fuzz.py). Sliders
# and the other widgets reset an unusable value to their default.


def register(page: str, keys: dict[str, str]) -> None:
    """Add bound keys (key -> label) to a page's table; a key already registered with another label raises."""
    table = BOUND.setdefault(page, {})
    clash = [k for k, label in keys.items() if table.get(k, label) != label]
    if clash:
        raise ValueError(f"URL keys {', '.join(clash)} of page {page!r} are registered twice with different labels")
    table.update(keys)


def bound(page: str, key: str) -> dict[str, str]:
    """The keyword arguments that bind a widget of `page` to the URL parameter `key` (registered above)."""
    if key not in BOUND.get(page, {}):
        raise KeyError(f"{key!r} is not a registered URL key of page {page!r}: add it to app/common/url_keys.py BOUND")
    return {"key": key, "bind": BIND}
