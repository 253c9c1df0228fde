"""Lesson 1, memory-bound: one target pass timed against the tokens it carries, interleaved rounds, at sizes chosen
from this machine's room; the claim is that past the room every extra token costs real time. Its record, its run,
its words, its chart and table, and its view of the probe and of the H200's passes.
"""

from __future__ import annotations

import datetime as dt
import math

import plotly.graph_objects as go
import streamlit as st

from app.common import measurement as ms
from app.common.measurement import CHOSEN, PASS_ROW_SPEC, PEAKS
from app.lessons.kit import gpu, numbers
from app.lessons.kit.experiment import CURVE_HELP, Claim, Experiment, Knob, Prediction
from app.lessons.kit.runs import knee_tokens, machine_curve, metered, remember_room
from app.lessons.kit.show import show_chart
from app.views import h200, metrics, roofline
from app.views.bars import COLORS, LABEL_FONT, LABEL_MARK, PLAIN_COLOR, RIDGE_COLOR, esc, frame, whiskers
from engine import verdict as rule
from engine.costs import ridge_tokens, ridge_tokens_with_kv
from engine.decoding.passcurve import pass_costs
from engine.roofline.architectures import architecture

READ_OVER_COPY = 1.28  # the most a read streamed over the copy's counted rate on the 2-core EPYC (docs/measurements.md)


DISTURBED_BELOW = 0.75  # a live probe under 75% of the recording's peak on the same kind of machine: disturbed


DISTURBED = "DISTURBED"


# --- 1. one token per pass leaves the arithmetic idle ----------------------------------------------
PASS_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


LARGEST = (0, 16, 32, 64, 128)  # the largest pass's options; 0 = "from this machine's curve" (largest_pass)


PASS_ROUNDS = 5  # every size once per round, the rounds in turn: about 2 s on 2 cores


def past_tokens(room: int) -> int:
    """The pass lesson 1 reads "past the room": numbers.PAST times the room's tokens."""
    return int(numbers.PAST * room)


def pass_against_probe(m: dict) -> str:
    """The one-token pass's bandwidth as a share of the probed peak, and, above 100%, why."""
    rows, peak = m.get("rows") or [], m.get("peak_bandwidth")
    if not rows or not peak:
        return ""
    one, share = rows[0], rows[0]["achieved_bandwidth"] / peak
    text = (
        f"The {one['tokens_per_pass']}-token pass read {one['achieved_bandwidth'] / 1e9:.1f} GB/s of weights and KV cache, "
        f"{share:.0%} of the {peak / 1e9:.1f} GB/s probed."
    )
    if share <= 1.0:
        return text + " Below 100%: the probe's stream was at least as fast as this pass."
    why = (
        f" Above 100% does not mean the pass beat the memory: the probe ran once, when the app started, and a probe "
        f"made before 2026-12-03 timed only a copy, counted as 2 bytes per byte, while a pass mostly reads; on a 2-core "
        f"CPU SpecLab measured, a read streamed up to {READ_OVER_COPY:.2f}× the copy's counted rate (docs/measurements.md), and this pass "
        f"is {share:.2f}× the probe"
    )
    fits = share <= READ_OVER_COPY
    return (
        text
        + why
        + (", inside that gap. " if fits else ", beyond that gap: the probe's moment was slower than the pass's (other load). ")
        + "The probe now times a read as well and takes the higher."
    )


def live_probe_note(m: dict, label: str, recorded: dict | None) -> str | None:
    """For a live run: its probe against the shipped recording's on the same kind of machine; a sentence starting
    with DISTURBED where it fell below DISTURBED_BELOW of it, else None. `recorded` is the lesson's recording (as
    app/common/measurement.py loads it) or None."""
    if not recorded or not str(label).startswith("measured live") or str(recorded.get("machine", "")) not in str(label):
        return None
    rec = recorded.get("measurement") or {}
    pairs = [(m.get(k), rec.get(k)) for k in ("peak_bandwidth", "peak_flops")]
    if not all(now and then for now, then in pairs):
        return None
    (bw, bw_rec), (fl, fl_rec) = pairs
    if min(bw / bw_rec, fl / fl_rec) >= DISTURBED_BELOW:
        return None
    return (
        f"{DISTURBED}: probed now at {bw / 1e9:.1f} GB/s and {fl / 1e9:.0f} GFLOP/s, against {bw_rec / 1e9:.1f} GB/s and "
        f"{fl_rec / 1e9:.0f} GFLOP/s when this lesson was recorded on the same kind of machine ({recorded['machine']}, "
        f"{recorded.get('date', '')}). Other work is slowing this machine, so its live timings, and the ridge drawn from "
        "these peaks, are not its quiet ones: compare the curve's shape, or re-measure when it is quiet."
    )


def largest_pass(room: int) -> int:
    """The largest pass timed: the smallest of PASS_SIZES carrying twice the pass past the room, 16 to the last size."""
    return next((n for n in PASS_SIZES if n >= max(16, 2 * past_tokens(room))), PASS_SIZES[-1])


def memory_bound(pair, probe, s: dict) -> dict:
    """One target pass at batch 1 with 1..`largest` new tokens (PASS_ROUNDS rounds over every size, the median of
    3 timed passes per size and round; a row's ms is the median over the rounds, its spread the rounds'), this
    machine's probed peaks to read it against, and its pass curve, from which `largest` 0 is chosen; where the rows
    find the room, they become the curve lessons 2 and 3 choose from next (remember_room)."""
    largest = int(s["largest"]) or largest_pass(machine_curve(pair)[1])
    sizes = [n for n in PASS_SIZES if n <= largest]
    rounds, other_cores = metered(lambda: pass_costs(pair, [1], sizes, context=int(s["context"]), repeats=3), PASS_ROUNDS)
    rows = []
    for per_size in zip(*rounds):
        times = [row["ms"] for row in per_size]
        row = {key: per_size[ms.median_index(times)][key] for key in ms.PASS_ROW}  # the fields the schema records
        rows.append(row | {"ms_runs": ms.spread(times)})
    tokens, times = rule_curve(rows)
    if numbers.room_tokens(tokens, times) < tokens[-1]:  # the rows found the room: lessons 2 and 3 read this one next
        when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        label = f"lesson 1's rows: {PASS_ROUNDS} interleaved rounds at context {int(s['context'])}, each size by the rule"
        curve = {"tokens": tokens, "ms": times, "knee_tokens": knee_tokens(tokens, times), "key": label, "measured_at": when}
        remember_room(pair, curve | {"other_cores": other_cores}, numbers.room_tokens(tokens, times))
    return {
        "rows": rows,
        "peak_bandwidth": probe.peak_bandwidth,
        "peak_flops": probe.peak_flops,
        "ridge_point": probe.ridge_point,
        "dtype": probe.dtype,
        "ridge_tokens": ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth),
        "chosen": {"room": machine_curve(pair)[1], "largest": largest},  # the room, from these rows where they found one
        "curve": machine_curve(pair)[0],
        "other_cores": other_cores,  # what other processes kept busy while the rows were timed (numbers.disturbed_live)
    }


def rule_curve(rows: list[dict]) -> tuple[list[int], list[float]]:
    """(tokens, ms) of the rows as the chart reads them, the one-token pass's median × each size's ratio by the rule
    (`times_one`): the room, chart, words and later lessons read this one curve, a far round moving them all alike."""
    rows = sorted(rows, key=lambda r: r["tokens_per_pass"])
    return [r["tokens_per_pass"] for r in rows], [rows[0]["ms"] * times_one(r, rows[0])[0] for r in rows]


def rows_room(m: dict) -> int:  # the room these rows measured, on `rule_curve`
    return numbers.room_tokens(*rule_curve(m["rows"]))


def _row(rows: list[dict], tokens: int) -> dict:
    return min(rows, key=lambda r: abs(r["tokens_per_pass"] - tokens))


def read_tokens(m: dict) -> int:
    """The pass read as "past the room": the measured pass nearest numbers.PAST times the rows' room (`rows_room`)."""
    return int(_row(m["rows"], past_tokens(rows_room(m)))["tokens_per_pass"])


def pass_ratio(m: dict, s: dict) -> float | None:
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    return times_one(_row(rows, read_tokens(m)), rows[0])[0] if rows and rows[0]["ms"] > 0 else None


def roofline_ratio(m: dict, s: dict) -> list[tuple[str, float | None]]:
    """The roofline's ratio: time = max(bytes / peak bandwidth, FLOPs / peak FLOP/s), the read pass over 1 token."""
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    if not rows:
        return [("roofline from the probed peaks", None)]
    past = _row(rows, read_tokens(m))
    return [
        (
            "roofline from the probed peaks: max(bytes ÷ bandwidth, FLOPs ÷ FLOP/s)",
            numbers.roofline_s(past, m) / numbers.roofline_s(rows[0], m),
        )
    ]


def _pass_past_room(m: dict) -> tuple[dict, dict]:
    """Lesson 1: the measured pass nearest four times the room, and the one-token pass, in ms per round."""
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    past = next(r for r in rows if r["tokens_per_pass"] == read_tokens(m))
    return past["ms_runs"], rows[0]["ms_runs"]


def first_pass(m: dict) -> tuple[str, float] | None:
    """(what, ms) of the run's one-token pass, for the live-against-recorded comparison."""
    rows = sorted(m.get("rows") or [], key=lambda r: r["tokens_per_pass"])
    return (f"a {rows[0]['tokens_per_pass']}-token pass", rows[0]["ms"]) if rows else None


def cheaper_notes(rows: list[dict]) -> list[str]:
    """Where a pass carrying more tokens has a lower median than a smaller one: 'the same within noise' when their
    rounds overlap, else what that is (a kernel that suits that size), never 'cheaper tokens'."""
    out = []
    for small, large in zip(rows, rows[1:]):
        if large["ms"] >= small["ms"]:
            continue
        a, b = small.get("ms_runs"), large.get("ms_runs")
        head = f"The {large['tokens_per_pass']}-token pass read {large['ms']:.2f} ms"
        head += f" against {small['ms']:.2f} ms for {small['tokens_per_pass']}"
        v = rule.cheaper(b["values"], a["values"]) if a and b else None
        if v is not None and v.sign > 0:
            out.append(f"{head}: lower by the rule ({v.interval}), a kernel path that suits that size, not cheaper tokens.")
        else:
            out.append(f"{head}: the same within noise ({v.kind if v else 'one round'}), not a cheaper pass.")
    return out


# --- lesson 1: the room, and past it ------------------------------------------------------------
def memory_bound_figure(m: dict, s: dict, label: str = "") -> go.Figure:
    """A pass's cost in one-token passes against the tokens it carries (log-log), with the rounds' range, the
    room's line (numbers.ROOM× a one-token pass) and the line of a cost in step with the tokens (n tokens, n×)."""
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    base = rows[0]["ms"]
    xs = [r["tokens_per_pass"] for r in rows]
    kept = [numbers.with_far(r.get("ms_runs")) for r in rows]
    vals = [times_one(r, rows[0]) for r in rows]  # the one rule's ratio and its 95% range, as the words and the claim
    far = [(r["tokens_per_pass"], r["ms_runs"]["values"][i] / base) for r, (_, idx) in zip(rows, kept) for i in idx]
    fig = go.Figure()
    fig.add_scatter(x=xs, y=xs, mode="lines", name="in step with the tokens (n tokens cost n×)", line={"color": PLAIN_COLOR, "dash": "dot"})
    fig.add_scatter(
        x=xs,
        y=[v for v, _, _ in vals],
        mode="lines+markers",
        name="measured: time ÷ a one-token pass over the paired rounds, whisker = its 95% range",
        line={"color": COLORS[0], "width": 3},
        error_y=whiskers(vals),
        hovertemplate="%{x} tokens per pass: %{y:.2f}× a one-token pass<extra></extra>",
    )
    # Each label off its whisker's end (beside the point it sat on the whisker), and off the room's line: under the
    # whisker for a pass inside the room, above it past the room.
    inside = [v < numbers.ROOM for v, _, _ in vals]
    fig.add_scatter(
        x=xs,
        y=[(lo if lo is not None else v) if low else (hi if hi is not None else v) for (v, lo, hi), low in zip(vals, inside)],
        text=[f"{v:.2f}×" for v, _, _ in vals],
        **LABEL_MARK,  # an unseen marker: the label a marker's height off the whisker's cap
        textposition=["bottom center" if low else "top center" for low in inside],
        textfont=LABEL_FONT,
        showlegend=False,
        hoverinfo="skip",
        cliponaxis=False,
    )
    ends = [e for v, lo, hi in vals for e in (lo or v, hi or v)] + [xs[-1]]
    fig.update_yaxes(range=[math.log10(min(ends) / 1.3), math.log10(max(ends) * 1.3)])  # room for the labels
    if far:
        fig.add_scatter(
            x=[x for x, _ in far],
            y=[y for _, y in far],
            mode="markers",
            marker={"symbol": "x-open", "size": 10, "color": RIDGE_COLOR},
            name="a round far outside the others (kept in the rule)",
        )
    room = rows_room(m)
    fig.add_scatter(  # the room's line, named in the legend: its label on the plot sat on the labels and whiskers
        x=[xs[0], xs[-1]],
        y=[numbers.ROOM] * 2,
        mode="lines",
        line={"color": RIDGE_COLOR, "dash": "dash"},
        name=f"{numbers.ROOM}× a one-token pass: the room reaches {room} token{'s' if room != 1 else ''} here",
        hoverinfo="skip",
    )
    fig.update_xaxes(type="log", title_text="tokens per pass (batch 1)", tickvals=xs)  # plotly's minor log ticks crowd
    fig.update_yaxes(type="log", title_text="time ÷ a one-token pass", tickvals=[0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000])
    return frame(fig, "A pass's time against the tokens it carries, in one-token passes", label, height=420)


def memory_bound_table(m: dict) -> list[dict]:
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    out = []
    for prev, r in zip([None, *rows], rows):
        sp, far = numbers.with_far(r.get("ms_runs"))
        cheaper = prev is not None and r["ms"] < prev["ms"]
        out.append(
            {
                "tokens per pass": r["tokens_per_pass"],
                "ms (median)": round(r["ms"], 2),
                "rounds (ms)": (f"{sp['min']:.1f}–{sp['max']:.1f}" if sp else "one round")
                + (f", round {', '.join(str(i + 1) for i in far)} far from the others" if far else ""),
                "× one-token pass": round(times_one(r, rows[0])[0], 2),
                "note": "same within noise as the smaller pass" if cheaper else "",
                "GFLOP": round(r["flops"] / 1e9, 2),
                "FLOP/byte": round(r["flops"] / r["bytes"], 2) if r["bytes"] else None,
            }
        )
    return out


def times_one(row: dict, one: dict) -> tuple[float, float | None, float | None]:
    """A pass's time ÷ the one-token pass's, by the one rule over their paired rounds (engine/verdict.py: the
    typical ratio and its 95% range), the number the chart, the table, the words, the prediction and the claim all
    show; the ratio of the medians where a row has one round."""
    a, b = row.get("ms_runs"), one.get("ms_runs")
    if a and b and len(a["values"]) > 1 and len(b["values"]) > 1:
        v = rule.judge(a["values"], b["values"])
        return v.ratio, v.lo, v.hi
    return row["ms"] / one["ms"], None, None


def notes(m: dict, s: dict) -> list[str]:
    """The pass past the room against the one-token pass (the table's × column), the regime of the smallest and the
    largest pass against the probed peaks, and any larger pass that read cheaper than a smaller one."""
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    one, past = rows[0], _row(rows, read_tokens(m))
    n = past["tokens_per_pass"]
    out = [
        f"One token: {one['ms']:.2f} ms; {n} tokens (the measured pass nearest four times the room): {past['ms']:.2f} ms "
        f"(medians). Round by round the {n}-token pass took {times_one(past, one)[0]:.2f}× the time for {n}× the tokens "
        "(the typical round's ratio, the table's × column; it can differ from the ratio of the medians)."
    ]
    low, high = (shares := roofline.peak_shares(rows, m["peak_bandwidth"], m["peak_flops"]))[0], shares[-1]
    out.append(
        f"Against the probed peaks the one-token pass reached {low['bandwidth_share']:.0%} of the bandwidth and "
        f"{low['flops_share']:.0%} of the FLOP/s (**{low['regime']}**); the {high['tokens_per_pass']}-token pass "
        f"{high['bandwidth_share']:.0%} and {high['flops_share']:.0%} (**{high['regime']}**)."
    )
    return out + [ridge_note(m)] + cheaper_notes(rows)


def ridge_note(m: dict) -> str:
    """The probed peaks' ridge in tokens per pass beside the curve's room: the probe an estimate, the curve measured."""
    ridge, room = float(m["ridge_tokens"]), rows_room(m)  # the room as `read_tokens` reads it
    said = f"The probed peaks put the ridge at about {ridge:.0f} tokens per pass (weights alone); the curve's room is {room}"
    if room < ridge:
        return said + (
            ": the pass starts to cost time before the probe says the arithmetic would be full, because this model's "
            "small operations never reach the speed of the probe's one large matrix multiply. The curve is the measurement."
        )
    return said + ": the curve stays nearly flat at least as far as the probe predicts."


CAPTION = (
    "Each size ran once per round, the rounds in turn. The second chart's regime is read from the numbers: "
    f"{roofline.REGIME_RULE}. Bandwidth and FLOP/s are SpecLab's counted bytes and FLOPs over the measured time, not "
    "hardware counters; a share above 100% means the quick probe underestimates what this pass reaches."
)


PASS_CAPTION = (
    "Each pass size this machine timed, beside the H200's recorded pass of the same size, each as a multiple of its "
    "own one-token pass (hover for the ms): a larger model (the Qwen2.5-7B shape) on a far faster memory, so the "
    "shapes compare, not the times. Where a line stays near 1× the extra tokens ride on idle arithmetic."
)


def pass_figure(pass_rows: list[dict], label: str = "") -> go.Figure | None:
    """Lesson 1: each pass size this machine timed, and the H200's recorded pass of the same size, both as a multiple
    of their own one-token pass (log x); None where no size lies in the recorded range."""
    prices = h200.h200_prices()
    pts = [(r["tokens_per_pass"], r["ms"], prices.price(r["tokens_per_pass"]) if prices else None) for r in pass_rows]
    pts = [p for p in pts if p[2] is not None]
    if not pts:
        return None
    fig = go.Figure()
    xs = [t for t, _, _ in pts]
    for name, times, color, dash in (
        ("this machine", [c for _, c, _ in pts], h200.CPU_COLOR, None),
        (h200.LABEL, [g for _, _, g in pts], h200.GPU_COLOR, "dash"),
    ):
        fig.add_scatter(
            x=xs,
            y=[m / times[0] for m in times],
            customdata=times,
            mode="lines+markers",
            name=esc(name),
            line={"color": color, "dash": dash},
            hovertemplate="%{x} tokens per pass: %{y:.2f}× the one-token pass (%{customdata:.2f} ms)<extra></extra>",
        )
    fig.add_hline(y=h200.KNEE, line_dash="dot", line_color="#333", annotation_text=f"{h200.KNEE:g}× (the knee)")
    fig.update_xaxes(type="log", title_text="tokens per pass", tickvals=xs)
    fig.update_yaxes(title_text="× the one-token pass", rangemode="tozero")
    where = f"this machine: {label or 'measured'}; the H200: {h200.machine_line()}"
    return frame(fig, "The same pass sizes: how fast each machine's pass grows with the tokens it carries", where, height=400)


def cpu_kv_sentence(m: dict, shape: str = "135M") -> str:
    """Lesson 1 on this machine: the embedded target's ridge from the run's probed peaks, counting its weights alone
    and counting each row's KV cache at the run's context and at 1,024 tokens (a model on measured peaks)."""
    rows, bw, peak = m.get("rows") or [], m.get("peak_bandwidth"), m.get("peak_flops")
    if not rows or not bw or not peak:
        return ""
    costs = architecture(shape).costs(m.get("dtype") if m.get("dtype") in ("bfloat16", "float16", "float32") else "bfloat16")
    context = int(rows[0]["context"])
    alone, here, long = (ridge_tokens_with_kv(costs, peak, bw, c, 1) for c in (0, context, 1024))
    return (
        f"On this machine's probed peaks ({bw / 1e9:.1f} GB/s, {peak / 1e9:.0f} GFLOP/s) the {architecture(shape).name} "
        f"target's pass turns compute-bound {gpu.tokens_words(alone)} counting its weights alone. Each token of context adds "
        f"{costs.kv_bytes_per_token / 1e3:.0f} kB of KV cache per row, read every pass: counting it, rows of one token "
        f"turn compute-bound {gpu.tokens_words(here)} at this {context}-token context and {gpu.tokens_words(long)} at 1,024 tokens. Long "
        "contexts keep large passes memory-bound (model on the probed peaks)."
    )


def show_retimed(m: dict, label: str, key: str, recorded: dict | None) -> None:
    """The GPU panel's view of this lesson: its passes re-timed from the H200 recordings, the KV cache they read, and
    the passes against this machine's probe (a live probe far below the recording's is named)."""
    st.markdown(f"**Your passes on an H200** ({h200.LABEL})")
    fig = pass_figure(m.get("rows") or [], label)
    if fig is not None:
        show_chart(fig, key + "retimed")
        st.caption(h200.machine_line() + ". " + PASS_CAPTION)
    st.markdown(cpu_kv_sentence(m))
    st.caption(pass_against_probe(m))
    note = live_probe_note(m, label, recorded)
    if note:
        st.warning(note, icon=":material/warning:")


RECORD = Experiment(
    memory_bound,
    (
        Knob("l1_context", "Context already in the KV cache (tokens)", (64, 150, 512, 1024), 150),
        Knob("l1_largest", "Largest pass (tokens)", LARGEST, 0, CURVE_HELP + ": twice the pass it reads past the room, at least 16"),
    ),
    Prediction(
        "A pass carrying four times this machine's room (the most tokens a pass carries within 1.25× the cost of one) costs "
        "how many times the time of a 1-token pass? (The page reads the measured pass nearest it.)",
        "e.g. 4",
        pass_ratio,
        roofline_ratio,
    ),
    notes=notes,
    table=lambda m, s: memory_bound_table(m),
    figures=lambda m, s, label: [
        memory_bound_figure(m, s, label),
        roofline.peak_share_figure(m["rows"], m["peak_bandwidth"], m["peak_flops"], m.get("ridge_tokens")),
    ],
    caption=CAPTION,
    numbers=lambda m, s: [(f"{numbers.tokens(r['tokens_per_pass'])} per pass", f"{r['ms']:.2f} ms") for r in m["rows"]]
    + [("the room, and the pass read past it (tokens)", f"{rows_room(m)}, {read_tokens(m)}")]  # what the answer reads
    + [("ridge (probed peaks), tokens per pass", metrics.fmt(m.get("ridge_tokens"), ".0f"))],
    gpu_passes=lambda s: [("one token", 1, 1), (f"{int(s.get('largest') or 64)} tokens in one pass", 1, int(s.get("largest") or 64))],
    acceptance=False,
    retimed=show_retimed,
    one_pass=first_pass,
    read=lambda m: read_tokens(m) if m.get("rows") else None,
    name="memory_bound",
    schema={"rows": [PASS_ROW_SPEC], **PEAKS, **CHOSEN, "other_cores?": "num?"},
    claims=(
        Claim(
            "Past the room every extra token costs real time",
            "the measured pass nearest 4× the room",
            "a one-token pass",
            "batch 1",
            _pass_past_room,
            1,
            lead=True,
            costs=True,
            metric="ms per pass",
            times=numbers.ROOM,
        ),
    ),
)
