"""What the load generator sends requests to: one adapter per kind of API.

- ``NativeTarget``: this project's ``POST /translate`` (and the journey's baselines, which
  speak the same API), through the project's own retrying client.
- ``OpenAITarget``: an OpenAI-compatible server (``vllm serve``, Ray Serve LLM), asked with the
  very chat messages our prompt family builds and the same forced output length.
- ``EngineTarget``: vLLM's ``AsyncLLM`` in this process, prompts tokenized beforehand: no HTTP,
  no validation, final output only. The ceiling for one GPU.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from bench.workloads import Item
from serve_app.client import NO_RETRY, RetryPolicy, TranslationClient
from serve_app.core.config import AppConfig, PromptConfig
from serve_app.translation.families import ChatPrompt, make_prompt_family
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
    ttft_s: float | None = None  # streamed requests only

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
        return Sample(start, outcome.latency_s, outcome.status, *tokens, outcome.attempts)


class NativeTarget(_HttpTarget):
    """This project's API (and the baselines of the journey, which copy it)."""

    def __init__(
        self, name: str, url: str, retry: RetryPolicy = NO_RETRY, timeout_s: float = 600
    ) -> None:
        super().__init__(name, url, retry, timeout_s)

    async def send(self, item: Item) -> Sample:
        body = {"text": item.text, "source_lang": item.source_lang, "target_lang": item.target_lang}
        if item.format != "text":
            body["format"] = item.format
        return await self._post("/translate", body, ("input_tokens", "output_tokens"))


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
            "temperature": 0.0,
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
        start = time.perf_counter()
        ttft: float | None = None
        usage: dict[str, int] = {}
        try:
            async with self.client.http.stream("POST", "/v1/chat/completions", json=body) as r:
                if r.status_code != 200:
                    await r.aread()
                    return Sample(start, time.perf_counter() - start, r.status_code)
                async for line in r.aiter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk = json.loads(line[6:])
                    if ttft is None and any(
                        c.get("delta", {}).get("content") for c in chunk["choices"]
                    ):
                        ttft = time.perf_counter() - start
                    usage = chunk.get("usage") or usage
        except httpx.HTTPError:
            return Sample(start, time.perf_counter() - start, None)
        n_in, n_out = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
        return Sample(start, time.perf_counter() - start, 200, n_in, n_out, ttft_s=ttft)


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
