"""A class in real browsers (issue 29): a Streamlit server, a teacher and N students in headless Chromium, then
scripts/investigate/class_load.py with --server-pid while every page polls, and Reveal -> each student's page.

It starts `streamlit run app/main.py` with a fresh store ($SPECLAB_DATA in a temporary folder), opens the teacher
on lesson 2 in teacher mode (Reveal shares the recording: no model is loaded), joins N students by the class link
(one browser context each), lets them commit predictions, then
  1. runs class_load.py --server-pid <server> for --idle-s seconds: the server's CPU while the N real pages and
     the teacher's desk poll (plus the store's own cost with 30 simulated students, from that script);
  2. presses Reveal once and times, for each student page, Reveal -> "The class's result" visible. Each page is
     checked in turn, so every time but the first is an upper bound; the last is the class's wait.
Prints one JSON report with the machine's load average before and after (a shared machine: say so).

    python scripts/investigate/class_browser_load.py --students 10 --idle-s 10 [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def start_server(data: str, log) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app" / "main.py"), "--server.headless", "true"]
    cmd += ["--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=os.environ | {"SPECLAB_DATA": data})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            if r.status == 200:
                return proc, url
        time.sleep(0.5)
    proc.kill()
    raise SystemExit("streamlit did not start")


def new_page(browser, url: str):
    page = browser.new_context(viewport={"width": 1300, "height": 1600}).new_page()
    page.set_default_timeout(180_000)
    page.goto(url, timeout=180_000)
    return page


def reveal_times(teacher, students) -> list[float]:
    """Press the desk's Reveal; seconds until each student's page shows the class's result (checked in turn)."""
    t0 = time.monotonic()
    teacher.get_by_role("button", name="Reveal", exact=True).click()
    times = []
    for page in students:
        page.get_by_text("The class's result").wait_for()
        times.append(round(time.monotonic() - t0, 2))
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=10)
    ap.add_argument("--idle-s", type=float, default=10.0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as data, open(Path(data) / "server.log", "w") as log:
        server, url = start_server(data, log)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                teacher = new_page(browser, f"{url}/lessons?lesson=2&teacher=true")
                teacher.get_by_role("button", name="Start a class").click()
                link = teacher.locator("code").filter(has_text="/lessons?class=").first.inner_text().strip()
                students = []
                for k in range(args.students):
                    page = new_page(browser, link)
                    page.get_by_role("button", name="Join", exact=True).click()
                    guess = page.get_by_label("Your prediction: Speculative", exact=False)
                    guess.fill(f"{1 + k / 10:.2f}")
                    guess.press("Enter")
                    page.get_by_text("Your prediction is in the class's count.").wait_for()
                    students.append(page)
                teacher.get_by_text(f"{args.students} predictions").first.wait_for()
                idle = subprocess.run(
                    [sys.executable, str(ROOT / "scripts/investigate/class_load.py"), "--idle-s", str(args.idle_s)]
                    + ["--reveals", "1", "--server-pid", str(server.pid)],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                times = reveal_times(teacher, students)
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    report = {
        "machine": f"{os.cpu_count()} CPU cores, shared",
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "browser_students": args.students,
        "class_load": json.loads(idle.stdout),
        "reveal_to_each_student_page_s": times,
        "reveal_to_last_student_page_s": max(times),
        "reveal_to_first_student_page_s": times[0],
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
