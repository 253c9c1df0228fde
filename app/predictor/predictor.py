"""Predictor: a roofline model of pass time and speculative speedup on named GPUs, checked against measurements.

Page shape (docs/design.md §7, Streamlit's demos): title, short prose, controls, result. The lines and the heat map are a MODEL
(engine/roofline/predictor.py: data-sheet peaks, SpecLab's measured launch overheads, Leviathan's formula), labelled
so everywhere; the points over them are measurements: SpecLab's recorded GPU runs (engine/roofline/recordings.py) and,
on request, this machine's own pass-cost curve (engine/decoding/passcurve.py) under the app's run lock. Section 5 checks
the model's KV term against a CPU's passes at several contexts: a recording labelled with its machine and date
(engine/roofline/kv_check.py, scripts/record/record_kv_check.py), measured again live on request. Every control
is bound to the URL; a link value a control cannot take falls back to the default with a notice.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.common import resources
from app.common.page_helpers import link_notices, load_pair_or_error, show_failure
from app.common.url_keys import bound
from app.views.kv_check import growth_lines, kv_figure, kv_table, ratio_line, recording_caption, recording_label
from app.views.predictor import (
    MeasuredSeries,
    crossover_lines,
    error_table,
    kv_ridge_text,
    pass_time_figure,
    ridge_sentence,
    series_summary,
    speedup_heatmap,
)
from engine import ConfigError
from engine.bench.kv_passes import measure_kv_passes
from engine.decoding.passcurve import pass_curve
from engine.roofline.architectures import ARCHITECTURES, architecture
from engine.roofline.gpus import GPUS, gpu_for_device
from engine.roofline.kv_check import KV_RECORDING, KvRecording, kv_growth, kv_rows, parse_kv_check, read_kv_check
from engine.roofline.predictor import FLOOR_LABELS, FLOOR_SOURCE, GRID_BATCHES, MEMORY_USE, Roof, floor_ms, pass_ms, speedup_grid
from engine.roofline.recordings import RecordingError, check, load_recordings

MODAL = "https://modal.com/llm-almanac/spec-dec-roofline"
LEVIATHAN = "https://arxiv.org/abs/2211.17192"
GPU_BY_LABEL = {g.name: key for key, g in GPUS.items()}
MODEL_BY_LABEL = {f"{a.key} · {a.name}": key for key, a in ARCHITECTURES.items()}
DTYPES = ["bfloat16", "float16", "float32"]
CONTEXTS = [0, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
FLOOR_BY_LABEL = {"CUDA graph": "graph", "eager": "eager", "none": "none"}
MODE_LABELS = {"graph": "CUDA graph", "eager": "eager"}
DEPTHS = list(range(1, 9))
PAGE = "predictor"  # its bound widgets and their labels: app/common/url_keys.py
MEASURE_ERRORS = (ConfigError, ValueError, OSError, RuntimeError)


def short_key(text: str | None, labels: dict[str, str]) -> str | None:
    """The label (a widget's option) whose short key is `text`, compared without case ("t4" -> "NVIDIA T4 (16 GB)"),
    or None where it names none; a link may give either."""
    by_key = {key.casefold(): label for label, key in labels.items()}
    return by_key.get(text.strip().casefold()) if isinstance(text, str) else None


def controls() -> dict:
    """Draw the URL-bound controls; return their values by key (labels, as the widgets hold them)."""
    first_run = "predictor_notices" not in st.session_state
    raw = st.query_params.to_dict() if first_run else {}  # read before any bound widget is drawn
    for key, labels in (("gpu", GPU_BY_LABEL), ("model", MODEL_BY_LABEL)):
        label = short_key(raw.get(key), labels)
        if label is not None:  # `?gpu=T4` or `?model=8b`: the short name a reader types, taken as the widget's label
            raw[key] = st.session_state[key] = label
    notices = st.container()
    with st.container(border=True):
        c1, c2, c3, c4 = st.columns([3, 3, 2, 2])
        values = {
            "gpu": c1.selectbox("GPU", list(GPU_BY_LABEL), index=list(GPUS).index("H200"), **bound(PAGE, "gpu")),
            "model": c2.selectbox("Model size", list(MODEL_BY_LABEL), index=list(ARCHITECTURES).index("8B"), **bound(PAGE, "model")),
            "dtype": c3.radio(
                "dtype",
                DTYPES,
                **bound(PAGE, "dtype"),
                horizontal=True,
                help="Weights and KV cache in this dtype; FLOP/s from the GPU's figure for it.",
            ),
            "floor": c4.radio(
                "Overhead per pass",
                list(FLOOR_BY_LABEL),
                **bound(PAGE, "floor"),
                horizontal=True,
                help="Added to every pass: a pass SpecLab measured on an H200 minus its roofline time at data-sheet "
                "peaks. Eager = each kernel launched from Python (dispatch and launches dominate); CUDA graph = the same "
                "forward replayed, where what is left is mostly kernels short of peak bandwidth. Fitted on the 1.7B shape's "
                "one-token pass, so that pass scores no error in section 3.",
            ),
        }
        s1, s2, s3 = st.columns(3)
        values["ctx"] = s1.select_slider("Context length (KV cache tokens per sequence)", CONTEXTS, value=1024, **bound(PAGE, "ctx"))
        values["alpha"] = s2.slider("α (per-token acceptance)", 0.0, 1.0, 0.7, step=0.01, **bound(PAGE, "alpha"))
        values["c"] = s3.slider("c (draft step cost ÷ target step cost)", 0.0, 1.0, 0.05, step=0.01, **bound(PAGE, "c"))
    st.session_state["predictor_notices"] = link_notices(PAGE, raw) if first_run else []
    for notice in st.session_state["predictor_notices"]:
        notices.warning(notice, icon=":material/link_off:")
    return values


def recorded_series(records, chip, arch, dtype: str, costs, roof: Roof) -> list[MeasuredSeries]:
    """The recorded passes of this GPU, model shape and dtype, one series per (file, mode), with the model's times."""
    groups: dict[tuple, list] = {}
    for r in records:
        if r.dtype == dtype and gpu_for_device(r.device) is chip and architecture_or_none(r.shape) is arch:
            groups.setdefault((r.source, r.mode, r.device, r.date), []).append(r)
    series = []
    for (source, mode, device, date), group in groups.items():
        group.sort(key=lambda r: r.tokens_per_pass)
        series.append(
            MeasuredSeries(
                label=f"measured on {device}, {MODE_LABELS[mode]} ({date}, {source.split('/')[-1]})",
                tokens=tuple(r.tokens_per_pass for r in group),
                ms=tuple(r.ms for r in group),
                predicted=tuple(pass_ms(costs, roof, r.batch, r.new_tokens, r.context, r.mode, r.logits_tokens) for r in group),
                detail=tuple(f"batch {r.batch} × {r.new_tokens}, context {r.context}" for r in group),
            )
        )
    return series


@st.cache_data(show_spinner=False)
def kv_recording(path: str, mtime: float) -> tuple[KvRecording | None, str | None]:
    """The shipped KV check (engine/roofline/kv_check.py), or None and the one line saying why not."""
    try:
        return read_kv_check(Path(path)), None
    except RecordingError as exc:
        return None, str(exc)


def draw_kv_check(rec: KvRecording, label: str, key: str) -> None:
    """A KV check drawn in the house order: the chart, the table, then a few lines read from its numbers."""
    rows = kv_rows(rec)
    title = f"{rec.model_name.split(' (')[0]} passes against context, {label}: measured, and the roofline model (dashed)"
    st.plotly_chart(kv_figure(rows, title), width="stretch", key=key)
    st.dataframe(kv_table(rows), hide_index=True)
    st.markdown(ratio_line(rows))
    for line in growth_lines(kv_growth(rows)):
        st.markdown(f"- {line}")


def architecture_or_none(shape: str):
    try:
        return architecture(shape)
    except ValueError:
        return None


st.title("🧮 Predictor")
st.markdown(
    "**A model, not a measurement.** What would one forward pass, and speculative decoding, cost on a GPU this "
    "server does not have? The roofline says a pass takes at least as long as streaming its bytes (every weight, "
    "plus each sequence's KV cache) at the memory bandwidth, and at least as long as its FLOPs at the peak FLOP/s; "
    "a real pass also pays an overhead for launching its kernels, which the model adds. Speculation's speedup then follows "
    f"Leviathan et al.'s formula ([2023]({LEVIATHAN})) with the verify pass priced by the same model: "
    "E[tokens](α, k) · T(B, 1) / (k · c · T(B, 1) + T(B, k + 1)). "
    f"(The idea of Modal's [Spec Dec Roofline]({MODAL}), here checked against SpecLab's own recorded passes.)"
)
values = controls()
chip, arch = GPUS[GPU_BY_LABEL[values["gpu"]]], ARCHITECTURES[MODEL_BY_LABEL[values["model"]]]
dtype, floor, context = values["dtype"], FLOOR_BY_LABEL[values["floor"]], int(values["ctx"])
alpha, c = float(values["alpha"]), float(values["c"])
costs = arch.costs(dtype)
records, refused = load_recordings()

try:
    roof = Roof.from_gpu(chip, dtype)
except ValueError as exc:
    st.error(f"{exc}: its data sheet gives no figure for it. Fix: choose float16 or float32.", icon=":material/error:")
    roof = None

if roof is not None:
    memory = chip.memory_gb * 1e9
    st.caption(
        f"**{chip.name}**: {chip.bandwidth / 1e9:,.0f} GB/s, {roof.flops / 1e12:,.1f} TFLOP/s dense {dtype} "
        f"(source: {chip.source}); ridge point {roof.ridge_point:.0f} FLOP/byte. **{arch.name}** "
        f"([config]({arch.source})): {costs.weight_bytes / 1e9:.2f} GB of weights streamed per pass, "
        f"{costs.kv_bytes_per_token / 1e3:.1f} kB of KV cache per token ({costs.kv_bytes_per_token * context / 1e6:,.1f} "
        f"MB per sequence at {context:,} tokens). Overhead added to every pass: eager {floor_ms(costs, 'eager'):.2f} ms, "
        f"CUDA graph {floor_ms(costs, 'graph'):.2f} ms for {arch.layers} layers (a measured pass minus its roofline "
        f"time, scaled by layers from {FLOOR_SOURCE})."
    )
    st.caption(ridge_sentence(costs, roof, context))
    for note in (chip.note, arch.note):
        if note:
            st.caption(f"Note: {note}")
    if costs.held_bytes > MEMORY_USE * memory:
        st.warning(
            f"{arch.name}'s weights ({costs.held_bytes / 1e9:.0f} GB in {dtype}) do not fit in {MEMORY_USE:.0%} of the "
            f"{chip.name}'s {chip.memory_gb:.0f} GB (the rest is left to activations and the runtime, as vLLM's default "
            "gpu_memory_utilization does): it would need several GPUs (tensor parallelism, which this model does not "
            "price). The pass-time curve is shown as if it fitted; the heat map is empty.",
            icon=":material/memory:",
        )

    # --- 1. pass time vs tokens per pass ---------------------------------------------------------
    st.subheader("1 · What one pass costs")
    series = recorded_series(records, chip, arch, dtype, costs, roof)
    floors = {"eager": floor_ms(costs, "eager"), "graph": floor_ms(costs, "graph")}
    title = f"{arch.name} on the {chip.name}, {dtype}, context {context:,}, {FLOOR_LABELS[floor]}"
    st.plotly_chart(pass_time_figure(costs, roof, context, floor, title, series, floors), width="stretch", key="pass_fig")
    if series:
        st.markdown(
            "**The model against SpecLab's recorded passes** (each point's model time uses that pass's own "
            "batch, tokens, context and the overhead of its mode):"
        )
        for s in series:
            st.markdown(f"- {series_summary(s)}")
    else:
        have = sorted({(r.device, getattr(architecture_or_none(r.shape), "name", r.shape), r.dtype) for r in records})
        st.caption(
            "No recorded pass for this GPU, model and dtype, so there is nothing to check this curve "
            "against here. SpecLab has recorded passes for: " + "; ".join(f"{d} × {s} ({t})" for d, s, t in have) + "."
        )

    # --- 2. speedup over batch x depth -----------------------------------------------------------
    st.subheader("2 · Predicted speedup over batch × depth")
    grid = speedup_grid(costs, roof, alpha, c, GRID_BATCHES, DEPTHS, context, floor, memory)
    st.plotly_chart(speedup_heatmap(grid, f"α {alpha:.2f}, c {c:.2f}, {title}"), width="stretch", key="grid_fig")
    for line in crossover_lines(grid):
        st.markdown(f"- {line}")
    if 64 in grid.batches and 4 in grid.depths and grid.values[grid.depths.index(4)][grid.batches.index(64)] is not None:
        st.markdown(kv_ridge_text(costs, roof, context, alpha, c, floor, batch=64, depth=4))
    st.caption(
        "A black outline marks each depth's crossover: the first batch where speculation is predicted to fall below plain "
        "decoding. Empty cells: the weights plus batch × (context + k + 1) tokens of KV cache exceed the GPU's "
        "memory. c prices a draft step at c target steps at the same batch; α is per token (Leviathan's)."
    )

# --- 3. the model against every recording --------------------------------------------------------
st.subheader("3 · How far off is the model?")
st.markdown(
    "Every recorded GPU pass SpecLab ships, predicted with its GPU's data-sheet peaks and again with the "
    "peaks that run probed itself (a copy and a matmul), with the overhead of its mode:"
)
rows = check(records)
if rows:
    st.dataframe(error_table(rows), hide_index=True)
else:
    st.caption("No recorded GPU passes were found (docs/measurements/, assets/recordings/).")
for line in refused:
    st.warning(f"A recording could not be used: {line}", icon=":material/error:")

# --- 4. this machine -----------------------------------------------------------------------------
st.subheader("4 · This machine, measured now")
st.markdown(
    "The same model for the embedded target (SmolLM2-135M) on this server, with the peaks probed here "
    "(a copy and a matmul, engine/hardware.py) and no launch overhead (the overheads above were measured "
    "on a GPU), against the target's pass-cost curve timed on this machine (batch 1, fastest of 3; cached "
    "after the first time, about 15 s on a 2-core CPU)."
)
if st.button("Measure this machine's pass-cost curve", key="measure_cpu"):
    loaded = load_pair_or_error("embedded", "auto", with_probe=True)
    if loaded is not None:
        pair, probe = loaded
        with resources.model_turn(st.empty()):
            try:
                with st.spinner("Timing the target's passes (or reading this machine's cached curve)…"):
                    curve = pass_curve(pair)
                st.session_state["cpu_check"] = {"curve": curve, "costs": pair.target_costs, "probe": probe}
            except MEASURE_ERRORS as exc:
                show_failure("The measurement failed", exc)
measured = st.session_state.get("cpu_check")
if measured:
    curve, cpu_costs, probe = measured["curve"], measured["costs"], measured["probe"]
    cpu_roof = Roof(f"{probe.device_name}, probed", probe.peak_bandwidth, probe.peak_flops)
    cpu = MeasuredSeries(
        label=f"measured on {probe.device_name} ({curve.measured_at[:10]})",
        tokens=curve.tokens,
        ms=curve.ms,
        predicted=tuple(pass_ms(cpu_costs, cpu_roof, 1, n, curve.context, "none") for n in curve.tokens),
        detail=tuple(f"batch 1 × {n}, context {curve.context}" for n in curve.tokens),
    )
    st.plotly_chart(
        pass_time_figure(
            cpu_costs,
            cpu_roof,
            curve.context,
            "none",
            f"SmolLM2-135M on {probe.device_name}, {probe.dtype}, probed peaks",
            [cpu],
            top=max(curve.tokens),
        ),
        width="stretch",
        key="cpu_fig",
    )
    st.markdown(f"- {series_summary(cpu)}")
    st.caption(
        f"Probed here: {probe.peak_bandwidth / 1e9:.1f} GB/s, {probe.peak_flops / 1e9:.0f} GFLOP/s "
        f"({probe.dtype}); curve measured {curve.measured_at} ({curve.key})."
    )


# --- 5. the KV term against this CPU's long-context passes -----------------------------------------
st.subheader("5 · The KV term, checked against a CPU's long-context passes")
rec, problem = kv_recording(str(KV_RECORDING), KV_RECORDING.stat().st_mtime if KV_RECORDING.exists() else 0.0)
if rec is None:
    st.warning(f"The recorded KV check could not be shown: {problem}", icon=":material/error:")
else:
    st.markdown(
        f"**Recorded: {recording_label(rec)}.** Every pass streams the weights once and each row's KV cache "
        "(context + new tokens, keys and values of every layer); the model prices those bytes at the probed bandwidth. "
        f"Here are passes at {len({p.context for p in rec.passes})} contexts, measured, against the model's time for each; "
        "a line's slope is the KV "
        "term, and the growth from the shortest context to the longest sets that term alone against the machine."
    )
    draw_kv_check(rec, recording_label(rec), "kv_fig")
    st.caption(recording_caption(rec))
    if st.button("Measure these passes on this machine now", key="measure_kv"):
        loaded = load_pair_or_error("embedded", "auto", with_probe=True)
        if loaded is not None:
            pair, probe = loaded
            with resources.model_turn(st.empty()):
                try:  # the recording script's shapes (a file's own shapes never reach a measurement)
                    with st.spinner("Timing the passes at each context (one round, 3 passes each)…"):
                        live = measure_kv_passes(pair, probe, repeats=3, rounds=1, quick_probe=True)
                    st.session_state["kv_live"] = parse_kv_check(live | {"note": "one round, measured live"}, "the live check")
                except MEASURE_ERRORS as exc:  # RecordingError is a ValueError
                    show_failure("The measurement failed", exc)
    live = st.session_state.get("kv_live")
    if live is not None:
        here = recording_label(live, here=True)
        st.markdown(f"**Measured now: {here}** ({live.machine}), the recording script's passes, one round each:")
        draw_kv_check(live, f"{here}, measured now", "kv_live_fig")
        st.caption(recording_caption(live).replace("📼 Recorded on", "Measured on"))
