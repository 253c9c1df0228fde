"""A bounded client for an OpenAI-compatible chat-completions server (llama-server, vLLM, SGLang).

Only http(s) URLs with a host and no credentials, query or fragment; every request has a timeout; a response is read
up to MAX_BYTES; a stream ends at MAX_EVENTS. Each completion is streamed so the client sees its own time to first
token; the final event's usage (OpenAI `stream_options.include_usage`) gives the token count, and llama.cpp's
`timings` (draft_n, draft_n_accepted) the server's own count of drafting for that request.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

MAX_BYTES = 4 << 20  # one response or one /metrics page
MAX_EVENTS = 20_000  # server-sent events in one completion
TIMEOUT_S = 120.0


class ServerError(RuntimeError):
    """The server could not be reached, or did not answer as an OpenAI-compatible completions server."""


def base_url(url: str) -> str:
    """The server's root, checked: http or https, a host, no user:password, query or fragment; '/v1' dropped."""
    if not isinstance(url, str) or len(url) > 500:
        raise ServerError("a server URL is a string of at most 500 characters")
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServerError(f"{url[:80]!r} is not an http(s) URL with a host (e.g. http://127.0.0.1:8080)")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ServerError(f"{url[:80]!r}: give the server's address alone (no credentials, query or fragment)")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:  # urllib takes 0, which no server listens on
        raise ServerError(f"{url[:80]!r}: the port must be a number from 1 to 65535")
    path = parts.path.rstrip("/")
    path = path[: path.index("/v1/")] if "/v1/" in path else path  # an endpoint's URL (…/v1/chat/completions): its root
    path = path[:-3] if path.endswith("/v1") else path
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def check_reachable_from_a_page(base: str) -> None:
    """For a URL a visitor typed into a page: refuse hosts that resolve to private, link-local or otherwise
    non-public addresses (the serving machine's neighbours), loopback aside (a server beside a local SpecLab)."""
    host = urllib.parse.urlsplit(base).hostname or ""
    try:
        infos = socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        raise ServerError(f"{host[:80]!r} does not resolve to an address") from None
    for info in infos:
        ip = ipaddress.ip_address(info[4][0].split("%")[0])
        if ip.is_loopback:
            continue
        mapped = getattr(ip, "ipv4_mapped", None) or getattr(ip, "sixtofour", None)  # an IPv4 address inside an IPv6 one
        if not ip.is_global or ip.is_multicast or (mapped is not None and not mapped.is_global):
            raise ServerError(f"{host[:80]!r} is a private or local network address: give a public server, or 127.0.0.1")


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not a new address to visit: a server the page checked cannot send the client on to
    one it did not check (another host, a metadata address)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises HTTPError with the redirect's code


OPENER = urllib.request.build_opener(_NoRedirects)


def _read(resp, limit: int = MAX_BYTES) -> bytes:
    body = resp.read(limit + 1)
    if len(body) > limit:
        raise ServerError(f"the server sent more than {limit >> 20} MiB for one response")
    return body


def get_text(url: str, timeout: float = 10.0) -> str:
    try:
        with OPENER.open(url, timeout=timeout) as resp:
            return _read(resp).decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        moved = " (a redirect, which is not followed)" if 300 <= exc.code < 400 else ""
        raise ServerError(f"{url} answered HTTP {exc.code}{moved}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ServerError(f"{url} could not be reached: {getattr(exc, 'reason', exc)}") from None


def model_id(base: str) -> str:
    """The first model the server lists at /v1/models (an OpenAI-compatible server lists the one it serves)."""
    try:
        data = json.loads(get_text(base + "/v1/models"))
        return str(data["data"][0]["id"])[:200]
    except (ValueError, KeyError, IndexError, TypeError):
        raise ServerError(f"{base} is not an OpenAI-compatible server: /v1/models did not list a model") from None


@dataclass
class Completion:
    ttft_s: float  # request sent -> first token's text arrived
    total_s: float  # request sent -> the stream ended
    tokens: int  # completion tokens (the server's usage count, else the events with text)
    text: str
    draft_n: int | None = None  # llama.cpp's own count for this request (timings), None where not given
    draft_accepted: int | None = None

    @property
    def tpot_ms(self) -> float | None:
        """Time per output token after the first (the decode phase alone)."""
        return 1000.0 * (self.total_s - self.ttft_s) / (self.tokens - 1) if self.tokens > 1 else None


def complete(base: str, model: str, prompt: str, max_tokens: int, timeout: float = TIMEOUT_S) -> Completion:
    """One streamed, greedy chat completion of `prompt` as the user's message (the server applies its model's chat
    template, as SpecLab's engine does), at most `max_tokens`, timed from the client's side."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": int(max_tokens),
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    req = urllib.request.Request(
        base + "/v1/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    t0 = time.perf_counter()
    try:
        with OPENER.open(req, timeout=timeout) as resp:
            done = read_stream(resp, max_tokens)
    except urllib.error.HTTPError as exc:
        raise ServerError(f"{base}/v1/chat/completions answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ServerError(f"{base} could not be reached: {getattr(exc, 'reason', exc)}") from None
    if done["first"] is None:
        raise ServerError(f"{base}/v1/chat/completions streamed no text (is it an OpenAI-compatible server?)")
    return Completion(done["first"] - t0, done["end"] - t0, done["tokens"], done["text"], done["draft_n"], done["draft_accepted"])


def read_stream(lines, max_tokens: int, clock=time.perf_counter) -> dict:
    """A chat completion's server-sent events (`data: {...}` lines, up to `data: [DONE]`): its text, when its first
    text arrived and when the stream ended (by `clock`), its token count (the final usage, else the events with
    text) and llama.cpp's own drafting counts (`timings`). A stream of non-JSON events or too many raises."""
    first, text, events, usage, timings = None, [], 0, None, None
    for raw in lines:
        line = (raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw).strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        events += 1
        if events > MAX_EVENTS:
            raise ServerError(f"the stream sent more than {MAX_EVENTS} events for {max_tokens} tokens")
        try:
            event = json.loads(data)
        except ValueError:
            raise ServerError(f"the stream sent an event that is not JSON: {data[:60]!r}") from None
        if not isinstance(event, dict):
            raise ServerError(f"the stream sent an event that is not an object: {data[:60]!r}")
        piece = _text(event)
        if piece:
            first = first if first is not None else clock()
            text.append(piece)
        usage = event.get("usage") or usage
        timings = event.get("timings") or timings
    end = clock()
    timings = timings if isinstance(timings, dict) else {}
    tokens = _int((usage or {}).get("completion_tokens") if isinstance(usage, dict) else None) or len(text)
    return {
        "first": first,
        "end": end,
        "tokens": tokens,
        "text": "".join(text)[:100_000],
        "draft_n": _int(timings.get("draft_n")),
        "draft_accepted": _int(timings.get("draft_n_accepted")),
    }


def _text(event) -> str:
    """The text an event carries: a chat chunk's delta content (or a completions chunk's text)."""
    try:
        choice = event["choices"][0]
        piece = (choice.get("delta") or {}).get("content") if "delta" in choice else choice.get("text")
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""
    return piece if isinstance(piece, str) else ""


def _int(value) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None
