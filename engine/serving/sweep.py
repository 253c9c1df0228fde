"""Plain against speculative serving over a range of concurrencies, measured from the client.

At each concurrency c, for R rounds, the plain server and the speculative one take turns (interleaved, so a drift of
the machine falls on both): each gets the same prompts, c requests in flight at a time, and its /metrics is scraped
before and after, so the speculative server's drafts, acceptance and acceptance per position are the run's own. Per
server, concurrency and round: output tokens/s over the wall time of all its requests, and per request the time to
first token and the time per output token after it. The speculative server's responses carry its own count of drafted
and accepted tokens (llama.cpp); the sum is checked against the metrics' difference.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from engine.serving import client, metrics

MAX_REQUESTS = 2_000  # requests in one sweep, all servers and rounds together
MAX_CONCURRENCY = 64


def check_plan(concurrency: list[int], prompts: int, rounds: int, servers: int, max_tokens: int) -> None:
    if not concurrency or any(not 1 <= c <= MAX_CONCURRENCY for c in concurrency):
        raise ValueError(f"--concurrency takes 1 to {MAX_CONCURRENCY} (e.g. 1,2,4,8)")
    if not 1 <= max_tokens <= 4096:
        raise ValueError("--max-new-tokens takes 1 to 4096")
    total = len(concurrency) * prompts * rounds * servers
    if total > MAX_REQUESTS:
        raise ValueError(f"that sweep sends {total} requests; at most {MAX_REQUESTS} (fewer prompts, rounds or concurrencies)")


class Server:
    """One server under test: its root URL, model, and engine (told from its /metrics, None where it has none)."""

    def __init__(self, url: str):
        self.base = client.base_url(url)
        self.model = client.model_id(self.base)
        self.engine = None
        try:
            self.engine = metrics.engine_of(metrics.parse(client.get_text(self.base + "/metrics")))
        except (client.ServerError, metrics.MetricsError):
            self.engine = None  # no metrics endpoint (llama-server without --metrics): timings only

    def counters(self) -> dict | None:
        if self.engine is None:
            return None
        return metrics.spec_counters(metrics.parse(client.get_text(self.base + "/metrics")), self.engine)


def one_batch(server: Server, prompts: list[str], concurrency: int, max_tokens: int, deadline: float) -> dict:
    """All `prompts` through `server`, `concurrency` in flight at a time; its rates, latencies and counters."""
    if time.monotonic() > deadline:
        raise TimeoutError("the sweep ran past --max-seconds; what was measured so far is kept")
    before = server.counters()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        done = list(pool.map(lambda p: client.complete(server.base, server.model, p, max_tokens), prompts))
    wall = time.perf_counter() - t0
    after = server.counters()
    tokens = sum(c.tokens for c in done)
    tpots = [c.tpot_ms for c in done if c.tpot_ms is not None]
    out = {
        "wall_s": round(wall, 4),
        "tokens": tokens,
        "tokens_per_s": round(tokens / wall, 3) if wall > 0 else None,
        "ttft_ms": round(1000 * statistics.median(c.ttft_s for c in done), 3),
        "tpot_ms": round(statistics.median(tpots), 3) if tpots else None,
    }
    drafted = [c.draft_n for c in done if c.draft_n is not None]
    if drafted:
        out["response_drafted"] = sum(drafted)
        out["response_accepted"] = sum(c.draft_accepted or 0 for c in done)
    if before is not None and after is not None and server.engine != "sglang":
        out["counters"] = metrics.run_counters(before, after)
    elif after is not None:
        out["gauges"] = after
    return out


def sweep(
    plain: Server | None,
    spec: Server,
    prompts: list[str],
    concurrency: list[int],
    rounds: int,
    max_tokens: int,
    max_seconds: float = 1800.0,
    progress=print,
) -> dict:
    """{concurrency: {"plain": [round...], "spec": [round...]}} plus a summary per concurrency (medians, speedup)."""
    servers = {"spec": spec} | ({"plain": plain} if plain else {})
    check_plan(concurrency, len(prompts), rounds, len(servers), max_tokens)
    deadline = time.monotonic() + max_seconds
    rows = []
    for c in concurrency:
        runs = {name: [] for name in servers}
        for r in range(rounds):
            order = list(servers) if r % 2 == 0 else list(servers)[::-1]  # alternate who goes first
            for name in order:
                runs[name].append(one_batch(servers[name], prompts, c, max_tokens, deadline))
                progress(f"concurrency {c}, round {r + 1}, {name}: {runs[name][-1]['tokens_per_s']} tokens/s")
        rows.append(summary(c, runs))
    return {"rows": rows, "engine": spec.engine, "model": spec.model, "max_tokens": max_tokens, "prompts": len(prompts)}


def summary(c: int, runs: dict) -> dict:
    """One concurrency's row: each server's median tokens/s (with its rounds), TTFT, TPOT; the speculative server's
    speedup per round (its rate ÷ plain's in that round) as median and range; its acceptance over all rounds."""
    row = {"concurrency": c, "runs": runs}
    for name, rs in runs.items():
        rates = [x["tokens_per_s"] for x in rs if x["tokens_per_s"]]
        row[name] = {
            "tokens_per_s": statistics.median(rates) if rates else None,
            "tokens_per_s_runs": rates,
            "ttft_ms": statistics.median(x["ttft_ms"] for x in rs),
            "tpot_ms": statistics.median([x["tpot_ms"] for x in rs if x["tpot_ms"] is not None] or [0.0]) or None,
        }
    if "plain" in runs:
        ratios = [
            s["tokens_per_s"] / p["tokens_per_s"] for s, p in zip(runs["spec"], runs["plain"]) if s["tokens_per_s"] and p["tokens_per_s"]
        ]
        if ratios:
            row["speedup"] = {"median": statistics.median(ratios), "lo": min(ratios), "hi": max(ratios), "rounds": len(ratios)}
    row["acceptance"] = acceptance(runs["spec"])
    return row


def acceptance(rounds: list[dict]) -> dict | None:
    """Drafts, α and acceptance per position summed over the rounds' counters, and whether the responses' own counts
    agree with them (llama.cpp updates its metrics when a request finishes, so after a round they must match)."""
    counted = [r["counters"] for r in rounds if r.get("counters")]
    if not counted:
        return None
    drafts = sum(c["drafts"] or 0 for c in counted)
    drafted = sum(c["draft_tokens"] or 0 for c in counted)
    accepted = sum(c["accepted"] or 0 for c in counted)
    width = max(len(c["per_pos_accepted"]) for c in counted)
    per_pos = [sum(c["per_pos_accepted"][i] for c in counted if i < len(c["per_pos_accepted"])) for i in range(width)]
    out = {
        "drafts": drafts,
        "draft_tokens": drafted,
        "accepted": accepted,
        "alpha": accepted / drafted if drafted else None,  # the acceptance rate under the recordings' key, not α
        "per_pos_rate": [x / drafts for x in per_pos] if drafts else [],
    }
    said = [r for r in rounds if "response_drafted" in r]
    if said:
        out["responses_drafted"] = sum(r["response_drafted"] for r in said)
        out["responses_accepted"] = sum(r["response_accepted"] for r in said)
        out["responses_agree"] = out["responses_drafted"] == drafted and out["responses_accepted"] == accepted
    return out
