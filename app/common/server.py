"""Starting this app's Streamlit server in the background: the one launcher the scripts and the browser tests share.

`serve(log)` runs `streamlit run app/main.py` headless on 127.0.0.1 at a free port, its output in `log`, waits until
its health endpoint answers and yields its URL and process; leaving the block stops it. (scripts/run.sh starts the
app in the foreground for a person; this is for programs that drive it.)
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "app" / "main.py"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(log, env: dict | None = None, launch: list[str] | None = None, timeout_s: float = 120) -> tuple[subprocess.Popen, str]:
    """The server started and answering: (process, URL). log: an open file for its output; env: its environment
    (default: this process's); launch: what runs `streamlit` (default: this interpreter's `-m streamlit`; a wrapper
    that takes streamlit's arguments, as scripts/investigate/reveal_trace.py does). RuntimeError if it does not
    answer within `timeout_s` (it is killed then)."""
    port = free_port()
    cmd = [*(launch or [sys.executable, "-m", "streamlit"]), "run", str(MAIN), "--server.headless", "true"]
    cmd += ["--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env if env is not None else os.environ.copy())
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            if r.status == 200:
                return proc, url
        time.sleep(0.5)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"streamlit did not start (see {getattr(log, 'name', 'its log')})")


def stop(proc: subprocess.Popen) -> None:
    """Terminate the server; kill it if it has not stopped within 15 s."""
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def serve(log_path: Path, env: dict | None = None, launch: list[str] | None = None, timeout_s: float = 120):
    """`start` with its output written to `log_path`; yields (URL, process) and stops the server on leaving."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        proc, url = start(log, env, launch, timeout_s)
        try:
            yield url, proc
        finally:
            stop(proc)
