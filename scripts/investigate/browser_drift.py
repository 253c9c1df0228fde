"""Do later runs in one browser tab read slower than a fresh tab's first run? (issue 21, in a real browser)

    PYTHONPATH=$PWD .venv/bin/python scripts/investigate/browser_drift.py [--rounds 4] [--tokens 32] [--batch 2]

scripts/investigate/session_drift.py asks the same question headless (AppTest, no browser). This one starts
`streamlit run app/main.py` and drives Debian's Chromium with Playwright, so the browser's own work (laying
out the race, the token views and the charts of the previous run) shares the machine with the timed lanes,
as it does for a student whose browser runs on the same laptop. Each round, interleaved: one run in a FRESH
tab (a new browser context: a new session), and one more run in a single LONG-LIVED tab. Each run waits for
the race replay to finish (the browser's heaviest work), then reads the page's "AR tokens/s" and
"Speculative tokens/s" metrics and its load line (the other processes' cores during each lane, which on
one machine include the browser's). The medians of the two kinds are compared at the end.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from session_drift import parse_args, print_medians  # scripts/ is on the path when this runs as a script

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server() -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app" / "main.py"),
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("streamlit did not start")


def _number(text: str) -> float:
    match = re.search(r"[-+]?\d+(?:\.\d+)?", text.replace(",", ""))
    if not match:
        raise SystemExit(f"no number in metric {text!r}")
    return float(match.group())


def _run(page, kind: str, index: int) -> dict:
    """Press Run, wait until the race has finished, read the two rates and the load line."""
    old = page.get_by_text("Race replay")
    page.get_by_role("button", name="▶ Run").click()
    if old.count():
        old.first.wait_for(state="detached", timeout=300_000)  # the previous results leave the page first
    page.get_by_text("Race replay").wait_for(timeout=600_000)
    page.frame_locator("iframe").first.locator('#race[data-state="done"]').wait_for(timeout=300_000)
    metrics = {}
    for label in ("AR tokens/s", "Speculative tokens/s"):
        box = page.locator('[data-testid="stMetric"]').filter(has_text=label).first
        metrics[label] = _number(box.locator('[data-testid="stMetricValue"]').inner_text())
    load = page.get_by_text("Load while decoding:")
    line = load.first.inner_text() if load.count() else "(no load line)"
    row = {"kind": kind, "run": index, "ar_tps": metrics["AR tokens/s"], "spec_tps": metrics["Speculative tokens/s"]}
    print(f"{kind:<6} run {index}: AR {row['ar_tps']:6.1f} tok/s, spec {row['spec_tps']:6.1f} tok/s; {line}", flush=True)
    return row


def main() -> None:
    args = parse_args(__doc__)
    if not os.path.exists(CHROMIUM):
        raise SystemExit(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    server, url = _start_server()
    link = f"{url}/?tokens={args.tokens}&batch={args.batch}&depth=3"
    rows = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)

            def tab():
                page = browser.new_context(viewport={"width": 1400, "height": 4000}).new_page()
                page.goto(link, timeout=120_000)
                page.get_by_text("Ready:").first.wait_for(timeout=600_000)
                return page

            long_lived = tab()
            _run(long_lived, "warmup", 0)  # loads and warms the pair (cached by the server, as for every visitor)
            for i in range(1, args.rounds + 1):
                fresh = tab()
                rows.append(_run(fresh, "fresh", i))
                fresh.context.close()
                rows.append(_run(long_lived, "same", i))
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    print_medians(rows)


if __name__ == "__main__":
    main()
