"""Measure the Playground as a user meets it: cold start, one run of both lanes, resident memory.

    .venv/bin/python scripts/investigate/measure_app.py [--tokens 64] [--depth 4] [--drafter draft+model]

Starts `streamlit run app/main.py` on a free localhost port (weights already cached), drives Debian's
Chromium with Playwright, and prints:
  - cold start: process start -> the Playground says "Ready:" (model pair loaded, probe done, warm-up run);
  - run: click Run -> the race replay is on the page (AR lane + speculative lane decoded and drawn);
  - RSS of the streamlit process (psutil) after the run.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

import psutil
from playwright.sync_api import sync_playwright

from app.common import server as app_server

ROOT = Path(__file__).resolve().parents[2]

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--drafter", default="draft+model", help="query value: 'draft+model' or 'n-gram'")
    ap.add_argument("--prompt", default=None, help="prompt title (query value), default: the page's default")
    args = ap.parse_args()
    t0 = time.monotonic()
    proc, url = app_server.start(subprocess.DEVNULL)  # the app's server (app/common/server.py), answering
    try:
        query = f"tokens={args.tokens}&depth={args.depth}&drafter={args.drafter}"
        if args.prompt:
            query += f"&prompt={args.prompt}"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 3000})
            while True:
                try:
                    page.goto(f"{url}/?{query}", timeout=5_000)
                    break
                except Exception:
                    time.sleep(0.2)
            page.get_by_text("Ready:").first.wait_for(timeout=300_000)
            cold = time.monotonic() - t0
            t1 = time.monotonic()
            page.get_by_role("button", name="▶ Run").click()
            page.get_by_text("Race replay").wait_for(timeout=600_000)
            page.frame_locator("iframe").first.locator("#race").wait_for(timeout=60_000)
            run = time.monotonic() - t1
            rss = psutil.Process(proc.pid).memory_info().rss
            summary = page.locator('[data-testid="stMetric"]').all_inner_texts()[:4]
            browser.close()
        print(f"cold start to 'Ready' (cached weights): {cold:.1f} s")
        print(f"run of both lanes, batch 1, depth {args.depth}, {args.tokens} tokens, until the race replay shows: {run:.1f} s")
        print(f"streamlit RSS after the run: {rss / 2**20:.0f} MiB")
        print("summary metrics:", " | ".join(s.replace("\n", " ") for s in summary))
    finally:
        app_server.stop(proc)


if __name__ == "__main__":
    main()
