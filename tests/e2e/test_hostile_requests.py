"""Hostile requests through the real stack (Ray's proxy, the replicas, the vLLM engine on the
CPU): a few thousand cases from ``tests/hostile.py`` (every native and compatibility route;
JSON, form and multipart bodies; invalid UTF-8, lone surrogates, deep nesting, huge numbers,
wrong types in every field, duplicated keys and fields, wrong content types), sent
concurrently. None may get a 5xx but a 503 (with Retry-After) or 504, every error is in its
API's own shape, no replica logs an unexpected failure, and every replica still serves."""

from __future__ import annotations

import asyncio
import collections
import time

import httpx
from hypothesis import HealthCheck, Phase, given, settings

from tests import hostile
from tests.e2e.conftest import Cluster
from tests.e2e.replicas import ITEM, save_report

CASES = 2500
CONCURRENCY = 16


def generate(n: int) -> list[hostile.Case]:
    """``n`` cases, the same on every run (derandomized)."""
    out: list[hostile.Case] = []

    @settings(
        max_examples=n,
        database=None,
        derandomize=True,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=hostile.cases(hostile.ROUTES))
    def collect(case: hostile.Case) -> None:
        out.append(case)

    collect()
    return out


async def send_all(url: str, cases: list[hostile.Case]) -> list[tuple[hostile.Case, int]]:
    limits = httpx.Limits(max_connections=CONCURRENCY)
    gate = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def one(case: hostile.Case) -> tuple[hostile.Case, int]:
            async with gate:
                r = await client.request(
                    case.route.method, case.url, content=case.body, headers=case.headers
                )
            hostile.check_answer(case, r.status_code, r.headers, r.content)
            return case, r.status_code

        return await asyncio.gather(*(one(c) for c in cases))


def unexpected_failures(cluster: Cluster) -> int:
    """Lines in the replicas' logs that report an unexpected failure (a traceback)."""
    return sum(
        path.read_text(errors="replace").count("failed unexpectedly")
        for path in cluster.logs.glob("**/replica_*.log")
    )


def test_hostile_requests_get_no_5xx_and_leave_the_replicas_serving(cluster: Cluster) -> None:
    cases = generate(CASES)
    before = unexpected_failures(cluster)
    start = time.monotonic()
    answered = asyncio.run(send_all(cluster.url, cases))
    seconds = time.monotonic() - start
    statuses = collections.Counter(status for _, status in answered)
    report = {
        "cases": len(answered),
        "seconds": round(seconds, 1),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "routes": dict(collections.Counter(c.route.path for c, _ in answered)),
    }
    save_report("hostile_requests", report)
    assert len(answered) == CASES
    assert not [s for s in statuses if s >= 500 and s not in (503, 504)], report
    assert unexpected_failures(cluster) == before
    for _ in range(8):  # the proxy spreads these over both replicas
        assert httpx.get(f"{cluster.url}/readyz", timeout=30).status_code == 200
    r = httpx.post(f"{cluster.url}/translate", json={**ITEM, "cache": False}, timeout=120)
    assert r.status_code == 200, r.text


def test_a_replaced_request_id_comes_back_through_the_proxy(served: str) -> None:
    r = httpx.get(f"{served}/languages", headers={"X-Request-ID": "not a valid id!"})
    assert r.status_code == 200
    first = r.headers.get_list("x-request-id")[0]
    assert first != "not a valid id!"
    assert len(first) == 32
    assert first.isalnum()


def test_the_issues_hard_inputs_through_the_proxy(served: str) -> None:
    """The rows of issue 14's table, once through the real stack."""
    json_h = {"content-type": "application/json"}
    deepl = {**json_h, **hostile.DEEPL_AUTH}
    nested = b"[" * 100_000
    rows = [
        ("/translate", b'{"text": "\\ud800 hi", "target_lang": "de"}', json_h, 422),
        ("/v2/translate", b'{"text": ["\\ud800 hi"], "target_lang": "DE"}', deepl, 400),
        ("/libretranslate/translate", b'{"q": "\\ud800", "target": "de"}', json_h, 400),
        ("/v2/translate", nested, deepl, 400),
        ("/libretranslate/translate", nested, json_h, 400),
        ("/v2/translate", b'{"text": ["hi"], "target_lang": "DE", "x": ' + b"9" * 5000 + b"}",
         deepl, 400),
        ("/v2/translate", b'{"text": ["hi"], "target_lang": "DE", "formality": {"a": 1}}', deepl,
         400),
        ("/libretranslate/translate", b'{"q": "hi", "target": "de", "alternatives": "x"}', json_h,
         400),
    ]  # fmt: skip
    for path, body, headers, status in rows:
        r = httpx.post(f"{served}{path}", content=body, headers=headers, timeout=60)
        assert r.status_code == status, (path, body[:60], r.text[:300])
    items = b'[{"text": "\\ud800", "target_lang": "de"}, {"text": "Hi", "target_lang": "de"}]'
    batch = b'{"items": ' + items + b"}"
    r = httpx.post(f"{served}/translate/batch", content=batch, headers=json_h, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["results"][0]["error"]["code"] == "invalid_request"
    assert "translation" in r.json()["results"][1]
