"""Planning never blocks a replica, through the real stack: while the longest text allowed
and the largest batch of them are planned (detection, tokenization, splitting, prompts),
``/healthz`` keeps answering within 100 ms at the 99th percentile, and a request that cannot
be planned within its deadline answers 504 by then.

Before: planning ran on the replica's event loop, and splitting an unbroken run re-tokenized
the rest of the text once per chunk: one such text held every request of its replica for
about 17 s (the health probe included). Then, planning in threads, the tokenizer's
``encode`` held the GIL for each whole call: the loop stalled up to a second at a time
(docs/reliability.md, "Planning and the GIL").

The probes are sent at a fixed rate, each on its own, not one after the other: a probe
that waits for the previous one to answer sends nothing while the replica stalls, so a
1-second stall would cost one slow probe out of hundreds and hide under the p99."""

from __future__ import annotations

import asyncio
import time

import httpx

LONGEST = "的" * 100_000  # limits.max_text_chars; no space, no punctuation: one unbroken run
BODY_LIMIT = 1 << 20  # security.max_body_bytes
# As many of them as one batch body can carry (3 bytes a character in UTF-8).
BATCH = (BODY_LIMIT - 4096) // (len(LONGEST.encode()) + 64)
ITEM = {"source_lang": "zh", "target_lang": "en"}
ROUNDS = 3
# The machine counts as quiet when /healthz's p99 with nothing else sent is below QUIET_S
# (measured quiet: 14-21 ms) and with the same bytes refused before planning (the control)
# below the bar itself, QUIET_CONTROL_S: past it, the bar cannot be met with no planning at
# all (measured quiet: 36-88 ms).
QUIET_S = 0.03
QUIET_CONTROL_S = 0.1
# The p99 bar on a quiet machine. Planning on the loop (the bug this guards) measured p99
# 1.3-1.6 s quiet; planning in its thread 36-72 ms, but once 108 ms late in a full CI run
# (the control 47 ms) and 37 ms alone minutes later: 200 ms keeps the bug six times over.
QUIET_BOUND_S = 0.2


# One probe every PROBE_EVERY_S seconds, whether the last one has answered or not.
PROBE_EVERY_S = 0.02


async def _probe(client: httpx.AsyncClient, url: str, stop: asyncio.Event) -> list[float]:
    async def one() -> float:
        start = time.perf_counter()
        r = await client.get(f"{url}/healthz")
        assert r.status_code == 200
        return time.perf_counter() - start

    sent = []
    while not stop.is_set():
        sent.append(asyncio.create_task(one()))
        await asyncio.sleep(PROBE_EVERY_S)
    return list(await asyncio.gather(*sent))


def _quiet(idle: list[float], control: list[float]) -> bool:
    return _p99(idle) < QUIET_S and _p99(control) < QUIET_CONTROL_S


def _p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[round(0.99 * (len(ordered) - 1))]


async def _probed(url: str, target: str) -> tuple[list[httpx.Response], list[float], float]:
    """On each replica: the longest text and the largest batch of it (to ``target``), with
    /healthz probed meanwhile. An unknown target language sends the same bytes through the
    proxy and the parser, refused before any tokenizing: the control."""
    single = {**ITEM, "text": LONGEST, "target_lang": target}
    batch = {"items": [{**ITEM, "text": LONGEST, "target_lang": target}] * BATCH}
    probing = httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=None))
    async with httpx.AsyncClient(timeout=120) as client, probing as probes:
        stop = asyncio.Event()
        prober = asyncio.create_task(_probe(probes, url, stop))
        await asyncio.sleep(0.2)
        start = time.monotonic()
        sent = [client.post(f"{url}/translate", json=single) for _ in range(2)]
        sent += [client.post(f"{url}/translate/batch", json=batch) for _ in range(2)]
        responses = await asyncio.gather(*sent)
        busy_s = time.monotonic() - start
        await asyncio.sleep(0.2)
        stop.set()
        latencies = await prober
    return responses, latencies, busy_s


async def _idle(url: str, seconds: float = 2.0) -> list[float]:
    probing = httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=None))
    async with probing as probes:
        stop = asyncio.Event()
        prober = asyncio.create_task(_probe(probes, url, stop))
        await asyncio.sleep(seconds)
        stop.set()
        return await prober


def test_healthz_stays_fast_while_the_longest_texts_are_planned(served: str) -> None:
    assert BATCH >= 3
    idle = asyncio.run(_idle(served))
    control = [x for _ in range(2) for x in asyncio.run(_probed(served, "xx"))[1]]
    # Three rounds: a p99 over a few hundred probes, not the maximum of twenty.
    rounds = [asyncio.run(_probed(served, "en")) for _ in range(ROUNDS)]
    latencies = [latency for _, probed, _ in rounds for latency in probed]
    busy_s = max(busy for _, _, busy in rounds)
    print(
        f"healthz p99/max (ms): idle {_p99(idle) * 1e3:.0f}/{max(idle) * 1e3:.0f}, "
        f"same bytes refused before planning {_p99(control) * 1e3:.0f}/"
        f"{max(control) * 1e3:.0f}, planning {_p99(latencies) * 1e3:.0f}/"
        f"{max(latencies) * 1e3:.0f} ({len(latencies)} probes over {busy_s:.1f} s)"
        f"{'' if _quiet(idle, control) else ', a busy machine'}"
    )
    # Too many pieces for a replica (each text needs hundreds): refused once planned, never
    # a 5xx, and fast (the quadratic split alone took 17 s per text). A batch answers each
    # item's error in its place.
    for responses, _, _ in rounds:
        assert [r.status_code for r in responses] == [413, 413, 200, 200], [
            r.text[:200] for r in responses
        ]
        for batch in responses[2:]:
            codes = [item["error"]["code"] for item in batch.json()["results"]]
            assert codes == ["text_too_long"] * BATCH
    assert busy_s < 30, busy_s
    assert len(latencies) >= 100, latencies  # so that the p99 is not the maximum
    # Measured on this 2-core machine (docs/reliability.md, "Planning and the GIL"): p99
    # 36-72 ms on a quiet machine (the probes alone: 14-21 ms). Beside a busy core (CI runs
    # tiers in parallel) the probes alone take 28-92 ms and no code can take that back:
    # planning then measured 258-293 ms, 1.5-2.3 times the control (the same bytes refused
    # before planning). With the tokenizer holding the GIL: 1.3-1.6 s quiet, 3.8 s (20 times
    # the control) beside a busy core. So: a bar on a quiet machine, four times the slower
    # of the two references (idle, control) on a busy one (once the control alone took 166
    # ms, planning 162 ms), never below the quiet bar: a busy machine's control can catch a
    # quiet moment (a CI run: idle 72 ms, control 17 ms, planning 86 ms against a bar of
    # 4 x 17 ms, stricter than the quiet machine's). The bug reads 3.5-10 times the busy bar.
    quiet = _quiet(idle, control)
    busy_bound = 4 * max(_p99(control), _p99(idle))
    bound = QUIET_BOUND_S if quiet else max(QUIET_BOUND_S, busy_bound)
    assert _p99(latencies) < bound, (quiet, bound, sorted(latencies)[-5:])


def test_planning_past_the_deadline_answers_504_by_then(served: str) -> None:
    body = {**ITEM, "text": LONGEST, "timeout_s": 0.05}
    batch = {"items": [{**ITEM, "text": LONGEST}] * BATCH, "timeout_s": 0.05}
    with httpx.Client(timeout=60) as client:
        for path, payload in (("/translate", body), ("/translate/batch", batch)):
            start = time.monotonic()
            r = client.post(f"{served}{path}", json=payload)
            took = time.monotonic() - start
            assert r.status_code == 504, r.text[:300]
            assert r.json()["error"]["code"] == "deadline_exceeded"
            # The deadline, plus sending 300 KB-1 MB through the proxy on a busy machine.
            assert took < 2.0, (path, took)
        # The replica is free again: a short text is translated.
        short = {**ITEM, "text": "你好", "timeout_s": 60}
        assert client.post(f"{served}/translate", json=short).status_code == 200


def test_requests_sharing_a_client_request_id_do_not_collide(served: str) -> None:
    """Engine request ids are the client's id plus the replica's own number: concurrent
    requests sent with one X-Request-ID are separate engine requests, all answered."""

    async def scenario() -> list[httpx.Response]:
        body = {"text": "Hello world, how are you?", "source_lang": "en", "target_lang": "de"}
        headers = {"X-Request-ID": "same-client-id"}
        async with httpx.AsyncClient(timeout=120) as client:
            return await asyncio.gather(
                *(
                    client.post(
                        f"{served}/translate", json={**body, "cache": False}, headers=headers
                    )
                    for _ in range(6)
                )
            )

    responses = asyncio.run(scenario())
    assert [r.status_code for r in responses] == [200] * 6, [r.text[:200] for r in responses]
