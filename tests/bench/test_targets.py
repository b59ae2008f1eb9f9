"""The load generator's streaming targets read server-sent events (no server: a mock transport)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from bench.loadgen import summarize
from bench.targets import NativeTarget, Sample
from bench.workloads import Item

pytestmark = pytest.mark.no_ray  # ./test.sh runs it beside the e2e tier


def _events(*events: tuple[str, dict]) -> bytes:
    return b"".join(f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in events)


def _send(body: bytes, status: int = 200) -> Sample:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/translate/stream"
        return httpx.Response(status, content=body, headers={"content-type": "text/event-stream"})

    async def go() -> Sample:
        target = NativeTarget("native", "http://test", stream=True)
        target.client._http = httpx.AsyncClient(
            transport=httpx.MockTransport(handler), base_url="http://test"
        )
        try:
            item = Item("Hello", "en", "de", 2, 3)
            return await target.send(item)
        finally:
            await target.aclose()

    return asyncio.run(go())


def test_a_native_stream_gives_ttft_and_usage() -> None:
    sample = _send(
        _events(
            ("start", {"id": "r1"}),
            ("delta", {"text": "", "segment": 0}),
            ("delta", {"text": "Hallo", "segment": 0}),
            ("done", {"translation": "Hallo", "usage": {"input_tokens": 9, "output_tokens": 3}}),
        )
    )
    assert sample.ok
    assert sample.ttft_s is not None
    assert 0 < sample.ttft_s <= sample.latency_s
    assert (sample.input_tokens, sample.output_tokens) == (9, 3)


def test_an_error_event_fails_the_request() -> None:
    body = _events(("start", {}), ("error", {"error": {"code": "x", "message": "y"}}))
    sample = _send(body)
    assert sample.status == 500
    assert sample.ttft_s is None


def test_a_refused_stream_keeps_its_status() -> None:
    assert _send(b'{"error": {}}', status=503).status == 503


def test_the_openai_peer_is_asked_this_projects_sampling() -> None:
    from bench.targets import OpenAITarget
    from serve_app.core.config import PromptConfig

    target = OpenAITarget("vllm_serve", "http://test", "bench", PromptConfig(family="chat"))
    body = target.body(Item("Hello", "en", "de", 2, 3))
    # the chat family's decoding (Qwen3's card), not greedy
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.7, 0.8, 20)
    assert (body["max_tokens"], body["min_tokens"], body["ignore_eos"]) == (3, 3, True)
    greedy = PromptConfig(family="chat", sampling={"temperature": 0.0})
    assert (
        OpenAITarget("v", "http://t", "b", greedy).body(Item("Hi", "en", "de", 1, 1))["temperature"]
        == 0.0
    )
    asyncio.run(target.aclose())


def test_answers_are_counted_per_replica() -> None:
    """Whole answers keep the X-Replica that answered; the summary splits answers and mean
    latency by it (how evenly the ingress spread the load in bench.scaling)."""
    names = iter(["replica-a", "replica-b", "replica-a"])

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/translate"
        body = {"translation": "Hallo", "usage": {"input_tokens": 4, "output_tokens": 2}}
        return httpx.Response(200, json=body, headers={"X-Replica": next(names)})

    async def go() -> list[Sample]:
        target = NativeTarget("native", "http://test")
        target.client._http = httpx.AsyncClient(
            transport=httpx.MockTransport(handler), base_url="http://test"
        )
        try:
            return [await target.send(Item("Hello", "en", "de", 2, 3)) for _ in range(3)]
        finally:
            await target.aclose()

    samples = asyncio.run(go())
    assert [s.replica for s in samples] == ["replica-a", "replica-b", "replica-a"]
    split = summarize(samples, wall_s=1.0)["by_replica"]
    assert {k: v["ok"] for k, v in split.items()} == {"replica-a": 2, "replica-b": 1}
    assert split["replica-a"]["mean_s"] == round(
        (samples[0].latency_s + samples[2].latency_s) / 2, 4
    )
