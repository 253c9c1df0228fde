"""Lesson 1, memory-bound: one target pass timed against the tokens it carries, interleaved rounds, at sizes chosen
from this machine's room; the claim is that past the room every extra token costs real time. Its record, its run,
its words, its chart and table, and its view of the probe and of the H200's passes.
"""

from __future__ import annotations

import datetime as dt
import time

import streamlit as st

from app.common import measurement as ms
from app.common.measurement import CHOSEN, PASS_ROW_SPEC, PEAKS
from app.lessons.kit import gpu, knee, noise, retime
from app.lessons.kit.experiment import CURVE_HELP, Claim, Experiment, Knob, Prediction
from app.lessons.kit.knee import SAME_TIME
from app.lessons.kit.runs import knee_tokens, machine_curve, past_tokens, remember_room
from app.lessons.kit.show import NEARLY_FREE, context_note, show_chart, show_table
from app.lessons.l1_memory_bound.charts import memory_bound_figure, memory_bound_table, times_one
from app.views import metrics, roofline
from engine import verdict as rule
from engine.costs import ridge_tokens
from engine.decoding.passcurve import pass_costs
from engine.loadmeter import LoadMeter

READ_OVER_COPY = 1.28  # the most a read streamed over the copy's counted rate on the 2-core EPYC (docs/measurements.md)


DISTURBED_BELOW = 0.75  # a live probe under 75% of the recording's peak on the same kind of machine: disturbed


DISTURBED = "DISTURBED"


# --- 1. one token per pass leaves the arithmetic idle ----------------------------------------------
PASS_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)


LARGEST = (0, 16, 32, 64, 128)  # the largest pass's options; 0 = "from this machine's curve" (largest_pass)


PASS_ROUNDS = 5  # every size once per round, the rounds in turn: about 2 s on 2 cores


IN_STEP = 0.75  # a pass whose time grew by at least this share of its FLOPs' growth grew with its arithmetic


def pass_against_probe(m: dict) -> str:
    """The one-token pass's bandwidth as a share of the probed peak, and, above 100%, why."""
    rows = m.get("rows") or []
    peak = m.get("peak_bandwidth")
    if not rows or not peak:
        return ""
    one = rows[0]
    share = one["achieved_bandwidth"] / peak
    text = (
        f"The {one['tokens_per_pass']}-token pass read {one['achieved_bandwidth'] / 1e9:.1f} GB/s of weights and KV cache, "
        f"{share:.0%} of the {peak / 1e9:.1f} GB/s probed."
    )
    if share <= 1.0:
        return text + " Below 100%: the probe's stream was at least as fast as this pass."
    why = (
        f" Above 100% does not mean the pass beat the memory: the probe ran once, when the app started, and a probe "
        f"made before 2026-12-03 timed only a copy, counted as 2 bytes per byte, while a pass mostly reads; on a 2-core "
        f"EPYC a read streamed up to {READ_OVER_COPY:.2f}× the copy's counted rate (docs/measurements.md), and this pass "
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
    """The largest pass lesson 1 times: the smallest of PASS_SIZES carrying twice the pass past the room (so the
    curve shows a point past it and one further on), at least 16 tokens, at most the last size."""
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
    tokens, times = [r["tokens_per_pass"] for r in rows], [r["ms"] for r in rows]
    if knee.room_tokens(tokens, times) < tokens[-1]:  # the rows found the room: lessons 2 and 3 read this one next
        when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        label = f"lesson 1's rows: {PASS_ROUNDS} interleaved rounds at context {int(s['context'])}, median per size"
        curve = {"tokens": tokens, "ms": times, "knee_tokens": knee_tokens(tokens, times), "key": label, "measured_at": when}
        remember_room(pair, curve, knee.room_tokens(tokens, times))
    return {
        "rows": rows,
        "peak_bandwidth": probe.peak_bandwidth,
        "peak_flops": probe.peak_flops,
        "ridge_point": probe.ridge_point,
        "dtype": probe.dtype,
        "ridge_tokens": ridge_tokens(pair.target_costs, probe.peak_flops, probe.peak_bandwidth),
        "chosen": {"room": machine_curve(pair)[1], "largest": largest},  # the room, from these rows where they found one
        "curve": machine_curve(pair)[0],
        "other_cores": other_cores,  # what other processes kept busy while the rows were timed (noise.disturbed_live)
    }


def metered(timed, rounds: int) -> tuple[list, float | None]:
    """([timed() for each round], the cores other processes kept busy meanwhile: their CPU seconds over the rounds'
    wall seconds, None without psutil). A pass is timed outside any decode loop, so no trace's LoadMeter counts
    the other load for it: lesson 1 meters its own rounds (engine/loadmeter.py)."""
    meter, wall, out = LoadMeter(), 0.0, []
    for _ in range(rounds):
        t0 = time.perf_counter()
        meter.resume()
        out.append(timed())
        meter.pause()
        wall += time.perf_counter() - t0
    other = meter.fields()["other_cpu_s"]
    return out, (other / wall if other is not None and wall > 0 else None)


def _row(rows: list[dict], tokens: int) -> dict:
    return min(rows, key=lambda r: abs(r["tokens_per_pass"] - tokens))


def read_tokens(m: dict) -> int:
    """The pass lesson 1's prediction, chart and words read as "past the room": knee.PAST times the room these rows
    measured (knee.room_tokens over the medians), the nearest measured pass to it."""
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    room = knee.room_tokens([r["tokens_per_pass"] for r in rows], [r["ms"] for r in rows])
    return int(_row(rows, past_tokens(room))["tokens_per_pass"])


def _row_at(rows: list[dict], tokens: int) -> dict:
    return min(rows, key=lambda r: abs(r["tokens_per_pass"] - tokens))


def _rounds(row: dict) -> str:
    sp, far = noise.with_far(row.get("ms_runs"))
    if not sp or len(row["ms_runs"]["values"]) < 2:
        return ""
    left = f"; round {', '.join(str(i + 1) for i in far)} far outside the others, kept" if far else ""
    return f" (rounds {sp['min']:.1f}–{sp['max']:.1f}{left})"


def pass_ratio(m: dict, s: dict) -> float | None:
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    return times_one(_row(rows, read_tokens(m)), rows[0])[0] if rows and rows[0]["ms"] > 0 else None


def roofline_ratio(m: dict, s: dict) -> list[tuple[str, float | None]]:
    """The roofline's ratio: time = max(bytes / peak bandwidth, FLOPs / peak FLOP/s), the read pass over 1 token."""
    rows = sorted(m["rows"], key=lambda r: r["tokens_per_pass"])
    if not rows:
        return [("roofline from the probed peaks", None)]

    def t(r):
        return max(r["bytes"] / m["peak_bandwidth"], r["flops"] / m["peak_flops"])

    return [("roofline from the probed peaks: max(bytes ÷ bandwidth, FLOPs ÷ FLOP/s)", t(_row(rows, read_tokens(m))) / t(rows[0]))]


def _pass_past_room(m: dict) -> tuple[dict, dict]:
    """Lesson 1: the pass at four times the room, and the one-token pass, in ms per round."""
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


def _past_line(rows: list[dict], room: int, past: dict) -> str:
    one, n = rows[0], past["tokens_per_pass"]
    ratio, lo, _ = times_one(past, one)
    extra = (past["ms"] - one["ms"]) / (n - 1) if n > 1 else 0.0
    fixed = max(0.0, one["ms"] - extra)  # the part of a pass that does not grow with its tokens (a straight line's intercept)
    head = f"The {n}-token pass ({n / room:.0f}× the room) cost {past['ms']:.1f} ms{_rounds(past)}, "
    head += f"{ratio:.2f}× the one-token pass for {n}× the tokens"
    if ratio <= NEARLY_FREE:
        return head + ": still nearly free, so this machine's room reaches past this pass."
    beyond = f" (95% range {lo:.2f}–{times_one(past, one)[2]:.2f}×)" if lo and lo > NEARLY_FREE else ""
    return head + (
        f": more than {NEARLY_FREE}×{beyond}, so past the room the extra tokens cost real time (about {extra:.2f} ms each); "
        f"still far from {n}×, because about {fixed:.1f} ms of every pass ({fixed / past['ms']:.0%} of this one) did not "
        "depend on its tokens."
        if ratio < n / 2
        else f": close to {n}×: past the room each token cost nearly a whole pass of its own."
    )


def memory_bound_conclusion(result: dict) -> list[str]:
    """Lesson 1's conclusion: the room read from the measured rows, the pass past it, the regime against the probed
    peaks, the ridge the probe predicts against the room measured, and any larger pass that read cheaper."""
    rows = sorted(result["rows"], key=lambda r: r["tokens_per_pass"])
    one = rows[0]
    room = knee.room_tokens([r["tokens_per_pass"] for r in rows], [r["ms"] for r in rows])
    past = _row_at(rows, knee.PAST * room)  # the pass past the room: pass_lessons.read_tokens reads the same row
    inside = _row_at(rows, room)
    lines = [
        f"One token: {one['ms']:.1f} ms{_rounds(one)}. "
        + (
            f"Up to {room} tokens a pass cost at most {NEARLY_FREE}× that ({inside['ms']:.1f} ms for {room}): this machine's "
            "room, read from these rows. Inside it the extra tokens rode on idle arithmetic."
            if room > 1 and len(rows) > 1
            else f"Already the {rows[1]['tokens_per_pass'] if len(rows) > 1 else 2}-token pass cost more than {NEARLY_FREE}× "
            "the one-token pass: on this machine there is no room to fill."
        )
    ]
    if past["tokens_per_pass"] > room:
        lines.append(_past_line(rows, room, past))
    shares = roofline.peak_shares(rows, result["peak_bandwidth"], result["peak_flops"])
    low, high = shares[0], shares[-1]
    text = (
        f"Against the probed peaks ({result['peak_bandwidth'] / 1e9:.0f} GB/s, {result['peak_flops'] / 1e9:.0f} GFLOP/s, "
        f"{result['dtype']}): the one-token pass did {low['intensity']:.2f} FLOP per byte it read and reached "
        f"{low['bandwidth_share']:.0%} of peak bandwidth and {low['flops_share']:.0%} of peak FLOP/s, so it was "
        f"**{low['regime']}**; the {high['tokens_per_pass']}-token pass reached {high['bandwidth_share']:.0%} and "
        f"{high['flops_share']:.0%}: **{high['regime']}** by that rule."
    )
    if len(rows) > 1:
        prev, last = rows[-2], rows[-1]
        grew, more = last["ms"] / prev["ms"], last["flops"] / prev["flops"]
        text += f" From {prev['tokens_per_pass']} to {last['tokens_per_pass']} tokens its time grew {grew:.2f}× for {more:.2f}× the FLOPs: "
        text += growth_words(grew, more, high["regime"])
    lines.append(text)
    ridge = result.get("ridge_tokens")
    if ridge:
        lines.append(
            f"The probed peaks put the ridge at {result['ridge_point']:.1f} FLOP/byte, about {ridge:.0f} tokens per pass for "
            f"this model; the room these rows measured is {room} token{'s' if room != 1 else ''}. The probe's ridge is an "
            "estimate from two quick kernels; the measured curve decides where extra tokens start to cost."
        )
    kv = counted_ridge(rows, result.get("ridge_point"))
    if kv:
        lines.append(kv)
    return lines + cheaper_notes(rows)


def growth_words(grew: float, more: float, regime: str) -> str:
    """How a pass's time grew against its FLOPs: in step (within SAME_TIME of the FLOPs' growth), faster than the
    arithmetic (the larger pass left the caches or its kernel path changed), or slower (part of the time is fixed)."""
    if more > 1 and grew > more * SAME_TIME:
        return (
            "faster than the arithmetic grew: each token cost more in the larger pass (its working set outgrew the "
            "caches, or the kernels changed path), so the FLOPs alone do not explain its time."
        )
    if more > 1 and grew - 1 >= IN_STEP * (more - 1):
        return "in step with the arithmetic" + (
            ", so the arithmetic was setting its time (the quick probe's peak is not what these kernels reach)."
            if regime != "compute-bound"
            else "."
        )
    return "less than the arithmetic grew: part of that pass's time still did not depend on its tokens."


def counted_ridge(rows: list[dict], ridge_point: float | None) -> str | None:
    """Where these passes' own counted FLOPs per byte (weights AND this row's KV cache at the lesson's context, the
    engine's counts) reach the probed ridge point, interpolated between the measured sizes, and the cache's share of a
    one-token pass's bytes (its bytes grow by one token's KV per token added); None where the rows do not cross the
    ridge or carry no counts."""
    pts = [(r["tokens_per_pass"], r["flops"] / r["bytes"]) for r in rows if r.get("flops") and r.get("bytes")]
    if not ridge_point or len(pts) < 2 or len(pts) != len(rows):
        return None
    cross = [(n0 + (ridge_point - i0) * (n1 - n0) / (i1 - i0)) for (n0, i0), (n1, i1) in zip(pts, pts[1:]) if i0 < ridge_point <= i1]
    first, last = rows[0], rows[-1]
    per_token = (last["bytes"] - first["bytes"]) / (last["tokens_per_pass"] - first["tokens_per_pass"])
    if not cross or per_token <= 0:
        return None
    context = int(first.get("context", 0))
    share = per_token * (context + first["tokens_per_pass"]) / first["bytes"]
    return (
        f"Counting all these passes do and read (the weights, and this row's KV cache over a {context}-token context "
        f"with attention's arithmetic on it: the engine's counts), a pass reaches the ridge's {ridge_point:.1f} FLOP/byte "
        f"at about {cross[0]:.0f} tokens. One "
        f"row's cache is {share:.1%} of a one-token pass's bytes here, so it barely moves the ridge; in a batch every row "
        "reads its own cache, which is why long contexts keep large batches memory-bound (the GPU panel below)."
    )


def show_memory_bound(m: dict, s: dict, label: str = "") -> None:
    context_note("memory_bound", m, label)
    show_chart(memory_bound_figure(m, s, label), "lesson1_fig")
    show_table(memory_bound_table(m))
    st.success("\n\n".join(memory_bound_conclusion(m)))
    show_chart(roofline.peak_share_figure(m["rows"], m["peak_bandwidth"], m["peak_flops"], m.get("ridge_tokens")), "lesson1_peaks")
    st.caption(
        f"The regime is read from the numbers: {roofline.REGIME_RULE}. The bandwidth and FLOP/s are SpecLab's "
        "counted bytes and FLOPs over the measured time, not hardware counters; a share above 100% means the "
        "quick probe's copy and matmul underestimate what this pass reaches (caches, a different kernel)."
    )


def show_retimed(m: dict, label: str, key: str, recorded: dict | None) -> None:
    """The GPU panel's view of this lesson: its passes re-timed from the H200 recordings, the KV cache they read, and
    the passes against this machine's probe (a live probe far below the recording's is named)."""
    fig = retime.pass_figure(m.get("rows") or [], label)
    if fig is not None:
        show_chart(fig, key + "retimed")
        st.caption(retime.machine_line() + ". " + retime.PASS_CAPTION)
    st.markdown(gpu.cpu_kv_sentence(m))
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
        "A pass carrying four times this machine's room (the most tokens a pass carries at about the cost of one) costs "
        "how many times the time of a 1-token pass?",
        "e.g. 4",
        pass_ratio,
        roofline_ratio,
    ),
    verdict=lambda m, s: memory_bound_conclusion(m),
    table=lambda m, s: memory_bound_table(m),
    show=show_memory_bound,
    numbers=lambda m, s: [(f"{r['tokens_per_pass']} token(s) per pass", f"{r['ms']:.2f} ms") for r in m["rows"]]
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
)
