"""This project's app with an instant fake engine (the serving path's own cost): the real HF
tokenizer of the tiny model for encode/count; generate returns at once, as many "tokens" as
half the prompt (about the input length), without detokenizing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ray.serve import Application

from serve_app.app import make_app
from serve_app.autoscaling import EngineLoad
from serve_app.config import AppConfig, EngineConfig
from serve_app.engine import (
    Generation,
    GenerationChunk,
    GenerationRequest,
    Prompt,
    PromptTokenizer,
)
from serve_app.service import language_registry


class InstantEngine:
    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.active = 0
        self._tokens: PromptTokenizer | None = None

    async def start(self) -> None:
        from transformers import AutoTokenizer

        self._tokens = PromptTokenizer(AutoTokenizer.from_pretrained(self.config.model))

    def _tok(self) -> PromptTokenizer:
        assert self._tokens is not None
        return self._tokens

    def encode(self, prompt: Prompt) -> list[int]:
        return self._tok().encode(prompt)

    def count_tokens(self, text: str) -> int:
        return self._tok().count_tokens(text)

    def as_data(self, text: str) -> str:
        return self._tok().as_data(text)

    def _reply(self, request: GenerationRequest) -> tuple[str, int]:
        ids = request.prompt_token_ids
        n = max(1, min(request.max_tokens, len(ids) // 2))
        # no detokenization cost on our side (vLLM would do it in its output processor)
        return "x" * (2 * n), n

    async def generate(self, request: GenerationRequest, request_id: str) -> Generation:
        text, n = self._reply(request)
        return Generation(text, len(request.prompt_token_ids), n, "stop", 0.0, 0.0)

    async def generate_stream(
        self, request: GenerationRequest, request_id: str
    ) -> AsyncIterator[GenerationChunk]:
        text, n = self._reply(request)
        yield GenerationChunk(text, n, True, len(request.prompt_token_ids), "stop")

    async def check_health(self) -> None:
        return None

    def num_unfinished_requests(self) -> int:
        return 0

    def load(self) -> EngineLoad:
        return EngineLoad(running=0, waiting=0)

    def shutdown(self) -> None:
        pass


def build(args: dict[str, Any]) -> Application:
    config = AppConfig.model_validate(args or {})
    language_registry(config)
    return make_app(config, engine_cls=InstantEngine)
