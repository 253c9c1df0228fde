"""Real-browser test: Debian's Chromium, driven by Playwright, against `streamlit run app/main.py`.

Opens the Playground, clicks Run, waits for the race replay to finish, checks that accepted and
rejected draft tokens and the latency chart are on the page, and saves a screenshot under artifacts/.
Also: Replay of a shipped sample, the Sweep's pass curve, and the Lessons page (a live run from a deep
link, and the classroom kit: recording, worksheet download, step-through, glossary, a hostile link).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

import pytest

from app.common.server import serve

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
SERVER_LOG = ROOT / "artifacts" / "streamlit-browser-test.log"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason=f"Chromium not found at {CHROMIUM} (apt-get install chromium to run this test)"
)


@pytest.fixture(scope="module")
def server():
    with serve(SERVER_LOG, timeout_s=90) as (url, _):
        yield url


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium for the module; each test gets a fresh context (own cookies and session) in it."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def browser_page(chromium, height: int):
    """A fresh page in a fresh browser context, 1400 px wide; the context is closed whatever the test does."""
    context = chromium.new_context(viewport={"width": 1400, "height": height})
    try:
        page = context.new_page()
        page.set_default_timeout(60_000)  # clicks wait on server work too; a busy machine needs more than 30 s
        try:
            yield page
        except Exception as exc:  # say what the page showed: a CI log is all there is to go on
            with contextlib.suppress(Exception):
                alerts = page.locator('[role="alert"]').all_inner_texts()
                exc.add_note(f"the page's alerts when it failed: {alerts}")
                exc.add_note("the page's text when it failed (its end):\n" + page.inner_text("body")[-3000:])
            with contextlib.suppress(Exception):
                exc.add_note("the server's log (its end):\n" + SERVER_LOG.read_text(errors="replace")[-3000:])
            raise
    finally:
        context.close()


def upload(frame, n: int, name: str, payload, tries: int = 3) -> None:
    """Put a file in the page's n-th uploader and wait for its chip. A file set while a rerun (the previous upload's)
    is replacing the uploaders lands on an input that is gone and is lost: wait for the app to be idle first, and set
    it again on the current input where its chip did not come."""
    for attempt in range(tries):
        frame.locator('[data-testid="stStatusWidget"]').wait_for(state="detached", timeout=120_000)  # no rerun under way
        frame.locator('input[type="file"]').nth(n).set_input_files(payload)
        try:
            frame.locator('[data-testid="stFileChipName"]', has_text=name).wait_for(timeout=20_000)
            return
        except Exception:
            if attempt == tries - 1:
                raise


def test_playground_run_and_race_replay(server, chromium):
    (ROOT / "artifacts").mkdir(exist_ok=True)
    with browser_page(chromium, height=4200) as page:
        # an extractive prompt with the n-gram drafter: some drafts are accepted, some rejected
        t0 = time.monotonic()
        page.goto(f"{server}/?tokens=16&depth=4", timeout=60_000)
        page.get_by_text("Ready:").first.wait_for(timeout=180_000)
        print("ready", time.monotonic() - t0)
        page.get_by_role("button", name="▶ Run").click()
        page.get_by_text("Race replay").wait_for(timeout=240_000)
        replay = page.frame_locator("iframe").first
        replay.locator("#race").wait_for(timeout=30_000)
        print("replay shown", time.monotonic() - t0)
        replay.locator('#race[data-state="done"]').wait_for(timeout=180_000)
        print("replay done", time.monotonic() - t0)
        page.wait_for_timeout(1000)  # let the charts finish drawing
        assert replay.locator(".t.accepted.on").count() > 0
        assert page.locator('[data-kind="accepted"]').count() > 0
        assert page.locator('[data-kind="rejected"]').count() > 0
        tooltip = page.locator('[data-kind="rejected"]').first.get_attribute("title") or ""
        assert "draft q =" in tooltip and "target p =" in tooltip
        # a greedy run: the target's argmax decided, so the tooltip does not offer min(1, p/q)
        assert "argmax" in tooltip and "min(1, p/q)" not in tooltip
        assert page.locator('[data-kind="plain"]').count() > 0  # the AR lane
        assert page.get_by_text("Per-step latency").count() > 0
        assert page.locator(".js-plotly-plot").count() >= 4
        assert page.get_by_text("Traceback").count() == 0
        # the shown round's steps re-timed on the H200 (app/views/h200.py), labelled as re-timed, never as run there
        h200 = page.locator('[data-testid="stExpander"]', has_text="Your run on an H200").first
        h200.get_by_text("Your run on an H200").click()
        h200.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
        text = h200.inner_text()
        assert "not run on a GPU" in text and "NVIDIA H200" in text and "The bars re-time round" in text
        page.screenshot(path=str(ROOT / "artifacts" / "playground.png"))
        # accessibility of the Playground after a run (issue 30), on this run: the race has finished (settled colours)
        page.get_by_text("Show the source").first.wait_for(timeout=120_000)
        page.wait_for_timeout(500)
        assert axe_serious(page, "playground") == []


def test_replay_plays_a_shipped_sample(server, chromium):
    """Replay runs no model: the shipped sample pair races and its charts draw."""
    (ROOT / "artifacts").mkdir(exist_ok=True)
    with browser_page(chromium, height=3600) as page:
        page.goto(f"{server}/replay", timeout=60_000)
        page.get_by_text("recorded measurements, not a live run").wait_for(timeout=120_000)
        replay = page.frame_locator("iframe").first
        replay.locator('#race[data-state="done"]').wait_for(timeout=180_000)
        assert page.locator('[data-kind="accepted"]').count() > 0
        page.locator(".js-plotly-plot").nth(2).wait_for(timeout=30_000)  # charts draw after the race (one CI run counted 2 of 3 too early)
        assert page.locator(".js-plotly-plot").count() >= 3
        assert page.get_by_text("Traceback").count() == 0
        page.screenshot(path=str(ROOT / "artifacts" / "replay.png"))


def test_sweep_measures_the_pass_cost_curve(server, chromium):
    """Sweep: measure one-pass costs live at small settings; the curve and its table appear."""
    with browser_page(chromium, height=2400) as page:
        page.goto(f"{server}/sweep?pass_batches=1&pass_tokens=8&pass_context=32", timeout=60_000)
        page.get_by_text("Ready:").first.wait_for(timeout=180_000)
        page.get_by_role("button", name="Measure passes").click()
        # a chart label: a redraw may briefly hold the old chart, hidden, beside the new one
        page.get_by_text("time of one target pass").filter(visible=True).first.wait_for(timeout=240_000)
        assert page.get_by_text("ridge ≈").count() > 0
        assert page.get_by_text("Traceback").count() == 0
        page.wait_for_timeout(1000)
        page.screenshot(path=str(ROOT / "artifacts" / "sweep.png"), full_page=True)
        assert axe_serious(page, "sweep") == []  # accessibility of the Sweep after a measurement (issue 30)


def test_lessons_run_the_first_experiment(server, chromium):
    """Lessons: a deep link with small settings; the prediction unlocks the live run; its measured conclusion appears."""
    with browser_page(chromium, height=2400) as page:
        page.goto(f"{server}/lessons?lesson=1&l1_largest=16&l1_context=64", timeout=60_000)
        run = page.get_by_role("button", name="▶ Run the experiment live")
        run.wait_for(timeout=120_000)
        assert run.is_disabled()  # no prediction yet
        guess = page.get_by_label("Your prediction: A pass carrying four times this machine's room", exact=False)
        guess.fill("3")
        guess.press("Enter")
        page.wait_for_function(
            "() => [...document.querySelectorAll('button')].some(b => b.innerText.includes('Run the experiment live') && !b.disabled)",
            timeout=30_000,
        )
        run.click()
        page.get_by_text("measured live on").first.wait_for(timeout=240_000)
        page.get_by_text("the time for").first.wait_for(state="attached", timeout=10_000)  # the notes under the table
        page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)  # the measured pass-cost curve
        page.wait_for_timeout(1000)  # let it finish drawing before the screenshot
        assert page.get_by_text("Traceback").count() == 0
        page.screenshot(path=str(ROOT / "artifacts" / "lessons.png"), full_page=True)


def test_predictor_draws_the_model_and_the_recorded_passes(server, chromium):
    """Predictor: no model runs; the model's curve, the recorded H200 passes over it and the heat map draw."""
    (ROOT / "artifacts").mkdir(exist_ok=True)
    with browser_page(chromium, height=3000) as page:
        page.goto(f"{server}/predictor?model=1.7B%20%C2%B7%20SmolLM2-1.7B&ctx=0", timeout=60_000)
        page.get_by_text("How far off is the model?").wait_for(timeout=120_000)
        page.locator(".js-plotly-plot").nth(1).wait_for(timeout=60_000)
        page.wait_for_timeout(1000)  # let the charts finish drawing
        assert page.get_by_text("model, not a measurement").count() >= 2  # both figures' titles say so
        assert page.get_by_text("measured on NVIDIA H200, CUDA graph").count() > 0
        assert page.get_by_text("Traceback").count() == 0
        page.screenshot(path=str(ROOT / "artifacts" / "predictor.png"), full_page=True)


EVIL = "http://127.0.0.2:9"  # an origin that is not the app's (nothing listens there)
HOSTILE_TEXTS = [
    "</script><script>window.__pwned=1</script>",
    "<!--<script>",
    "<img src=x onerror=window.__pwned=1>",
    f"![b]({EVIL}/img.png)",
    f"[click me]({EVIL}/phish)",
    "\u2028\u2029",
    "]]>&amp;<",
    "`code` **bold**",
]


def _hostile_pair() -> tuple[bytes, bytes]:
    """The shipped sample pair with every string field a visitor sees replaced by hostile text."""
    import json

    index = json.loads((ROOT / "assets" / "traces" / "index.json").read_text(encoding="utf-8"))["pairs"][0]
    out = []
    for name in (index["ar"], index["spec"]):
        data = json.loads((ROOT / "assets" / "traces" / name).read_text(encoding="utf-8"))
        data["meta"].update(
            device_name=f"![b]({EVIL}/device.png)",
            draft_name=f"[click me]({EVIL}/phish)",
            target_name="<img src=x onerror=window.__pwned=1>",
        )
        data["meta"].setdefault("probe", {})["device_name"] = f"<script>window.__pwned=1</script>![p]({EVIL}/p.png)"
        data["summary"]["dtype"] = f"![d]({EVIL}/dtype.png)"
        for i, seq in enumerate(data["sequences"]):
            seq["prompt"] = HOSTILE_TEXTS[i % len(HOSTILE_TEXTS)]
            seq["text"] = HOSTILE_TEXTS[(i + 1) % len(HOSTILE_TEXTS)]
        n = 0
        for step in data["steps"]:
            for row in step["seqs"]:
                row["next_text"] = HOSTILE_TEXTS[n % len(HOSTILE_TEXTS)]
                for token in row["drafted"]:
                    n += 1
                    token["text"] = HOSTILE_TEXTS[n % len(HOSTILE_TEXTS)]
                n += 1
        if data["config"]["mode"] == "speculative":  # the lanes part, so the divergence note (with the dtype) shows
            data["sequences"][0]["output_ids"][3] += 1
        out.append(json.dumps(data).encode())
    return out[0], out[1]


def test_a_hostile_trace_loads_runs_and_shows_nothing_it_did_not_come_with(server, chromium):
    """Replay a trace whose every string is markup, Markdown links/images or script breakers: no element is
    injected, no script runs, no dialog opens, and the browser requests nothing outside the app's origin."""
    from urllib.parse import urlsplit

    (ROOT / "artifacts").mkdir(exist_ok=True)
    ar_raw, spec_raw = _hostile_pair()
    origin = urlsplit(server)
    outside, dialogs = [], []
    with browser_page(chromium, height=3600) as page:
        page.on(
            "request",
            lambda r: urlsplit(r.url).scheme in ("http", "https", "ws", "wss")
            and urlsplit(r.url).netloc != origin.netloc
            and outside.append(r.url),
        )
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(f"{server}/replay", timeout=60_000)
        page.get_by_text("recorded measurements, not a live run").wait_for(timeout=120_000)  # the sample pair first
        page.get_by_text("Upload your own traces").click()
        # the uploaders' run has ended (the sample's results are gone) before a file goes in, and each file is in
        # before the next: a file set on an input that a rerun is replacing would be lost
        page.get_by_text("Upload both traces of one run").wait_for(timeout=120_000)
        page.locator('input[type="file"]').first.wait_for(state="attached", timeout=60_000)
        # the sample's results leave when that run ends, a moment after the uploaders draw: wait, not count
        page.get_by_text("recorded measurements, not a live run").first.wait_for(state="detached", timeout=60_000)
        for n, (name, raw) in enumerate((("ar.json", ar_raw), ("spec.json", spec_raw))):
            upload(page, n, name, {"name": name, "mimeType": "application/json", "buffer": raw})
        page.get_by_text("recorded measurements, not a live run").wait_for(timeout=180_000)
        page.get_by_text(f"![b]({EVIL}/device.png)").first.wait_for(timeout=60_000)  # the hostile pair's, no other
        replay = page.frame_locator("iframe").first
        replay.locator('#race[data-state="done"]').wait_for(timeout=180_000)
        # the page goes on drawing below the race (summary, charts, token view, then the step-through): wait for
        # it as long as for the race itself, not Playwright's default 30 s (a busy CI machine once took longer)
        step_through = page.get_by_text("Step through one step of this run")
        step_through.wait_for(timeout=180_000)
        page.wait_for_timeout(1500)  # let the charts and the token view finish drawing
        step_through.click()  # its stages quote the hostile tokens too
        page.get_by_text("1 · draft").first.wait_for(timeout=60_000)
        page.wait_for_timeout(1000)
        assert page.get_by_text("Traceback").count() == 0
        assert replay.locator(".t.on").count() > 0  # the race really played the hostile tokens
        assert replay.get_by_text("<!--<script>").count() > 0  # ... and shows them as text
        for frame in page.frames:
            assert frame.evaluate("typeof window.__pwned") == "undefined", frame.url
            injected = frame.evaluate(
                """(evil) => [...document.querySelectorAll('img, a, script, iframe')]
                     .map(e => e.src || e.href || '').filter(u => u.startsWith(evil) || u.endsWith('/x'))""",
                EVIL,
            )
            assert injected == [], (frame.url, injected)
        assert page.get_by_text(f"![b]({EVIL}/device.png)").count() > 0  # the machine's name, shown literally
        assert page.get_by_text("The lanes part at").count() > 0  # the note that names the trace's dtype is drawn
        page.screenshot(path=str(ROOT / "artifacts" / "replay-hostile.png"))
    assert dialogs == []
    assert outside == [], outside


def test_lessons_classroom_kit(server, chromium):
    """Lesson 2 from a deep link: the recording appears once a prediction is entered, with guess vs measured vs
    model; the worksheet downloads as escaped HTML; the page links back to lesson 0 (the step-through); the
    glossary opens from the sidebar; a hostile link gets a notice, not a traceback."""
    (ROOT / "artifacts").mkdir(exist_ok=True)
    with browser_page(chromium, height=3000) as page:
        page.goto(f"{server}/lessons?lesson=2", timeout=60_000)
        guess = page.get_by_label("Your prediction:", exact=False)
        guess.wait_for(timeout=120_000)
        assert page.get_by_text("Barrow's example, measured").count() > 0  # the lesson text
        guess.fill("0.8")
        guess.press("Enter")
        page.get_by_text("These numbers were recorded on").wait_for(timeout=30_000)
        page.get_by_text("You guessed 0.80×").wait_for(timeout=10_000)
        seed = json.loads((ROOT / "assets" / "lessons" / "more_flops.json").read_text())["measurement"]["seed"]
        page.get_by_text(f"Barrow's example: {seed['passes'][0]['tokens_per_pass']} tokens per pass").wait_for(timeout=10_000)
        with page.expect_download(timeout=30_000) as download:
            page.get_by_role("button", name="⬇ Worksheet (printable HTML, one page)").click()
        sheet = Path(download.value.path()).read_text(encoding="utf-8")
        assert "Leviathan's formula by hand" in sheet and "E[tokens per step]" in sheet and "recorded on" in sheet
        page.get_by_text("Lesson 0, one speculative step").first.wait_for(timeout=10_000)  # the mechanism is lesson 0
        page.get_by_text("Glossary", exact=False).first.click()
        page.get_by_text("Ridge point").first.wait_for(timeout=10_000)
        assert page.get_by_text("Traceback").count() == 0
        page.screenshot(path=str(ROOT / "artifacts" / "lessons-kit.png"), full_page=True)
        page.goto(f"{server}/lessons?lesson=%3Cb%3E9&l2_depth=abc", timeout=60_000)
        page.get_by_text("which does not exist").wait_for(timeout=60_000)
        assert page.get_by_text("Traceback").count() == 0


def test_a_new_student_opens_lesson_0_from_a_link_and_works_through_it(server, chromium):
    """A new student: lesson 0 from a deep link; draft and verify stage by stage (each a drawn picture beside the
    engine's code), a prediction, stages 3 to 5, the chart of plain decoding beside the step, a check question
    and its feedback."""
    (ROOT / "artifacts").mkdir(exist_ok=True)
    with browser_page(chromium, height=3000) as page:
        page.goto(f"{server}/lessons?lesson=0", timeout=60_000)
        page.get_by_role("heading", name="0 · One speculative step").wait_for(timeout=120_000)
        page.get_by_text("1 · draft", exact=True).wait_for(timeout=30_000)
        page.locator(".sp-draft").first.wait_for(timeout=30_000)  # the drafted tokens, drawn
        assert page.locator(".sp-draft").count() >= 4
        page.get_by_role("button", name="Next stage ▶").click()
        page.get_by_text("2 · verify in one pass", exact=True).wait_for(timeout=30_000)
        page.locator('table[aria-label="causal mask"]').wait_for(timeout=10_000)  # the causal mask's triangle
        assert page.get_by_role("button", name="Next stage ▶").is_disabled()  # the rest waits for a prediction
        guess = page.get_by_label("Your prediction: Out of k = 4 drafts, how many will the target accept in this step?")
        guess.fill("2")
        guess.press("Enter")
        page.get_by_text("You guessed 2 drafts").wait_for(timeout=30_000)
        for title in ("3 · accept the longest prefix", "4 · correction or bonus", "5 · roll back the KV cache"):
            page.wait_for_function(
                "() => [...document.querySelectorAll('button')].some(b => b.innerText.includes('Next stage') && !b.disabled)",
                timeout=30_000,
            )
            page.get_by_role("button", name="Next stage ▶").click()
            page.get_by_text(title, exact=True).wait_for(timeout=30_000)
        assert page.get_by_text("def keep(self, new_lengths").count() > 0  # the engine's own code beside it
        page.get_by_role("heading", name="Plain decoding beside the step").wait_for(timeout=30_000)
        page.get_by_text("The same 4 token(s): plain decoding vs one speculative step").filter(visible=True).first.wait_for(
            timeout=60_000
        )  # its plotly title
        page.get_by_text("The target kept 3 of 4 drafts").wait_for(timeout=10_000)
        page.get_by_text("Plain decoding needs 4 step(s)", exact=False).first.wait_for(timeout=10_000)
        question = page.locator('[data-testid="stRadio"]').filter(has_text="How many tokens does the step add").first
        question.get_by_text("4 added, 7 computed", exact=True).click()
        page.get_by_text("Right. Three accepted guesses", exact=False).wait_for(timeout=30_000)
        assert page.get_by_text("Traceback").count() == 0
        page.screenshot(path=str(ROOT / "artifacts" / "lesson-0.png"), full_page=True)


@contextlib.contextmanager
def embedding_site(app_url: str):
    """Another site that embeds the app, as the Hub does: a page served from 127.0.0.1 on its own port with the
    app (at `app_url`, on localhost: a different site, so the browser treats the frame as cross-site) in an
    iframe. Yields the embedding page's URL."""
    import http.server
    import threading

    html = (
        f'<!doctype html><html lang="en"><head><title>Embedding site</title></head><body>'
        f'<iframe id="app" title="SpecLab" src="{app_url}" style="width:1380px;height:3400px;border:0"></iframe>'
        "</body></html>"
    ).encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(html)))
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, *args):
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}/"
    finally:
        site.shutdown()
        site.server_close()


def test_replay_uploads_work_inside_a_cross_site_iframe(server, chromium):
    """Issue 30: a Space is shown inside an iframe on huggingface.co. Streamlit's XSRF cookie is SameSite=Lax,
    so a cross-site frame never sends it and every upload failed with 403. The shipped config turns the XSRF
    check off (.streamlit/config.toml says why that is safe here); this embeds the app from `localhost` in a
    page served from `127.0.0.1` and uploads the shipped sample pair on Replay."""
    import json
    from urllib.parse import urlsplit

    app_url = server.replace("127.0.0.1", "localhost") + "/replay"
    index = json.loads((ROOT / "assets" / "traces" / "index.json").read_text(encoding="utf-8"))["pairs"][0]
    uploads, refused = [], []
    with embedding_site(app_url) as site, browser_page(chromium, height=3600) as page:

        def on_response(response):
            if "/_stcore/upload_file/" in response.url:
                uploads.append(response.status)
            if response.status in (401, 403):
                refused.append((response.status, response.url))

        page.on("response", on_response)
        page.goto(site, timeout=60_000)
        assert urlsplit(page.url).hostname == "127.0.0.1"
        app = page.frame_locator("iframe#app")
        app.get_by_text("recorded measurements, not a live run").first.wait_for(timeout=120_000)
        app.get_by_text("Upload your own traces").click()
        app.get_by_text("Upload both traces of one run").wait_for(timeout=120_000)
        app.locator('input[type="file"]').first.wait_for(state="attached", timeout=60_000)
        app.get_by_text("recorded measurements, not a live run").first.wait_for(state="detached", timeout=60_000)
        for n, name in enumerate((index["ar"], index["spec"])):
            upload(app, n, name, str(ROOT / "assets" / "traces" / name))
            for _ in range(600):  # the chip shows as the request starts: wait for the server's answer
                if len(uploads) > n:
                    break
                page.wait_for_timeout(100)
            assert uploads[n:] and uploads[n] < 300, f"upload of {name} answered {uploads[n:]}; refused: {refused}"
        app.get_by_text("recorded measurements, not a live run").first.wait_for(timeout=180_000)
        app.frame_locator("iframe").first.locator('#race[data-state="done"]').wait_for(timeout=180_000)
        assert app.get_by_text("AxiosError").count() == 0 and app.get_by_text("403").count() == 0
        assert app.get_by_text("Traceback").count() == 0
        page.screenshot(path=str(ROOT / "artifacts" / "replay-embedded.png"))
    assert refused == [], refused
    assert uploads and all(status < 300 for status in uploads), uploads


SERIOUS = ("serious", "critical")


def axe_serious(page, name: str) -> list[str]:
    """axe-core's serious and critical violations on the page and in every frame in it (the race is an iframe;
    axe runs in each frame's own document), one line per node: rule, impact, element, axe's summary; also
    written to artifacts/axe-<name>.txt."""
    from axe_playwright_python.sync_playwright import Axe

    # a rerun in progress fades its elements (data-stale="true"): axe would read their faded colours, so wait for the
    # page to settle (a busy CI machine once ran axe mid-rerun and counted 17 faded captions)
    page.wait_for_function("() => !document.querySelector('[data-stale=\"true\"]')", timeout=60_000)
    axe, found = Axe(), []
    for frame in page.frames:
        if frame.is_detached():
            continue
        results = axe.run(frame).response
        for rule in results["violations"]:
            if rule["impact"] in SERIOUS:
                for node in rule["nodes"]:
                    summary = " ".join((node.get("failureSummary") or "").split())[:300]
                    found.append(f"{rule['id']} ({rule['impact']}) {node['target']} {node['html'][:160]} :: {summary}")
    (ROOT / "artifacts").mkdir(exist_ok=True)
    (ROOT / "artifacts" / f"axe-{name}.txt").write_text("".join(f"{line}\n" for line in found), encoding="utf-8")
    return found


def test_every_page_has_no_serious_accessibility_violations(server, chromium):
    """Issue 30: axe-core (axe-playwright-python) over every page as a visitor meets it: 0 serious or critical
    violations, in every frame. Here a lesson, Benchmarks, Predictor and Replay; the Playground after a run and the Sweep
    after a measurement are checked at the end of their own tests above (the same runs, not a second one).
    The race is paused (reduced motion) so that axe reads settled colours."""
    (ROOT / "artifacts").mkdir(exist_ok=True)
    report = {}
    with browser_page(chromium, height=3000) as page:
        page.emulate_media(reduced_motion="reduce")
        page.goto(f"{server}/lessons?lesson=2", timeout=60_000)
        page.get_by_label("Your prediction:", exact=False).wait_for(timeout=120_000)
        page.wait_for_timeout(1000)
        report["lesson"] = axe_serious(page, "lesson")

        page.goto(f"{server}/predictor", timeout=60_000)
        page.get_by_text("How far off is the model?").wait_for(timeout=120_000)
        page.locator(".js-plotly-plot").nth(1).wait_for(timeout=60_000)
        page.wait_for_timeout(1000)
        report["predictor"] = axe_serious(page, "predictor")

        page.goto(f"{server}/benchmarks", timeout=60_000)
        page.get_by_text("Run one task live").wait_for(timeout=120_000)
        page.locator(".js-plotly-plot").nth(1).wait_for(timeout=60_000)
        page.wait_for_timeout(1000)
        assert page.get_by_text("Traceback").count() == 0
        report["benchmarks"] = axe_serious(page, "benchmarks")

        page.goto(f"{server}/replay", timeout=60_000)
        page.get_by_text("recorded measurements, not a live run").wait_for(timeout=120_000)
        race = page.frame_locator("iframe").first
        race.locator("#race").wait_for(timeout=60_000)
        page.get_by_text("Show the source").first.wait_for(timeout=120_000)
        page.wait_for_timeout(1500)
        report["replay"] = axe_serious(page, "replay")
        # reduced motion: nothing moved by itself (shown finished, with a note); the keyboard drives it
        assert race.locator("#race").get_attribute("data-state") == "done"
        assert race.get_by_text("Reduced motion is on").is_visible()
        assert race.locator("del.t.rejected.on").count() > 0 and race.locator("ins.t.accepted.on").count() > 0
        box = race.locator(".seq").first
        box.focus()  # a scrolling box takes focus (and scrolls with the arrow keys)
        box.press("r")
        race.locator('#race[data-state="playing"]').wait_for(timeout=10_000)  # played because asked
        box.press(" ")
        race.locator('#race[data-state="paused"]').wait_for(timeout=10_000)
        shown = race.locator(".t.on").count()
        box.press("ArrowRight")
        race.locator("#race").wait_for(timeout=10_000)
        assert race.locator(".t.on").count() >= shown
        race.locator("#step").focus()
        race.locator("#step").press("Enter")  # the buttons work from the keyboard
        assert race.locator('#race[data-state="paused"], #race[data-state="done"]').count() == 1
    (ROOT / "artifacts" / "axe.txt").write_text(
        "\n".join(f"{name}: {line}" for name, lines in report.items() for line in lines) + "\n", encoding="utf-8"
    )
    assert {name: lines for name, lines in report.items() if lines} == {}
