"""Every lesson's figures, built from the shipped recordings (assets/lessons/*.json read with
app/common/measurement.py load_record), and where each label, annotation and whisker lands once plotly.js draws
them in a real headless Chromium (Playwright): the readability tests (tests/app/test_chart_readability.py) read
these, and `python -m tests.app.lesson_charts OUT_DIR` writes each figure as a PNG to look at by eye."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from app.lessons import registry
from app.lessons.registry import EXPERIMENTS

ROOT = Path(__file__).resolve().parents[2]
LESSONS = ROOT / "assets" / "lessons"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
WIDTHS = (560, 760, 1200)  # a 1024 px laptop with the sidebar open, a narrow laptop window, a wide one


def _rec(name: str) -> dict:
    return registry.load_record(LESSONS / f"{name}.json")


def lesson_figures() -> dict:
    """{name: plotly Figure} for every lesson figure the shipped recordings draw, each with its recording's label."""
    from app.lessons.kit import gpu
    from app.lessons.l0_one_step import record_of
    from app.lessons.l1_memory_bound import memory_bound_figure, pass_figure
    from app.lessons.l2_more_flops import more_flops_figure
    from app.lessons.l3_past_the_ridge import past_the_ridge_figure
    from app.lessons.l4_turn_it_off import steps_figure, turn_it_off_figure
    from app.lessons.l5_adaptive import adaptive_figure
    from app.lessons.l6_by_load import by_load_figure, depth_figure
    from app.lessons.l7_width import shapes_figure, width_figure
    from app.views import h200, step_pictures
    from app.views.h200 import figure
    from engine import Trace

    out = {}
    step = record_of(Trace.from_json(LESSONS / "step-through.json"))
    out["lesson0"] = step_pictures.plain_vs_step_figure(step["measurement"])
    drawn = {
        "lesson1": (memory_bound_figure, "memory_bound"),
        "lesson2": (more_flops_figure, "more_flops"),
        "lesson3": (past_the_ridge_figure, "past_the_ridge"),
        "lesson4": (turn_it_off_figure, "turn_it_off"),
        "lesson5": (adaptive_figure, "adaptive"),
        "lesson6": (by_load_figure, "by_load"),
        "lesson7": (width_figure, "width"),
    }
    for key, (draw, name) in drawn.items():
        rec = _rec(name)
        out[key] = draw(rec["measurement"], rec["settings"], f"recorded on {rec['machine']}, {rec['date']}")
    more = {
        "lesson4_steps": lambda r, label: steps_figure(r["measurement"], label),
        "lesson6_depths": lambda r, label: depth_figure(r["measurement"], label),
        "lesson7_steps": lambda r, label: shapes_figure(r["measurement"], label),
    }
    sources = {"lesson4_steps": "turn_it_off", "lesson6_depths": "by_load", "lesson7_steps": "width"}

    curves, _ = h200.recorded_curves()
    ridge = _rec("past_the_ridge")["settings"]
    marks = sorted({b * n for _, b, n in gpu.lesson_passes(EXPERIMENTS["past_the_ridge"], ridge)})
    out["gpu_curves"] = gpu.curves_figure(curves, marks)
    out["gpu_model"] = gpu.model_figure(EXPERIMENTS["past_the_ridge"], ridge)
    from app.views import roofline

    one = _rec("memory_bound")
    m1, label1 = one["measurement"], f"recorded on {one['machine']}, {one['date']}"
    out["lesson1_peaks"] = roofline.peak_share_figure(m1["rows"], m1["peak_bandwidth"], m1["peak_flops"], m1.get("ridge_tokens"))
    out["lesson1_retimed"] = pass_figure(m1.get("rows") or [], label1)
    for name in ("more_flops", "past_the_ridge", "turn_it_off", "adaptive", "by_load", "width"):  # the H200 re-timing
        rec = _rec(name)
        out[f"{name}_retimed"] = figure(rec["measurement"], f"recorded on {rec['machine']}, {rec['date']}")
    out |= retimed_variants()
    out = {k: v for k, v in out.items() if v is not None}
    for key, draw in more.items():
        rec = _rec(sources[key])
        fig = draw(rec, f"recorded on {rec['machine']}, {rec['date']}")
        if fig is not None:
            out[key] = fig
    return out


def page_figures() -> dict:
    """Figures of the other pages that draw their own titles (not through bars.frame), from shipped data: the
    Playground's step charts (a shipped trace pair), the Predictor's pass chart, the KV check, the Benchmarks page's two
    charts (the shipped Spec-Bench recording, with its label)."""
    from app.views import benchmarks, charts, kv_check
    from app.views.predictor import pass_time_figure, speedup_heatmap
    from engine import Trace
    from engine.bench import task_records
    from engine.roofline import predictor
    from engine.roofline.architectures import architecture
    from engine.roofline.gpus import gpu as chip
    from engine.roofline.kv_check import KV_RECORDING, kv_rows, read_kv_check

    ar, spec = (Trace.from_json(ROOT / "assets" / "traces" / f"ngram-copy-{k}.json") for k in ("ar", "spec"))
    bench = task_records.load(ROOT / "assets" / "spec_bench" / "recording.json")  # as the Benchmarks page reads it
    where = f"recorded on {bench['machine']}, {bench['dtype']}, {bench['date']} ({bench['settings'].get('note', '')})"
    costs, roof = architecture("8B").costs("bfloat16"), predictor.Roof.from_gpu(chip("H200"), "bfloat16")
    return {
        "playground_latency": charts.latency_figure(ar, spec),
        "playground_tokens_per_pass": charts.tokens_per_pass_figure(ar, spec),
        "predictor_passes": pass_time_figure(
            costs, roof, 256, "graph", "Llama-3.1-8B on the NVIDIA H200 SXM 141 GB, bfloat16, context 1,024, CUDA-graph overhead"
        ),
        "predictor_grid": speedup_heatmap(
            predictor.speedup_grid(costs, roof, 0.7, 0.05, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512], range(1, 9), 1024),
            "α 0.70, c 0.05, Llama-3.1-8B on the NVIDIA H200 SXM 141 GB, bfloat16, context 1,024",
        ),
        "kv_check": kv_check.kv_figure(kv_rows(read_kv_check(KV_RECORDING)), "What the KV cache costs a pass, measured on the H200"),
        "benchmarks_board": benchmarks.leaderboard_figure(bench["rows"], 1, where),
        "benchmarks_batch": benchmarks.batch_figure(bench["rows"], benchmarks.contenders_of(bench["rows"])[0], where),
    }


def retimed_variants() -> dict:
    """The re-timed chart (app/views/h200.py `figure`) in the two shapes no single recording draws, from the shipped
    recordings' own lanes: lesson 3's speculative runs drafting with a drafter nobody priced (their bars ceilings), and
    lessons 3 and 5 in one measurement (twelve runs, cut into panels)."""
    import copy

    from app.views.h200 import figure

    ridge, adaptive = _rec("past_the_ridge"), _rec("adaptive")
    label = f"recorded on {ridge['machine']}, {ridge['date']}"
    runs = copy.deepcopy(ridge["measurement"]["runs"])
    for run in runs:
        run["spec"]["drafter"] = "a drafter nobody timed"
    both = {"lesson 3": ridge["measurement"], "lesson 5": adaptive["measurement"]}
    return {"retimed_unpriced": figure({"runs": runs}, label), "retimed_twelve_runs": figure(both, label)}


# Every text plotly.js draws on a chart, and every whisker (error bar), as screen boxes {x0, y0, x1, y1, text}.
BOXES_JS = """
async ([spec, width]) => {
  const div = document.getElementById('chart');
  await Plotly.newPlot(div, spec.data, Object.assign({}, spec.layout, {width: width}), {staticPlot: true});
  const box = (el, kind) => { const r = el.getBoundingClientRect();
    return {kind: kind, text: el.textContent, x0: r.left, y0: r.top, x1: r.right, y1: r.bottom}; };
  const all = (sel, kind) => Array.from(div.querySelectorAll(sel)).map(el => box(el, kind))
    .filter(b => b.x1 - b.x0 > 0.5 && b.y1 - b.y0 > 0.5 && b.text.trim() !== '' || kind === 'whisker');
  return {
    labels: all('g.textpoint text', 'label').concat(all('text.bartext', 'label')),
    notes: all('g.annotation text', 'annotation').concat(all('text.gtitle', 'title')),
    legend: all('g.legend text.legendtext', 'legend'),
    ticks: all('g.xtick text, g.ytick text, g.x2tick text, g.y2tick text, g.x3tick text, g.y3tick text', 'tick'),
    whiskers: Array.from(div.querySelectorAll('g.errorbar path.yerror')).map(el => box(el, 'whisker'))
      .filter(b => b.y1 - b.y0 > 0.5),
    rules: Array.from(div.querySelectorAll('g.shapelayer path')).map(el => box(el, 'rule'))
      .filter(b => b.x1 - b.x0 > 20 && b.y1 - b.y0 < 3),
    fonts: Array.from(div.querySelectorAll('text')).filter(t => t.textContent.trim() !== '')
      .map(t => ({text: t.textContent, size: parseFloat(getComputedStyle(t).fontSize),
                  fill: getComputedStyle(t).fill, opacity: getComputedStyle(t).opacity})),
  };
}
"""


# Where plotly's toolbar stands (it shows at the top right on hover) and the title's lines.
TOOLBAR_JS = """
async ([spec, width]) => {
  const div = document.getElementById('chart');
  Plotly.purge(div);  // a chart drawn static before has no toolbar to show
  await Plotly.newPlot(div, spec.data, Object.assign({}, spec.layout, {width: width}), {displayModeBar: true});
  const box = el => { const r = el.getBoundingClientRect();
    return {text: el.textContent, x0: r.left, y0: r.top, x1: r.right, y1: r.bottom}; };
  return {toolbar: box(div.querySelector('.modebar')), titles: Array.from(div.querySelectorAll('text.gtitle')).map(box)};
}
"""


GREY = {"color": "#808495"}  # Streamlit's plotly theme's axis, legend and subplot-title grey: 3.7:1 on white
AXIS = {"tickfont": GREY, "title": {"font": GREY}}
GREY_THEME = {
    "layout": {
        "font": GREY,
        "title": {"font": GREY},
        "legend": {"font": GREY},
        "xaxis": AXIS,
        "yaxis": AXIS,
        "annotationdefaults": {"font": GREY},
    }
}


class Renderer:
    """One headless Chromium with plotly.js loaded once; `boxes(fig, width)` draws a figure and returns its boxes,
    `png(fig, width, path)` writes it as an image."""

    def __init__(self, playwright):
        from plotly.offline import get_plotlyjs

        self.browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        self.page = self.browser.new_page(viewport={"width": max(WIDTHS) + 40, "height": 1400})
        self.page.set_content(f"<html><body style='margin:0'><script>{get_plotlyjs()}</script><div id='chart'></div></body></html>")

    def boxes(self, fig, width: int) -> dict:
        spec = json.loads(fig.to_json())
        spec["layout"]["template"] = GREY_THEME  # as Streamlit's theme: a text with no colour of its own comes out grey
        return self.page.evaluate(BOXES_JS, [spec, width])

    def toolbar(self, fig, width: int) -> dict:
        return self.page.evaluate(TOOLBAR_JS, [json.loads(fig.to_json()), width])

    def png(self, fig, width: int, path: Path) -> None:
        self.boxes(fig, width)
        self.page.locator("#chart").screenshot(path=str(path))

    def close(self) -> None:
        self.browser.close()


def main(out: str) -> None:
    from playwright.sync_api import sync_playwright

    Path(out).mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        r = Renderer(p)
        for name, fig in lesson_figures().items():
            for width in WIDTHS:
                r.png(fig, width, Path(out) / f"{name}_{width}.png")
            Path(out, f"{name}.json").write_text(json.dumps(r.boxes(fig, WIDTHS[0]), indent=1))
        r.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "artifacts/lesson_charts")
