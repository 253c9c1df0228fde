"""engine/serving: the bounded client's URL checks, the /metrics parser and counters (on a real llama-server's
/metrics, recorded: tests/data/serving/), the sweep's bounds, and the CLI's one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.serving import client, metrics, sweep

DATA = Path(__file__).resolve().parents[1] / "data" / "serving"


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080"),
        ("https://gpu.example.org/proxy/v1", "https://gpu.example.org/proxy"),
    ],
)
def test_a_server_url_is_reduced_to_its_root(url, base):
    assert client.base_url(url) == base


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://127.0.0.1", r"not an http\(s\) URL"),
        ("http://", r"not an http\(s\) URL"),
        ("javascript:alert(1)", r"not an http\(s\) URL"),
        ("http://user:pw@127.0.0.1:8080", "no credentials"),
        ("http://127.0.0.1:8080/?x=1", "no credentials, query or fragment"),
        ("http://127.0.0.1/" + "a" * 600, "at most 500 characters"),
        (None, "at most 500 characters"),
    ],
)
def test_hostile_urls_are_refused_with_one_line(url, says):
    with pytest.raises(client.ServerError, match=says) as err:
        client.base_url(url)
    assert "\n" not in str(err.value)


def test_an_unreachable_server_is_one_line():
    with pytest.raises(client.ServerError, match="could not be reached") as err:
        client.model_id("http://127.0.0.1:9")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "host",
    [
        "10.0.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.100.100.200",
        "100.64.0.1",
        "0.0.0.0",
        "[::ffff:10.0.0.1]",
        "[2002:a9fe:a9fe::1]",
        "[fe80::1]",
    ],
)
def test_an_address_a_page_must_not_reach_is_refused_before_any_contact(host):
    """Private, link-local, the shared 100.64/10 space (Alibaba Cloud's metadata sits at 100.100.100.200), unspecified,
    and those same addresses inside IPv6 (IPv4-mapped, 6to4): a page's visitor cannot point the server at them."""
    with pytest.raises(client.ServerError, match="private or local network address"):
        client.check_reachable_from_a_page(f"http://{host}:8080")
    client.check_reachable_from_a_page("http://127.0.0.1:8080")  # a server beside a local SpecLab


def test_a_redirect_is_reported_not_followed():
    """A server the page checked cannot send the client on to one it did not: the redirect is an answer (one line),
    and the address it names is never asked."""
    import http.server
    import threading

    asked = []

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{self.server.server_port}/secret")
            self.end_headers()

        def log_message(self, *args):
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    try:
        with pytest.raises(client.ServerError, match="answered HTTP 302 \\(a redirect, which is not followed\\)") as err:
            client.model_id(f"http://127.0.0.1:{site.server_port}")
    finally:
        site.shutdown()
    assert asked == ["/v1/models"] and "\n" not in str(err.value)


def test_the_parser_refuses_what_is_not_prometheus_text():
    with pytest.raises(metrics.MetricsError, match="line 2 is not a Prometheus sample"):
        metrics.parse("# HELP x\n<html><body>hello</body></html>\n")
    with pytest.raises(metrics.MetricsError, match="is not a number"):
        metrics.parse("llamacpp:x_total abc\n")
    with pytest.raises(metrics.MetricsError, match="labels"):
        metrics.parse("llamacpp:x_total{position=0} 1\n")
    assert metrics.parse('a{b="c\\"d",e="f"} 2 1700000000\n') == {("a", (("b", 'c\\"d'), ("e", "f"))): 2.0}


def test_a_position_label_that_is_not_a_plain_number_is_passed_over():
    """A server's label is untrusted text: "²" is a digit to str.isdigit but not to int(), and a huge number no position."""
    page = "".join(
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{p}"}} {v}\n' for p, v in (("0", 5), ("²", 9), ("9" * 50, 1))
    )
    assert metrics.spec_counters(metrics.parse(page), "vllm")["per_pos"] == {0: 5.0}


def test_engines_are_told_apart_by_their_metric_names():
    assert metrics.engine_of(metrics.parse("vllm:spec_decode_num_drafts_total 3\nprocess_cpu_seconds_total 1\n")) == "vllm"
    assert metrics.engine_of(metrics.parse("sglang:spec_accept_length 2.5\n")) == "sglang"
    assert metrics.engine_of(metrics.parse("process_cpu_seconds_total 1\n")) is None
    gauges = metrics.spec_counters(metrics.parse("sglang:spec_accept_length 2.5\nsglang:spec_accept_rate 0.6\n"), "sglang")
    assert gauges == {"accept_length": 2.5, "accept_rate": 0.6}


def test_a_runs_counters_are_the_difference_of_two_scrapes():
    before = {"drafts": 10.0, "draft_tokens": 30.0, "accepted": 12.0, "generated": 100.0, "per_pos": {0: 7.0, 1: 4.0, 2: 1.0}}
    after = {"drafts": 20.0, "draft_tokens": 60.0, "accepted": 27.0, "generated": 160.0, "per_pos": {0: 15.0, 1: 9.0, 2: 3.0}}
    run = metrics.run_counters(before, after)
    assert run["drafts"] == 10 and run["draft_tokens"] == 30 and run["accepted"] == 15 and run["generated"] == 60
    assert run["per_pos_accepted"] == [8.0, 5.0, 2.0] and run["per_pos_rate"] == [0.8, 0.5, 0.2] and run["alpha"] == 0.5
    with pytest.raises(metrics.MetricsError, match="restarted"):
        metrics.run_counters(after, before)


def test_a_sweep_is_bounded():
    with pytest.raises(ValueError, match="1 to 64"):
        sweep.check_plan([0, 2], 8, 3, 2, 64)
    with pytest.raises(ValueError, match="at most 2000"):
        sweep.check_plan([1, 2, 4, 8, 16, 32, 64], 64, 10, 2, 64)
    with pytest.raises(ValueError, match="--max-new-tokens"):
        sweep.check_plan([1], 8, 3, 2, 0)
    sweep.check_plan([1, 2, 4, 8], 8, 3, 2, 64)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--url", "ftp://x"], "is not an http(s) URL"),
        (["--url", "http://127.0.0.1:9"], "could not be reached"),
        (["--url", "http://127.0.0.1:9", "--concurrency", "1,a"], "a comma list of numbers"),
        (["--url", "http://127.0.0.1:9", "--concurrency", "128"], "1 to 64"),
    ],
)
def test_the_cli_says_what_is_wrong_in_one_line(args, says):
    out = subprocess.run([sys.executable, "-m", "engine", "serve-bench", *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and says in out.stderr and out.stderr.count("\n") == 1


def test_a_real_llama_servers_metrics_page_parses():
    """Recorded from llama-server b11434 after a speculative run (scripts/serving/record_serving.py --fixtures)."""
    samples = metrics.parse((DATA / "llama-server-metrics.txt").read_text())
    assert metrics.engine_of(samples) == "llamacpp"
    now = metrics.spec_counters(samples, "llamacpp")
    assert now["drafts"] > 0 and now["draft_tokens"] >= now["drafts"] and 0 < now["accepted"] <= now["draft_tokens"]
    assert sorted(now["per_pos"]) == list(range(len(now["per_pos"]))) and sum(now["per_pos"].values()) == now["accepted"]


def test_a_real_llama_server_stream_reads_back():
    """A streamed chat completion recorded from llama-server: text, usage and its own drafting counts."""
    ticks = iter(range(1000))
    done = client.read_stream((DATA / "llama-server-stream.txt").read_bytes().splitlines(), 24, clock=lambda: next(ticks))
    assert done["text"] and done["first"] == 0 and done["end"] > 0
    assert 1 <= done["tokens"] <= 24 and done["draft_n"] is not None and 0 <= done["draft_accepted"] <= done["draft_n"]
    with pytest.raises(client.ServerError, match="not JSON"):
        client.read_stream([b"data: {oops", b"data: [DONE]"], 8)
    with pytest.raises(client.ServerError, match="not an object"):
        client.read_stream([b"data: [1, 2]"], 8)
