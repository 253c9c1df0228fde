"""The Benchmarks page's GPU view: Spec-Bench's own leaderboard on a GPU (cited, app/benchmarks/cited.py) beside the
CPU recording at batch 1, task by task, for each cited method that has a SpecLab counterpart (prompt lookup and the
n-gram drafter, a separate draft model and SpecLab's, EAGLE and SpecLab's EAGLE head). One chart, the numbers under
it, the sentences computed from both. No streamlit.
"""

from __future__ import annotations

import statistics

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.views.bars import COLORS, PLAIN_COLOR, esc, frame, whiskers
from engine.bench.prompt_files import task_name
from engine.bench.tasks import CONTENDERS
from engine.verdict import MIN_GAP

CITED_COLOR, HERE_COLOR = COLORS[0], COLORS[1]


def pairs(cited: dict, rows: list[dict], batch: int = 1) -> list[dict]:
    """Each cited method whose SpecLab drafter the recording ran at `batch`: {"method", "about", "contender",
    "tasks" (in the recording's order, those both have), "cited" {task: speedup}, "here" {task: row}, "tau_cited",
    "tau_here" (the mean of the recording's τ over those tasks), "median_here" (its speedups' median), "overall_cited"}."""
    out = []
    for m in cited["methods"]:
        contender = CONTENDERS.get(m["drafter"])
        here = {r["task"]: r for r in rows if contender is not None and r["contender"] == contender.name and r["batch"] == batch}
        tasks = [t for t in dict.fromkeys(r["task"] for r in rows) if t in here and t in m["speedup"]]
        if not tasks:
            continue
        out.append(
            {
                "method": m["method"],
                "about": m["about"],
                "contender": contender.name,
                "tasks": tasks,
                "cited": {t: m["speedup"][t] for t in tasks},
                "here": {t: here[t] for t in tasks},
                "tau_cited": m["tau"],
                "overall_cited": m["overall"],
                "tau_here": statistics.mean(here[t]["tau"] or 1.0 for t in tasks),
                "median_here": statistics.median(here[t]["speedup"] for t in tasks),
            }
        )
    return out


def figure(matched: list[dict], cited_name: str, here_name: str, label: str) -> go.Figure:
    """One panel per method: per task, the cited GPU speedup (hatched, `cited_name` in the legend) beside the
    recording's (with its 95% range, `here_name`), and plain decoding's 1× dotted; `label` (where both come from)
    under the title. The numbers are in `table`, under the chart."""
    fig = make_subplots(
        rows=len(matched), cols=1, subplot_titles=[esc(f"{p['method']} (cited) and {p['contender']} (recorded)") for p in matched]
    )
    for i, p in enumerate(matched, start=1):
        names = [task_name(t) for t in p["tasks"]]
        rows = [p["here"][t] for t in p["tasks"]]
        fig.add_bar(
            x=names,
            y=[p["cited"][t] for t in p["tasks"]],
            name=cited_name,
            marker={"color": CITED_COLOR, "pattern": {"shape": "/"}},
            showlegend=i == 1,
            row=i,
            col=1,
        )
        fig.add_bar(
            x=names,
            y=[r["speedup"] for r in rows],
            name=here_name,
            marker={"color": HERE_COLOR},
            error_y=whiskers([(r["speedup"], r.get("speedup_lo"), r.get("speedup_hi")) for r in rows]),
            showlegend=i == 1,
            row=i,
            col=1,
        )
        fig.add_hline(y=1.0, line={"dash": "dot", "color": PLAIN_COLOR}, row=i, col=1)
        top = max(max(p["cited"].values()), max(r["speedup_hi"] or r["speedup"] for r in rows))
        fig.update_yaxes(title_text="× plain", range=[0, top * 1.18], row=i, col=1)
    return frame(
        fig,
        "Speedup over plain decoding by task, batch 1: a GPU (cited, whole answers) and this CPU (recorded, decoding alone)",
        label,
        height=240 * len(matched) + 60,
    )


def table(matched: list[dict]) -> list[dict]:
    """Per method, two rows (cited, recorded): each task's speedup, the whole (the cited run's over all its prompts; the
    recording's median over its tasks), then τ."""
    out = []
    for p in matched:
        cited = {"drafter": f"{p['method']} (GPU, cited)"} | {task_name(t): f"{p['cited'][t]:.2f}×" for t in p["tasks"]}
        here = {"drafter": f"{p['contender']} (this recording)"}
        here |= {task_name(t): f"{p['here'][t]['speedup']:.2f}× ({p['here'][t]['verdict']})" for t in p["tasks"]}
        cited |= {"overall": f"{p['overall_cited']:.2f}× (the cited run)", "τ": f"{p['tau_cited']:.2f} (the cited run)"}
        here |= {"overall": f"{p['median_here']:.2f}× (median of the tasks)", "τ": f"{p['tau_here']:.2f} (mean of the tasks)"}
        out += [cited, here]
    return out


SAME_TAU = 0.10  # two τ within 10% of each other: "about the same acceptance", so the speed gap is the machines'


def findings(matched: list[dict]) -> list[str]:
    """Sentences computed from both sides, naming no winner the rule does not: per method, the GPU's τ and range of
    speedups (cited), then the recording's τ and the tasks the rule calls faster or slower than plain; where the two
    τ are about the same (within SAME_TAU), what each machine made of it."""
    out = []
    for p in matched:
        tasks = p["tasks"]
        lo, hi = min(tasks, key=lambda t: p["cited"][t]), max(tasks, key=lambda t: p["cited"][t])
        faster = [task_name(t) for t in tasks if p["here"][t]["verdict"] == "faster"]
        slower = [task_name(t) for t in tasks if p["here"][t]["verdict"] == "slower"]
        here = (
            f"faster than plain by the rule in {len(faster)} of {len(tasks)} tasks"
            + (f" ({', '.join(faster)})" if faster else "")
            + f", slower in {len(slower)}"
            + (f" ({', '.join(slower)})" if slower else "")
        )
        line = (
            f"**{p['method']}** on the GPU: τ {p['tau_cited']:.2f}, {p['overall_cited']:.2f}× overall, from "
            f"{p['cited'][lo]:.2f}× ({task_name(lo)}) to {p['cited'][hi]:.2f}× ({task_name(hi)}). "
            f"**{p['contender']}** in the recording: τ {p['tau_here']:.2f} (the mean over the tasks), {here}."
        )
        if abs(p["tau_here"] - p["tau_cited"]) <= SAME_TAU * p["tau_cited"]:
            median = p["median_here"]
            line += (
                f" The two keep about as many tokens a pass: the GPU made {p['overall_cited']:.2f}× of them (whole answers, "
                f"prefill included, over the cited prompts), the CPU a median of {median:.2f}× over the tasks (decoding alone)"
            )
            line += (
                ". The difference is what drafting and a verify pass of several tokens cost on each machine against a pass of one."
                if p["overall_cited"] >= (1 + MIN_GAP) * median
                else "."
            )
        out.append(line)
    return out
