"""A class of N in real browsers on this machine (issue 41): join times, the server's idle CPU, Reveal to every student.

It starts `streamlit run app/main.py` on 127.0.0.1 with a fresh class store ($SPECLAB_DATA in a temporary folder),
opens the teacher on lesson 2 in teacher mode (Reveal shares the shipped recording: no model is loaded) and N students
in headless Chromium, one browser context each, joining by the class link and committing a prediction. It prints one
JSON line:
  - each student's join: the link opened -> the class bar shown after pressing Join (seconds);
  - the server's CPU (its process and children, from /proc) over --idle-s seconds while every page polls, as a share
    of one core, beside the browsers' (Chromium and the Playwright driver) and the whole machine's (the browsers share
    these cores), also after the reveals; and the CPU seconds of the server, the browsers and the machine per reveal;
  - Reveal pressed -> "The class's result" on each student's page, all pages watched at once (each page notes the
    moment its own DOM first shows it, on the machine's one clock), three reveals (lessons 2, 3, 4: --reveals), the
    class following the teacher between them, timed the same way;
  - the CPU seconds of the server, the browsers and the machine while the class follows the teacher to a lesson;
  - the load average before and after; the server settles first (its background preload done: `settle`).
Bounded: at most 60 students, loopback only.

    python scripts/class_load.py --students 30 [--idle-s 20] [--json docs/measurements/x.json]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from app.common import server as app_server


def _beside(name: str):
    """A module of scripts/investigate/ (not a package), loaded from its file: no edit of the import path."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / "investigate" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reveal_trace = _beside("reveal_trace")

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TICKS = os.sysconf("SC_CLK_TCK")
LESSONS = (2, 3, 4)  # one reveal each, in teacher mode (the shipped recordings)
TRACE: dict = {}  # with --trace DIR: "dir" and, once the server runs, "runs" (its run trace file) and "pid"


def start_server(data: str, log) -> tuple[subprocess.Popen, str]:
    """The app's server (app/common/server.py) over a fresh class store in `data`; with --trace, run through
    scripts/investigate/reveal_trace.py so its script runs are traced."""
    env = os.environ | {"SPECLAB_DATA": data}
    launch = None
    if TRACE:  # the same server, its script runs traced (scripts/investigate/reveal_trace.py)
        TRACE["runs"] = env["SPECLAB_RUN_TRACE"] = str(TRACE["dir"] / "server-runs.jsonl")
        launch = [sys.executable, str(ROOT / "scripts" / "investigate" / "reveal_trace.py")]
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)  # this checkout's app
    try:
        return app_server.start(log, env, launch)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its waited-for children (/proc/PID/stat fields 14-17)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / TICKS


def browsers_cpu(server_pid: int) -> float:
    """User + system CPU of every process this script started except the server: the Playwright driver and the
    headless Chromium (its browser, GPU and renderer processes), read from /proc (a process that has exited counts in
    its parent's waited-for children)."""
    parents, times = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            pid = int(stat.parent.name)
            parents[pid] = int(fields[1])
            times[pid] = sum(int(x) for x in fields[11:15]) / TICKS
    mine, todo = set(), [os.getpid()]
    while todo:
        pid = todo.pop()
        for child, parent in parents.items():
            if parent == pid and child != server_pid and child not in mine:
                mine.add(child)
                todo.append(child)
    return sum(times[pid] for pid in mine)


def cpu_now(server_pid: int) -> tuple[float, float, float]:
    """CPU seconds so far of the server, the browsers and the whole machine."""
    return cpu_seconds(server_pid), browsers_cpu(server_pid), machine_busy()[0]


def cpu_since(server_pid: int, before: tuple[float, float, float]) -> list[float]:
    """CPU seconds of the server, the browsers and the machine since `before` (cpu_now)."""
    return [round(now - then, 2) for now, then in zip(cpu_now(server_pid), before, strict=True)]


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot (/proc/stat)."""
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + parts[4]
    return (sum(parts) - idle) / TICKS, sum(parts) / TICKS


def settle(pid: int, limit_s: float = 300.0) -> float:
    """Seconds until the server's own CPU stays under 20 % of a core for 5 s (at most `limit_s`): its first page
    starts the background preload (the model, its warm-up and the machine's probe: app/common/resources.py), which
    a Space has long finished when a class arrives; a class measured during it measures the preload too."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        c0 = cpu_seconds(pid)
        time.sleep(5)
        if cpu_seconds(pid) - c0 < 1.0:
            break
    return round(time.monotonic() - t0, 1)


def new_page(browser, url: str):
    context = browser.new_context(viewport={"width": 1300, "height": 1400})
    if TRACE:
        context.add_init_script(reveal_trace.PAGE_INIT)
    page = context.new_page()
    page.set_default_timeout(180_000)
    page.goto(url, timeout=180_000)
    return page


def join(browser, link: str, k: int) -> tuple[object, float]:
    t0 = time.monotonic()
    page = new_page(browser, link)
    page.get_by_role("button", name="Join", exact=True).click()
    code = link.split("class=", 1)[1].split("&", 1)[0]
    page.get_by_text(f"In class {code}", exact=False).first.wait_for()
    joined = time.monotonic() - t0
    guess = page.get_by_label("Your prediction:", exact=False).first  # the lesson's question follows
    guess.fill(f"{1 + k / 10:.2f}")
    guess.press("Enter")
    page.get_by_text(re.compile(r"Your prediction, [0-9.]+, is in the class's count\.")).first.wait_for()
    return page, round(joined, 2)


def page_state(page) -> str:
    """What a page that never showed the result shows instead (its class line, a Join form, a lost connection)."""
    try:
        text = " ".join(page.locator("body").inner_text(timeout=10_000).split())
    except Exception as exc:  # noqa: BLE001 - a diagnostic: any failure to read the page is itself the answer
        return f"unreadable: {type(exc).__name__}"
    for marker in ("In class", "Join class", "Connecting", "Please wait", "Error"):
        at = text.find(marker)
        if at >= 0:
            return text[at : at + 160]
    return text[:160]


# Each page notes the moment its text first holds the marker: checked when the page's DOM changes (a MutationObserver:
# a page whose DOM stands still costs nothing to watch), and says so once on its console, which this script hears as
# an event: no sweep over 30 pages while they draw (the sweep every 0.5 s cost the shared machine ~0.3-0.5 CPU s a reveal).
WATCH = """() => { window.__shown = null; const seen = () => document.body.textContent.includes("The class's result");
  const note = () => { window.__shown = Date.now(); console.debug("speclab-shown " + window.__shown); };
  if (seen()) { note(); return; }
  const o = new MutationObserver(() => { if (seen()) { note(); o.disconnect(); } });
  o.observe(document.body, {childList: true, subtree: true, characterData: true}); }"""
FOLLOWED = WATCH.replace("The class's result", "the teacher is on lesson LESSON ·")
MARK = "speclab-shown "


def watch(students, t0: float, timeout: float) -> tuple[list[float | None], list[str]]:
    """Seconds from `t0` until each page's watch fired (None: not within `timeout`), and what the others show. The
    pages' times come as console events while this waits; one sweep first catches a page that noted it already."""
    shown: dict[int, float] = {}

    def listener(n: int):
        def heard(message) -> None:
            if n not in shown and message.text.startswith(MARK):
                shown[n] = round(int(message.text[len(MARK) :]) / 1000 - t0, 2)

        return heard

    listeners = [listener(n) for n in range(len(students))]
    for page, heard in zip(students, listeners):
        page.on("console", heard)
    try:
        for n, page in enumerate(students):
            if n not in shown and (at := page.evaluate("() => window.__shown")) is not None:
                shown[n] = round(at / 1000 - t0, 2)
        while len(shown) < len(students) and time.time() - t0 < timeout:
            students[0].wait_for_timeout(250)  # events are delivered while Playwright waits
    finally:
        for page, heard in zip(students, listeners):
            page.remove_listener("console", heard)
    missing = [f"student {n + 1}: {page_state(page)}" for n, page in enumerate(students) if n not in shown]
    return [shown.get(n) for n in range(len(students))], missing


def reveal_times(teacher, students, timeout: float) -> tuple[list[float | None], list[str]]:
    """Press Reveal; seconds until each student's page shows the class's result, timed inside each browser (a watch on
    the page's DOM changes, on the machine's one clock), so a busy sweep over the pages never delays a time; and
    what each page that never showed it shows instead."""
    for page in students:
        page.evaluate(WATCH)
    if TRACE:
        return traced_reveal(teacher, students, timeout)
    t0 = time.time()
    teacher.get_by_role("button", name="Reveal", exact=True).first.click()
    return watch(students, t0, timeout)


def traced_reveal(teacher, students, timeout: float) -> tuple[list[float | None], list[str]]:
    """reveal_times with --trace: each page's messages, DOM changes and main-thread time over the reveal, and the
    server's runs, written to DIR/reveal-N.json (scripts/investigate/reveal_trace.py)."""
    pages = [teacher, *students]
    cdps = [reveal_trace.open_metrics(page) for page in pages]
    for page in pages:
        page.evaluate(reveal_trace.ARM)
    before = [reveal_trace.metrics(cdp) for cdp in cdps]
    procs0 = reveal_trace.process_cpu(TRACE["pid"])
    t0 = time.time()
    teacher.get_by_role("button", name="Reveal", exact=True).first.click()
    times, lost = watch(students, t0, timeout)
    time.sleep(2)  # what the pages do just after showing it counts too
    procs1 = reveal_trace.process_cpu(TRACE["pid"])
    after = [reveal_trace.metrics(cdp) for cdp in cdps]
    got = [page.evaluate(reveal_trace.COLLECT) for page in pages]
    for cdp in cdps:
        cdp.detach()
    detail = [reveal_trace.page_breakdown(1000 * t0, shown, g, b, a) for shown, g, b, a in zip([None, *times], got, before, after)]
    runs = reveal_trace.server_runs(TRACE["runs"], t0, t0 + timeout)
    report = {
        "summary": reveal_trace.summary(detail[1:], runs, t0),
        "file_published_s": reveal_trace.published(TRACE["runs"], t0, t0 + timeout),
        "teacher": detail[0],
        "cpu_s_by_process_kind": {k: round(procs1.get(k, 0.0) - v, 2) for k, v in procs0.items()},
        "students": detail[1:],
        "server_runs": runs,
    }
    TRACE["n"] = TRACE.get("n", 0) + 1
    (TRACE["dir"] / f"reveal-{TRACE['n']}.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({"reveal": TRACE["n"], **report["summary"], "teacher": report["teacher"]}), file=sys.stderr)
    return times, lost


def move_class(teacher, desk_link: str, students, lesson: int, timeout: float) -> tuple[list[float | None], list[str]]:
    """The teacher opens `lesson` (the desk's private link in the same tab); seconds until each student's page has
    followed it (timed in each browser, as reveals are), and what each page that did not follow shows instead."""
    for page in students:
        page.evaluate(FOLLOWED.replace("LESSON", str(lesson)))
    t0 = time.time()
    teacher.goto(f"{desk_link}&lesson={lesson}&teacher=true")
    teacher.get_by_role("button", name="Reveal", exact=True).first.wait_for()
    return watch(students, t0, timeout)


def set_frozen(pages, frozen: bool) -> None:
    """Freeze (or wake) pages through the DevTools protocol: a frozen page runs no timers, so it polls nothing while
    its session and connection stay (the class without its load, for the fairness pairs)."""
    for page in pages:
        cdp = page.context.new_cdp_session(page)
        cdp.send("Page.setWebLifecycleState", {"state": "frozen" if frozen else "active"})
        cdp.detach()


def playground_run(browser, url: str) -> float:
    """Seconds from opening the Playground with auto-run (its default prompt and settings) to its drawn Summary."""
    page = browser.new_context(viewport={"width": 1300, "height": 1400}).new_page()
    page.set_default_timeout(300_000)
    t0 = time.monotonic()
    page.goto(f"{url}/playground?auto=true")
    page.get_by_role("heading", name="Summary").first.wait_for()
    seconds = time.monotonic() - t0
    page.context.close()
    return round(seconds, 2)


def fairness(browser, url: str, students, pairs: int) -> dict:
    """A visitor's Playground run with the class idling (every page polling) and without it (every page frozen),
    interleaved `pairs` times after one warm-up run (the model's first load)."""
    if pairs == 0:
        return {}
    warm = playground_run(browser, url)
    alone, beside = [], []
    for _ in range(pairs):
        set_frozen(students, True)
        time.sleep(3)
        alone.append(playground_run(browser, url))
        set_frozen(students, False)
        time.sleep(5)  # every page back at its polling
        beside.append(playground_run(browser, url))
    ratio = statistics.median(beside) / statistics.median(alone)
    paired = statistics.median(b / a for b, a in zip(beside, alone))  # each pair's own ratio: the machine drifts
    return {
        "playground_warmup_s": warm,
        "playground_alone_s": alone,
        "playground_beside_idle_class_s": beside,
        "playground_ratio": round(ratio, 3),
        "playground_ratio_paired_median": round(paired, 3),
    }


def server_errors(lines: list[str]) -> list[str]:
    """The server log's error lines (an exception's name and message, a logged error or warning), each once: a run
    whose pages raised says so in its JSON, not only in a log that is thrown away."""
    found = []
    for line in lines:
        text = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        if re.match(r"^[A-Za-z_.]*(Error|Exception|Key|Id)\b.*:|.*\b(ERROR|WARNING)\b", text) and text not in found:
            found.append(text[:300])
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--idle-s", type=float, default=20.0)
    ap.add_argument("--reveal-timeout-s", type=float, default=120.0)
    ap.add_argument("--fairness-pairs", type=int, default=0, help="Playground runs alone / beside the idle class")
    ap.add_argument("--reveals", type=int, default=3, help="one per lesson: 2, then 3, then 4 (the class follows)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--trace", type=Path, default=None, help="a folder: where each reveal's time goes (reveal-N.json)")
    ap.add_argument("--server-log", type=Path, default=None, help="keep the server's whole log here")
    args = ap.parse_args()
    if not 1 <= args.students <= 60 or not 1 <= args.idle_s <= 120 or not 1 <= args.reveals <= len(LESSONS):
        raise SystemExit(f"--students 1-60, --idle-s 1-120, --reveals 1-{len(LESSONS)}")
    if args.trace:
        args.trace.mkdir(parents=True, exist_ok=True)
        TRACE["dir"] = args.trace
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as data, open(Path(data) / "server.log", "w") as log:
        server, url = start_server(data, log)
        if TRACE:
            TRACE["pid"] = server.pid
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                teacher = new_page(browser, f"{url}/lessons?lesson=2&teacher=true")
                teacher.get_by_role("button", name="Start a class").click()
                link = teacher.locator("code").filter(has_text="/lessons?class=").first.inner_text().strip()
                settled = settle(server.pid)
                students, joins = [], []
                for k in range(args.students):
                    page, seconds = join(browser, link, k)
                    students.append(page)
                    joins.append(seconds)
                teacher.get_by_text(f"{args.students} predictions").first.wait_for()
                time.sleep(3)  # every page settled into its polling
                c0, (b0, t0), w0, g0 = cpu_seconds(server.pid), machine_busy(), time.monotonic(), browsers_cpu(server.pid)
                time.sleep(args.idle_s)
                c1, (b1, t1), w1, g1 = cpu_seconds(server.pid), machine_busy(), time.monotonic(), browsers_cpu(server.pid)
                fair = fairness(browser, url, students, args.fairness_pairs)
                desk = teacher.locator("code").filter(has_text="&desk=").first.text_content().strip()
                reveals, missing, follows, reveal_cpu, follow_cpu = [], [], [], [], []
                for lesson in LESSONS[: args.reveals]:
                    if lesson != LESSONS[0]:
                        before = cpu_now(server.pid)
                        times, lost = move_class(teacher, desk, students, lesson, args.reveal_timeout_s)
                        follow_cpu.append(cpu_since(server.pid, before))
                        follows.append(times)
                        missing += [f"lesson {lesson} not followed, {x}" for x in lost]
                    time.sleep(3)  # the follow's reruns settled
                    before = cpu_now(server.pid)
                    times, lost = reveal_times(teacher, students, args.reveal_timeout_s)
                    reveal_cpu.append(cpu_since(server.pid, before))
                    reveals.append(times)
                    missing += [f"lesson {lesson}, {x}" for x in lost]
                time.sleep(3)
                c2, (b2, t2), w2, g2 = cpu_seconds(server.pid), machine_busy(), time.monotonic(), browsers_cpu(server.pid)
                time.sleep(args.idle_s)
                c3, (b3, t3), w3, g3 = cpu_seconds(server.pid), machine_busy(), time.monotonic(), browsers_cpu(server.pid)
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
            log.flush()
            lines = [line for line in (Path(data) / "server.log").read_text().splitlines() if line.strip()]
            if args.server_log:
                args.server_log.write_text("\n".join(lines) + "\n")
    shown = [[x for x in t if x is not None] for t in reveals]
    lasts = [max(t) if len(t) == args.students else None for t in shown]
    report = {
        "machine": f"{os.cpu_count()} CPU cores",
        "students": args.students,
        "server_settled_before_joins_s": settled,
        "join_s": joins,
        "join_first_s": joins[0],
        "join_last_s": joins[-1],
        "join_max_s": max(joins),
        "idle_s": args.idle_s,
        "server_cpu_share_of_one_core": round((c1 - c0) / (w1 - w0), 4),
        "machine_cpu_share_of_all_cores": round((b1 - b0) / (t1 - t0), 4),
        "browsers_cpu_share_of_one_core": round((g1 - g0) / (w1 - w0), 4),
        "server_cpu_share_of_one_core_after_reveal": round((c3 - c2) / (w3 - w2), 4),
        "browsers_cpu_share_of_one_core_after_reveal": round((g3 - g2) / (w3 - w2), 4),
        "machine_cpu_share_of_all_cores_after_reveal": round((b3 - b2) / (t3 - t2), 4),
        "reveal_cpu_s_server_browsers_machine": reveal_cpu,
        **fair,
        "reveal_to_each_student_s": reveals,
        "follow_to_each_student_s": follows,
        "follow_cpu_s_server_browsers_machine": follow_cpu,
        "reveal_to_last_student_s": lasts,
        "reveal_to_last_student_median_of_reveals_s": statistics.median(lasts) if None not in lasts else None,
        "reveal_to_median_student_s": [statistics.median(t) if t else None for t in shown],
        "reveal_timeout_s": args.reveal_timeout_s,
        "students_without_the_result": [args.students - len(t) for t in shown],
        "pages_without_the_result": missing,
        "server_errors": server_errors(lines),
        "server_log_tail": lines[-8:],
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
