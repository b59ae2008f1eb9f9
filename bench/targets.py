"""What the load generator sends requests to: one adapter per kind of API.

- ``NativeTarget``: this project's ``POST /translate`` (and the journey's baselines, which
  speak the same API), through the project's own retrying client; with ``stream``, its
  ``POST /translate/stream`` (server-sent events), timing the first ``delta`` with text.
- ``OpenAITarget``: an OpenAI-compatible server (``vllm serve``, Ray Serve LLM), asked with the
  very chat messages our prompt family builds and the same forced output length.
- ``EngineTarget``: vLLM's ``AsyncLLM`` in this process, prompts tokenized beforehand: no HTTP,
  no validation, final output only. The ceiling for one GPU.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from bench.workloads import Item
from serve_app.client import NO_RETRY, RetryPolicy, TranslationClient
from serve_app.core.config import AppConfig, PromptConfig
from serve_app.translation.families import ChatPrompt, make_prompt_family
from serve_app.translation.families.base import effective_sampling
from serve_app.translation.languages import LanguageRegistry


@dataclass
class Sample:
    """One request's outcome as the load generator saw it."""

    start_s: float  # since the run began
    latency_s: float
    status: int | None  # None: no HTTP answer
    input_tokens: int = 0
    output_tokens: int = 0
    attempts: int = 1
    ttft_s: float | None = None  # streamed requests only: the first text, even a space
    # The first text that shows (not only whitespace): what a reader waits for. Random
    # weights often open with newlines or spaces, which `vllm serve` streams as they come
    # and this project's output hygiene strips, so the two times can differ by many tokens.
    ttft_visible_s: float | None = None
    # Streamed requests: time to the first event of any kind (this project's ``start``,
    # sent before the engine is asked; `vllm serve`'s role chunk, sent with the first token).
    first_event_s: float | None = None
    replica: str | None = None  # this project's X-Replica: which replica answered

    @property
    def ok(self) -> bool:
        return self.status == 200


class Target(Protocol):
    name: str

    async def send(self, item: Item) -> Sample: ...

    async def aclose(self) -> None: ...


class _HttpTarget:
    def __init__(self, name: str, url: str, retry: RetryPolicy, timeout_s: float) -> None:
        self.name = name
        self.client = TranslationClient(url, retry=retry, timeout_s=timeout_s)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def _post(self, path: str, body: dict[str, Any], usage: tuple[str, str]) -> Sample:
        start = time.perf_counter()
        outcome = await self.client.post(path, body)
        tokens = (0, 0)
        if outcome.ok and isinstance(outcome.body, dict):
            u = outcome.body.get("usage") or {}
            tokens = (int(u.get(usage[0], 0)), int(u.get(usage[1], 0)))
        return Sample(
            start,
            outcome.latency_s,
            outcome.status,
            *tokens,
            outcome.attempts,
            replica=outcome.headers.get("x-replica"),
        )

    async def _stream_sse(self, path: str, body: dict[str, Any], events: _EventReader) -> Sample:
        """One streamed request: ``events`` reads each ``(event name, data)`` and keeps the
        time to first token and the usage; no retries (a stream is not replayed)."""
        start = time.perf_counter()
        name = "message"
        try:
            async with self.client.http.stream("POST", path, json=body) as r:
                if r.status_code != 200:
                    await r.aread()
                    return Sample(start, time.perf_counter() - start, r.status_code)
                async for line in r.aiter_lines():
                    if line.startswith("event: "):
                        name = line[7:]
                    elif line.startswith("data: ") and line != "data: [DONE]":
                        events.read(name, json.loads(line[6:]), time.perf_counter() - start)
                        name = "message"
        except httpx.HTTPError:
            return Sample(start, time.perf_counter() - start, None)
        status = 500 if events.failed else 200
        n_in, n_out = events.usage
        return Sample(
            start,
            time.perf_counter() - start,
            status,
            n_in,
            n_out,
            ttft_s=events.ttft,
            ttft_visible_s=events.visible,
            first_event_s=events.first,
        )


class _EventReader:
    """What a stream told: time to its first text (and first visible text), its usage,
    whether it ended in an error."""

    def __init__(
        self, text_of: Callable[[str, dict[str, Any]], str], usage_keys: tuple[str, str]
    ) -> None:
        self.text_of = text_of
        self.usage_keys = usage_keys
        self.ttft: float | None = None
        self.visible: float | None = None
        self.first: float | None = None
        self.usage = (0, 0)
        self.failed = False

    def read(self, name: str, data: dict[str, Any], elapsed_s: float) -> None:
        if name == "error":
            self.failed = True
        if self.first is None:
            self.first = elapsed_s
        if self.visible is None and (text := self.text_of(name, data)):
            self.ttft = elapsed_s if self.ttft is None else self.ttft
            if not text.isspace():
                self.visible = elapsed_s
        usage = data.get("usage")
        if usage:
            n_in, n_out = (int(usage.get(k, 0)) for k in self.usage_keys)
            self.usage = (n_in, n_out)


def _native_text(name: str, data: dict[str, Any]) -> str:
    return str(data.get("text") or "") if name == "delta" else ""


def _openai_text(name: str, data: dict[str, Any]) -> str:
    return "".join(c.get("delta", {}).get("content") or "" for c in data.get("choices") or [])


class NativeTarget(_HttpTarget):
    """This project's API (and the baselines of the journey, which copy it)."""

    def __init__(
        self,
        name: str,
        url: str,
        retry: RetryPolicy = NO_RETRY,
        timeout_s: float = 600,
        stream: bool = False,
    ) -> None:
        super().__init__(name, url, retry, timeout_s)
        self.stream = stream

    async def send(self, item: Item) -> Sample:
        body = {"text": item.text, "source_lang": item.source_lang, "target_lang": item.target_lang}
        if item.format != "text":
            body["format"] = item.format
        usage = ("input_tokens", "output_tokens")
        if self.stream:
            reader = _EventReader(_native_text, usage)
            return await self._stream_sse("/translate/stream", body, reader)
        return await self._post("/translate", body, usage)


class OpenAITarget(_HttpTarget):
    """An OpenAI-compatible chat completions server, asked exactly what our service asks."""

    def __init__(
        self,
        name: str,
        url: str,
        model: str,
        prompt: PromptConfig,
        retry: RetryPolicy = NO_RETRY,
        timeout_s: float = 600,
        stream: bool = False,
    ) -> None:
        super().__init__(name, url, retry, timeout_s)
        self.model = model
        self.stream = stream
        self.family = make_prompt_family(prompt)
        self.languages = LanguageRegistry(list(self.family.languages), None)
        # The same decoding as this project's requests (the family's sampling, the config's
        # values over it): top-k/top-p sampling costs GPU time that greedy decoding does not.
        sampling = effective_sampling(self.family, prompt.sampling)
        keys = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty")
        self.sampling = {k: v for k in keys if (v := getattr(sampling, k)) is not None}

    def body(self, item: Item) -> dict[str, Any]:
        source, target = self.languages.resolve_pair(item.source_lang, item.target_lang)
        prompt = self.family.build(source, target, item.text)
        if not isinstance(prompt, ChatPrompt):
            raise ValueError("OpenAI targets need a chat prompt family")
        n = item.output_tokens
        return {
            "model": self.model,
            "messages": prompt.messages,
            "chat_template_kwargs": prompt.template_kwargs,
            "max_tokens": n,
            "min_tokens": n,
            "ignore_eos": True,
            "temperature": 0.0,  # greedy unless the family's sampling says otherwise
            **self.sampling,
        }

    async def send(self, item: Item) -> Sample:
        if self.stream:
            return await self._stream(item)
        return await self._post(
            "/v1/chat/completions", self.body(item), ("prompt_tokens", "completion_tokens")
        )

    async def _stream(self, item: Item) -> Sample:
        """Server-sent events: time to the first content chunk, usage from the last one."""
        body = {**self.body(item), "stream": True, "stream_options": {"include_usage": True}}
        reader = _EventReader(_openai_text, ("prompt_tokens", "completion_tokens"))
        return await self._stream_sse("/v1/chat/completions", body, reader)


class EngineTarget:
    """vLLM's AsyncLLM in-process (through the project's thin ``VLLMEngine`` wrapper)."""

    def __init__(self, name: str, config: AppConfig) -> None:
        from serve_app.engine.vllm import VLLMEngine

        self.name = name
        self.config = config
        self.engine = VLLMEngine(config.engine)
        self.family = make_prompt_family(config.prompt)
        self.languages = LanguageRegistry(list(self.family.languages), None)
        self.prompt_ids: dict[str, list[int]] = {}
        self._count = 0

    async def start(self, items: list[Item]) -> None:
        await self.engine.start()
        self.prepare(items)

    def prepare(self, items: list[Item]) -> None:
        """Tokenizes the prompts before the clock starts: the ceiling excludes that work."""
        for item in items:
            source, target = self.languages.resolve_pair(item.source_lang, item.target_lang)
            self.prompt_ids[item.text] = self.engine.encode(
                self.family.build(source, target, item.text)
            )

    async def send(self, item: Item) -> Sample:
        from serve_app.engine.protocol import GenerationRequest

        n = item.output_tokens
        ids = self.prompt_ids[item.text]
        request = GenerationRequest(ids, max_tokens=n, min_tokens=n, ignore_eos=True)
        self._count += 1
        start = time.perf_counter()
        try:
            result = await self.engine.generate(request, f"raw-{self._count}")
        except Exception:
            return Sample(start, time.perf_counter() - start, 500)
        latency = time.perf_counter() - start
        n_in, n_out = result.input_tokens, result.output_tokens
        return Sample(start, latency, 200, n_in, n_out, ttft_s=result.ttft_s)

    async def aclose(self) -> None:
        self.engine.shutdown()
