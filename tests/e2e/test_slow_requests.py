"""Slow and malformed HTTP framing through the real stack (HAProxy ingress, the replicas'
HTTP servers, the app): a body dribbled a byte at a time is cut with a 408 in the called
API's shape once ``security.body_timeout_s`` passes, normal requests are served meanwhile,
and broken framing (conflicting lengths, bad chunks, huge header blocks) never gets a 5xx
but 503/504 or a hang."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import h11
import httpx

from tests.e2e.conftest import Cluster
from tests.e2e.replicas import ITEM, save_report

# The cluster fixture sets security.body_timeout_s to this (conftest.py).
BODY_TIMEOUT_S = 2.0
SLOW_CONNECTIONS = 60  # more than the 2 replicas' max_ongoing_requests (24 each) in the fixture
DRIBBLE_S = 1.0
WAIT_S = 14.0  # how long a slow connection is kept before the test gives up on a cut


@dataclass
class Slow:
    path: str
    api: str
    head: bytes
    body: bytes
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    answer: bytes = b""
    cut_after_s: float | None = None  # None: still open when the test stopped waiting
    closed: bool = False  # whether the connection closed after the answer


def _head(path: str, content_type: str, length: int, extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: slow\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n"
    ).encode()


def slow_requests(n: int) -> list[Slow]:
    """Valid requests to a native, a DeepL and a document route, each to be dribbled."""
    out = []
    native = json.dumps({**ITEM, "pad": "x" * 200}).encode()
    deepl = b"text=Hello&target_lang=DE&" + b"x=" + b"y" * 200
    boundary = "slowbound"
    upload = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="target_lang"\r\n\r\nde\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n'
        f"Content-Type: text/plain\r\n\r\n{'Hello. ' * 40}\r\n--{boundary}--\r\n"
    ).encode()
    kinds = [
        ("/translate", "native", "application/json", native, ""),
        ("/v2/translate", "deepl", "application/x-www-form-urlencoded", deepl,
         "Authorization: DeepL-Auth-Key slow\r\n"),
        ("/documents", "native", f"multipart/form-data; boundary={boundary}", upload, ""),
    ]  # fmt: skip
    for i in range(n):
        path, api, ctype, body, extra = kinds[i % len(kinds)]
        out.append(Slow(path, api, _head(path, ctype, len(body), extra), body))
    return out


def events(sock: socket.socket, conn: h11.Connection) -> Iterator[Any]:
    """The answer's h11 events, read from ``sock`` as needed, up to its end (or the socket's)."""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = sock.recv(65536)
            if not data:
                return
            conn.receive_data(data)
            continue
        yield event
        if isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return


def read_answer(sock: socket.socket, conn: h11.Connection, slow: Slow) -> None:
    """Reads the response (if any) with h11 into ``slow``."""
    for event in events(sock, conn):
        if isinstance(event, h11.Response):
            slow.status = event.status_code
            slow.headers = {k.decode(): v.decode("latin-1") for k, v in event.headers}
        elif isinstance(event, h11.Data):
            slow.answer += event.data


def dribble(url: str, slow: Slow, stop: threading.Event) -> None:
    """Sends the headers and 10 bytes of the body, then a byte every ``DRIBBLE_S`` until the
    server answers or closes, or ``stop`` is set."""
    parsed = urlsplit(url)
    start = time.monotonic()
    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as sock:
        sock.sendall(slow.head + slow.body[:10])
        sent = 10
        conn = h11.Connection(h11.CLIENT)
        conn.send(h11.Request(method="POST", target=slow.path, headers=[("Host", "x")]))
        while not stop.is_set() and time.monotonic() - start < WAIT_S:
            readable, _, _ = select.select([sock], [], [], DRIBBLE_S)
            if readable:
                with contextlib.suppress(OSError, h11.RemoteProtocolError):
                    read_answer(sock, conn, slow)
                slow.cut_after_s = time.monotonic() - start
                slow.closed = closes(sock)
                return
            if sent < len(slow.body) - 1:
                try:
                    sock.sendall(slow.body[sent : sent + 1])
                except OSError:
                    slow.cut_after_s = time.monotonic() - start
                    return
                sent += 1


def closes(sock: socket.socket, within_s: float = 2.0) -> bool:
    """Whether the server closes the connection within ``within_s`` (the client sends
    nothing more)."""
    sock.settimeout(within_s)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except OSError:
        return True
    return True


def haproxy_sessions() -> dict[str, int]:
    """Current sessions per replica (HAProxy's statistics page, port 8404), if it answers."""
    try:
        text = httpx.get("http://127.0.0.1:8404/stats;csv", timeout=2).text
    except httpx.HTTPError:
        return {}
    lines = text.lstrip("# ").splitlines()
    cols = lines[0].split(",")
    out = {}
    for line in lines[1:]:
        row = dict(zip(cols, line.split(","), strict=False))
        if row.get("svname") not in ("FRONTEND", "BACKEND", None) and row.get("scur"):
            out[f"{row['pxname']}/{row['svname']}"] = int(row["scur"])
    return out


def normal_requests(url: str, start: float) -> list[tuple[int | str, float]]:
    """4 translations, each retried on a 503 until ``WAIT_S`` after ``start``: (status,
    seconds since ``start`` when answered) of every attempt."""
    attempts: list[tuple[int | str, float]] = []
    with httpx.Client(timeout=WAIT_S) as client:
        while sum(s == 200 for s, _ in attempts) < 4 and time.monotonic() - start < WAIT_S:
            try:
                status: int | str = client.post(f"{url}/translate", json=ITEM).status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            attempts.append((status, round(time.monotonic() - start, 2)))
            if status != 200:
                time.sleep(0.2)
    return attempts


BURST = 48  # both replicas' max_ongoing_requests


def probe_burst(url: str) -> list[int | str]:
    """``BURST`` concurrent /readyz, each given 5 s: their statuses."""

    def one(_: int) -> int | str:
        try:
            return httpx.get(f"{url}/readyz", timeout=5).status_code
        except httpx.HTTPError as exc:
            return type(exc).__name__

    with ThreadPoolExecutor(BURST) as pool:
        return list(pool.map(one, range(BURST)))


def replica_gauges(metrics_url: str) -> dict[str, float]:
    """Ray's per-replica gauge of requests being processed, summed over replicas (exported
    every few seconds: a trend, not an instant)."""
    try:
        text = httpx.get(metrics_url, timeout=5).text
    except httpx.HTTPError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        name = line.split("{")[0]
        if name.endswith(("replica_processing_queries", "num_ongoing_http_requests")):
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def test_slow_bodies_are_cut_with_408_and_the_replicas_keep_serving(cluster: Cluster) -> None:
    """``SLOW_CONNECTIONS`` clients send their headers, then their bodies a byte a second,
    to /translate, /v2/translate and /documents: each gets a 408 in its API's shape with
    ``Connection: close`` after about ``BODY_TIMEOUT_S``, and /translate answers 200 while
    they hang on."""
    url = cluster.url
    slows = slow_requests(SLOW_CONNECTIONS)
    stop = threading.Event()
    start = time.monotonic()
    threads = [threading.Thread(target=dribble, args=(url, s, stop)) for s in slows]
    for t in threads:
        t.start()
    time.sleep(1.0)
    sessions = haproxy_sessions()
    ongoing = replica_gauges(cluster.metrics_url)
    normal = normal_requests(url, start)
    ongoing_later = replica_gauges(cluster.metrics_url)
    while time.monotonic() - start < WAIT_S and any(x.cut_after_s is None for x in slows):
        time.sleep(0.1)
    sessions_after_cut = haproxy_sessions()  # the slow clients still connected (``closes``)
    burst = probe_burst(url)
    for t in threads:
        t.join(WAIT_S + 5)
    stop.set()
    cuts = [s.cut_after_s for s in slows]
    report = {
        "slow_connections": len(slows),
        "haproxy_sessions_at_1s": sessions,
        "haproxy_sessions_after_the_cut": sessions_after_cut,
        "burst_after_the_cut": burst,
        "ongoing_gauges_at_1s": ongoing,
        "ongoing_gauges_after_normal": ongoing_later,
        "normal_requests": normal,
        "statuses": sorted({str(s.status) for s in slows}),
        "cut": sum(c is not None for c in cuts),
        "closed_after_answer": sum(s.closed for s in slows),
        "connection_headers": sorted({s.headers.get("connection", "") for s in slows}),
        "max_cut_after_s": max((c for c in cuts if c is not None), default=None),
    }
    save_report("slow_bodies", report)
    # The replicas' places are free although the clients are still connected (the replica
    # answers with Connection: close, tests/unit/api/test_body_deadline.py, but HAProxy
    # manages the client's connection itself and keeps it open): a burst of as many
    # requests as the replicas hold is answered at once.
    assert burst == [200] * BURST, report
    served_at = [t for status, t in normal if status == 200]
    assert len(served_at) == 4, report
    assert max(served_at) < BODY_TIMEOUT_S + 6, report
    for s in slows:
        assert s.cut_after_s is not None, (s.path, report)
        assert s.cut_after_s < BODY_TIMEOUT_S + 4, (s.path, report)
        assert s.status == 408, (s.path, s.status, s.answer[:300], report)
        payload = json.loads(s.answer)
        if s.api == "deepl":
            assert isinstance(payload["message"], str), payload
        else:
            assert payload["error"]["code"] == "request_timeout", payload
    assert httpx.post(f"{url}/translate", json=ITEM, timeout=30).status_code == 200


# -- broken framing, as raw bytes through the proxy port -------------------------------------


def exchange(url: str, request: bytes, half_close: bool = False, timeout_s: float = 10.0,
             expect_continue: bool = False) -> tuple[int, bytes]:  # fmt: skip
    """Sends ``request`` as it is and reads the first final answer with h11: (status, body);
    status 0 when the server closed without one. A hang fails (socket timeout). With
    ``expect_continue``, a ``100 Continue`` is an answer too (status 100): the server asked
    for the body."""
    parsed = urlsplit(url)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=timeout_s) as sock:
        try:
            sock.sendall(request)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may answer and close before it has read everything
        return first_answer(sock, expect_continue)


def first_answer(sock: socket.socket, expect_continue: bool) -> tuple[int, bytes]:
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    conn.send(h11.EndOfMessage())
    status, body = 0, b""
    with contextlib.suppress(h11.RemoteProtocolError, ConnectionResetError):
        for event in events(sock, conn):
            if isinstance(event, h11.InformationalResponse) and expect_continue:
                return event.status_code, b""
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += event.data
    return status, body


def _post(head: str, body: bytes = b"") -> bytes:
    start = "POST /translate HTTP/1.1\r\nHost: f\r\nContent-Type: application/json\r\n"
    return f"{start}{head}\r\n".encode() + body


ITEM_BODY = json.dumps(ITEM).encode()
N = len(ITEM_BODY)
CHUNKED = f"{N:x}\r\n".encode() + ITEM_BODY + b"\r\n0\r\n\r\n"
BIG_HEADER = "X-Big: " + "b" * 60_000 + "\r\n"
FRAMING = {
    "content-length and chunked": (
        _post(f"Content-Length: {N}\r\nTransfer-Encoding: chunked\r\n", CHUNKED),
        False,
    ),
    "two content-lengths": (
        _post(f"Content-Length: {N}\r\nContent-Length: {N + 5}\r\n", ITEM_BODY + b"xxxxx"),
        False,
    ),
    "content-length, a list": (_post(f"Content-Length: {N}, {N}\r\n", ITEM_BODY), False),
    "content-length longer, then close": (
        _post(f"Content-Length: {N + 100}\r\n", ITEM_BODY),
        True,
    ),
    "content-length shorter": (_post(f"Content-Length: {N - 5}\r\n", ITEM_BODY), False),
    "content-length negative": (_post("Content-Length: -1\r\n", ITEM_BODY), False),
    "chunk size not hex": (
        _post("Transfer-Encoding: chunked\r\n", b"zz\r\n" + ITEM_BODY + b"\r\n0\r\n\r\n"),
        False,
    ),
    "chunk size negative": (
        _post("Transfer-Encoding: chunked\r\n", b"-5\r\nabcde\r\n0\r\n\r\n"),
        False,
    ),
    "chunk size huge": (
        _post("Transfer-Encoding: chunked\r\n", b"fffffffffffffffffffff\r\nab\r\n0\r\n\r\n"),
        True,
    ),
    "chunk longer than its size": (
        _post("Transfer-Encoding: chunked\r\n", b"2\r\nabcdef\r\n0\r\n\r\n"),
        False,
    ),
    "chunked, cut, then close": (_post("Transfer-Encoding: chunked\r\n", b"10\r\nabc"), True),
    "transfer-encoding gzip, chunked": (
        _post("Transfer-Encoding: gzip, chunked\r\n", CHUNKED),
        False,
    ),
    "transfer-encoding unknown": (_post("Transfer-Encoding: bogus\r\n", ITEM_BODY), True),
    "header block of 60 KB": (
        _post(f"Content-Length: {N}\r\n{BIG_HEADER}", ITEM_BODY),
        False,
    ),
    "header block of 200 KB": (
        _post(
            f"Content-Length: {N}\r\n" + BIG_HEADER * 3 + "X-More: " + "m" * 20_000 + "\r\n",
            ITEM_BODY,
        ),
        False,
    ),
    "5,000 headers": (
        _post(
            f"Content-Length: {N}\r\n" + "".join(f"X-H{i}: v\r\n" for i in range(5000)), ITEM_BODY
        ),
        False,
    ),
    "request line of 100 KB": (
        b"GET /languages?" + b"q" * 100_000 + b" HTTP/1.1\r\nHost: f\r\n\r\n",
        False,
    ),
    "http/1.0, no content-length": (
        b"POST /translate HTTP/1.0\r\nContent-Type: application/json\r\n\r\n" + ITEM_BODY,
        True,
    ),
    "no http version": (b"POST /translate\r\nContent-Length: 2\r\n\r\n{}", True),
    "header without colon": (
        _post(f"Content-Length: {N}\r\nNoColonHere\r\n", ITEM_BODY),
        False,
    ),
}


def test_broken_framing_gets_no_5xx_and_no_hang(served: str) -> None:
    """Each conflicting or broken frame through HAProxy and the replicas' HTTP server: an
    answer (or a close) within seconds, never a 5xx but 503/504; the replicas still serve."""
    with ThreadPoolExecutor(8) as pool:
        statuses = pool.map(lambda job: exchange(served, *job), FRAMING.values())
        answers = dict(zip(FRAMING, statuses, strict=True))
    save_report(
        "broken_framing", {n: [s, b[:48].decode("latin-1")] for n, (s, b) in answers.items()}
    )
    for name, (status, body) in answers.items():
        assert status < 500 or status in (503, 504), (name, status, body[:300])
    for _ in range(4):
        assert httpx.post(f"{served}/translate", json=ITEM, timeout=30).status_code == 200


def test_expect_continue_over_the_body_limit_is_refused_before_the_body(served: str) -> None:
    """``Expect: 100-continue`` with a declared size over the body limit: a 413 in the API's
    shape comes without a byte of the body sent (Ray's direct ingress reads a request's body
    eagerly, so its HTTP server may send a ``100 Continue`` first: the 413 follows at once);
    a small declared size gets its 100 and, with the body, a 200."""
    big = _post("Content-Length: 50000000\r\nExpect: 100-continue\r\n")
    status, body = exchange(served, big, timeout_s=5)
    assert status == 413, (status, body[:300])
    assert json.loads(body)["error"]["code"] == "body_too_large"
    small = _post(f"Content-Length: {N}\r\nExpect: 100-continue\r\n")
    assert exchange(served, small, expect_continue=True)[0] == 100
    status, body = exchange(served, small + ITEM_BODY)
    assert status == 200, body[:300]


def test_an_answer_ray_writes_itself_carries_the_security_headers(served: str) -> None:
    """Behind HAProxy the replica's own HTTP server, not the app, answers a request past its
    ``x-request-timeout-seconds`` (here 0.5 s of a body that never comes, before the app's
    2 s body deadline): Ray's 408 in plain text. It carries the app's security headers, put
    there by the proxy callback (serving/proxy_headers.py) that Ray wraps around that server
    too; the route prefix is ``/``, so no path reaches the proxy's own 404."""
    parsed = urlsplit(served)
    stalled = _post(f"Content-Length: {N}\r\nx-request-timeout-seconds: 0.5\r\n")
    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as sock:
        sock.sendall(stalled)
        conn = h11.Connection(h11.CLIENT)
        conn.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
        conn.send(h11.EndOfMessage())  # h11's side only: it reads the answer to it
        answer = next(e for e in events(sock, conn) if isinstance(e, h11.Response))
    headers = {k.decode(): v.decode("latin-1") for k, v in answer.headers}
    assert answer.status_code == 408, headers
    assert headers["content-type"].startswith("text/plain"), headers  # Ray's, not the app's
    assert headers.get("x-content-type-options") == "nosniff", headers
    assert headers.get("x-frame-options") == "DENY", headers
    assert headers.get("referrer-policy") == "no-referrer", headers
    assert "default-src 'none'" in headers.get("content-security-policy", ""), headers


def test_rays_request_hints_not_in_utf8_get_no_500(served: str) -> None:
    """The replica's own HTTP server decodes ``x-request-timeout-seconds`` and
    ``x-request-disconnect-disabled`` as UTF-8 before any route runs (Ray's proxy too): a
    ``\\xff`` in either was its plain 500. The proxy callback drops them; the request is
    served."""
    for name in ("x-request-timeout-seconds", "x-request-disconnect-disabled"):
        head = _post(f"Content-Length: {N}\r\n{name}: ").removesuffix(b"\r\n")
        status, body = exchange(served, head + b"\xff\r\n\r\n" + ITEM_BODY, timeout_s=60)
        assert status == 200, (name, status, body[:300])
