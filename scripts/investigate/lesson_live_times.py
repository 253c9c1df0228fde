"""How long each lesson's live run takes in a real browser, as a student or teacher meets it.

Starts `streamlit run app/main.py` on 127.0.0.1, opens every lesson with an experiment in teacher mode in headless Chromium
(Debian's /usr/bin/chromium, driven by Playwright), presses "Re-measure live" and times the press until the page
labels its numbers "measured live on". Prints one row per lesson (seconds, whether the page flagged the run as
disturbed, whether it showed a traceback), then the sentences the page wrote on the live run beside its recording
(the prediction's answer and the verdict, live and recorded), and saves a full-page screenshot per lesson.
Bounded: one server on loopback, one page at a time, at most --timeout seconds a lesson.

    python scripts/investigate/lesson_live_times.py [--lessons 1,3,4] [--out artifacts/live] [--timeout 240] [--settle 60]

--settle S: open the app once, then wait S seconds before the first lesson, as a class meets a server started before
the lesson (the app's preload, app/main.py, loads the model and prepares the lessons in the background meanwhile).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import time
from pathlib import Path

from app.common.server import serve

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextlib.contextmanager
def server(log: Path):
    """The app's server (app/common/server.py), its output in `log`: yields its URL."""
    try:
        with serve(log) as (url, _):
            yield url
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None


def time_lesson(page, url: str, n: int, out: Path, timeout_s: float) -> dict:
    page.goto(f"{url}/lessons?lesson={n}&teacher=true", timeout=120_000)
    button = page.get_by_role("button", name="Re-measure live")
    button.wait_for(timeout=180_000)
    page.wait_for_timeout(1500)  # the recording's figures drawn: the page is idle before the clock starts
    t0 = time.monotonic()
    button.click()
    page.get_by_text("measured live on").first.wait_for(timeout=timeout_s * 1000)
    seconds = time.monotonic() - t0
    page.wait_for_timeout(1500)
    body = page.inner_text("body")
    page.screenshot(path=str(out / f"lesson{n}.png"), full_page=True)
    against = [m.group(0).strip() for m in AGAINST.finditer(body)]
    return {"lesson": n, "s": seconds, "disturbed": "DISTURBED" in body, "traceback": "Traceback" in body, "against": against}


# the live-beside-recorded box's sentences (app/lessons/kit/against.py `headline`), as the page wrote them
AGAINST = re.compile(r"The (?:prediction's answer|verdict)[^\n]*?[.](?= The |\n|$)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lessons", default="", help="comma-separated lesson numbers (default: every lesson but 0)")
    ap.add_argument("--out", default=str(ROOT / "artifacts" / "live"), help="folder for the screenshots and the log")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds a lesson may take at most")
    ap.add_argument("--settle", type=float, default=0.0, help="seconds between opening the app and the first lesson")
    a = ap.parse_args()
    every = sorted(int(p.name[:2]) for p in (ROOT / "lessons").glob("[0-9][0-9]-*.md") if int(p.name[:2]) > 0)
    try:
        lessons = [int(x) for x in a.lessons.split(",")] if a.lessons else every
    except ValueError:
        raise SystemExit(f"--lessons takes comma-separated lesson numbers, not {a.lessons!r}") from None
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with server(out / "streamlit.log") as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        try:
            if a.settle > 0:  # the first page view starts the preload
                first = browser.new_context()
                first.new_page().goto(url, timeout=120_000)
                time.sleep(a.settle)
                first.close()
            for n in lessons:
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                try:
                    r = time_lesson(context.new_page(), url, n, out, a.timeout)
                finally:
                    context.close()
                print(f"lesson {n}: {r['s']:.1f} s live in the browser; disturbed {r['disturbed']}; traceback {r['traceback']}", flush=True)
                for line in r["against"]:
                    print(f"  {line}", flush=True)
        finally:
            browser.close()


if __name__ == "__main__":
    main()
