"""Serving engines: the lessons' experiment on a real server (issue 44). No model runs in the app here.

Page shape (docs/design.md §7, Streamlit's demos): title, short prose, the recorded run (a picture first, its numbers
under it, the words computed from them), then a form to run the same sweep against the visitor's own server. The
recording is assets/serving/llama-server.json (scripts/serving/record_serving.py), read with the strict checker of
engine/serving/record.py; a live run is engine/serving/sweep.py, bounded (few prompts, two rounds, a time limit).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.common.page_helpers import show_failure
from app.views import serving as views
from app.views.safe import md_escape
from engine.serving import client, metrics, record, sweep

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "assets" / "serving" / "llama-server.json"
LIVE_PROMPTS, LIVE_ROUNDS, LIVE_SECONDS = 4, 2, 240
SPEC_CMD = (  # two servers on one GPU: each takes under half its memory (vLLM's default takes 90%)
    "vllm serve Qwen/Qwen2.5-7B-Instruct --port 8001 --gpu-memory-utilization 0.45 "
    '--speculative-config \'{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}\''
)
PLAIN_CMD = "vllm serve Qwen/Qwen2.5-7B-Instruct --port 8002 --gpu-memory-utilization 0.45"

st.title("🛰 Serving engines")
st.markdown(
    "The lessons run SpecLab's own engine. Here the same question goes to a real serving engine: "
    "[llama.cpp](https://github.com/ggml-org/llama.cpp/tree/master/tools/server)'s `llama-server`, serving the embedded "
    "target with SpecLab's distilled draft model, one request slot per user with **continuous batching** (a finished "
    "request's slot is refilled at the next step from the requests waiting). As more requests are in flight, each step "
    "can carry more tokens, and the verify pass can leave the room ([lesson 3](lessons?lesson=3), "
    "[lesson 6](lessons?lesson=6)); the verdicts below say which cells three rounds can tell apart. Plain and "
    "speculative servers took turns in every round."
)


def recorded() -> None:
    try:
        rec = record.load(RECORDING)
    except (OSError, record.RecordingError) as exc:
        show_failure("The shipped serving recording could not be read", exc)
        return
    label = f"recorded on {rec['machine']}, {rec['date']}: {rec['server']} ({rec['note']})"
    st.subheader(f"Recorded: llama-server on a CPU ({rec['machine']})")
    st.caption(
        f"These numbers were {label}. It served SpecLab's embedded target (SmolLM2-135M-Instruct, bfloat16) with its "
        "distilled draft, 64 new tokens a request. Not a GPU: see the form below for a GPU server."
    )
    st.plotly_chart(views.speedup_figure(rec["sweeps"], label), key="serving_speedup")
    st.dataframe(views.table(rec["sweeps"]), hide_index=True)
    st.caption(
        "Output tokens/s are every request's output tokens over the round's wall time, the prompts' passes (prefill) "
        "included: a server's view, not SpecLab's decode-only one. The speedup is the verdict rule's ratio over the paired rounds "
        "(the glossary), with its 95% range; the verdict names a winner only where the rule does."
    )
    for line in views.verdict_words(rec["sweeps"]):
        st.markdown(f"- {line}")
    st.plotly_chart(views.acceptance_figure(rec["sweeps"], rec["speclab"], label), key="serving_acceptance")
    st.caption(
        "The server's acceptance is its own counters (`llamacpp:spec_decode_num_accepted_tokens_per_pos_total` ÷ "
        "`…_num_drafts_total`, the difference over the run, checked against each response's `draft_n_accepted`); "
        f"SpecLab's is {rec['speclab']['source']}."
    )


def live() -> None:
    st.subheader("Your own server")
    st.markdown(
        "Start a speculative server and a plain one on a GPU machine, for example vLLM with n-gram drafting "
        "([vLLM's docs](https://docs.vllm.ai/en/latest/features/speculative_decoding/n_gram/)), each on under half "
        "the GPU's memory (or each on its own GPU). An SGLang server started with `--enable-metrics` is timed the same "
        "way; it exports acceptance as a gauge, not as counters, so its acceptance column stays empty. The form takes "
        "a public address or 127.0.0.1 (a tunnel), never a private network address:"
    )
    st.code(f"{SPEC_CMD}\n{PLAIN_CMD}", language="bash")
    st.markdown(
        "Or here, on this machine: `bash scripts/serving/llama_server.sh build && bash scripts/serving/llama_server.sh "
        "convert`, then `start 8080 2 8` and `start 8081 0 8`. The app sends at most "
        f"{LIVE_PROMPTS} held-out prompts a concurrency and round, {LIVE_ROUNDS} rounds, for at most {LIVE_SECONDS} s."
    )
    with st.form("serving_live"):
        c1, c2 = st.columns(2)
        url = c1.text_input("Speculative server URL", placeholder="http://127.0.0.1:8080")
        plain = c2.text_input("Plain server URL (the same model, no speculation)", placeholder="http://127.0.0.1:8081")
        c3, c4 = st.columns(2)
        conc = c3.multiselect("Concurrency", [1, 2, 4, 8, 16], default=[1, 2, 4])
        tokens = c4.select_slider("New tokens per request", [16, 32, 64, 128], value=32)
        go = st.form_submit_button("▶ Measure")
    if not go:
        return
    try:
        if not conc:
            raise ValueError("choose at least one concurrency")
        bases = []
        for name, u in (("the speculative server", url), ("the plain server", plain)):  # both checked before either is asked
            try:
                bases.append(client.base_url(u))
                client.check_reachable_from_a_page(bases[-1])
            except client.ServerError as exc:
                raise client.ServerError(f"{name}: {exc}") from None
        if bases[0] == bases[1]:
            raise ValueError("the speculative and the plain server are one address: give two servers")
        servers = [sweep.Server(base) for base in bases]
        from engine.bench.prompts import batch_prompts

        with st.spinner("Measuring (plain and speculative take turns)…"):
            result = sweep.sweep(
                servers[1],
                servers[0],
                batch_prompts("heldout", LIVE_PROMPTS),
                sorted(conc),
                LIVE_ROUNDS,
                tokens,
                LIVE_SECONDS,
                progress=lambda _: None,
            )
    except (client.ServerError, metrics.MetricsError, ValueError, TimeoutError) as exc:
        st.error(f"Could not measure: {md_escape(exc)}", icon=":material/error:")  # it may repeat what the visitor typed
        return
    found = metrics.ENGINES.get(result["engine"], "no speculation metrics (timings only)")
    label = f"measured live against {servers[0].base} ({found}), model {result['model'][:80]}"
    sweeps = [{"name": "your speculative server", "rows": result["rows"]}]
    st.plotly_chart(views.speedup_figure(sweeps, label), key="serving_live_speedup")
    st.dataframe(views.table(sweeps), hide_index=True)
    for line in views.verdict_words(sweeps):
        st.markdown(f"- {line}")


recorded()
live()
