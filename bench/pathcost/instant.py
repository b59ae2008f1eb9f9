"""The serving path's own cost: this project's app over an engine that answers at once.

The engine uses the real Hugging Face tokenizer of the model for encode/count; generate returns
at once, as many "tokens" as half the prompt (about the input length), without detokenizing.
So what a load test measures through Ray's proxy is the path (proxy, replica, service,
tokenizer, metrics), not the model. ``python -m bench.pathcost.instant OUT`` writes a serve
config for it (the tiny model's tokenizer); ``run_case.sh`` runs one measured case.

With ``PATHCOST_STEP_MS`` set (e.g. 10: a GPU's decode step at 25 running requests) the
engine paces its output like vLLM's step loop instead: one clock wakes every step and hands
each running request its next token, so a stream's first token comes one step after it was
asked for and the path's own delay in front of it (and behind it) shows in the client's TTFT.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml
from ray.serve import Application

from serve_app.core.config import AppConfig, EngineConfig
from serve_app.engine.protocol import EngineLoad, Generation, GenerationChunk, GenerationRequest
from serve_app.engine.tokenizer import PromptTokenizer
from serve_app.serving.app import make_app
from serve_app.translation.families import Prompt
from serve_app.translation.service import language_registry


class StepClock:
    """vLLM's step loop in miniature: every ``step_s`` each running request gets a token."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.running: set[asyncio.Queue[int]] = set()
        self._task: asyncio.Task[None] | None = None

    async def tokens(self, n: int) -> AsyncIterator[int]:
        """Yields 1 each step, ``n`` times (more at once if the consumer fell behind)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        queue: asyncio.Queue[int] = asyncio.Queue()
        self.running.add(queue)
        try:
            left = n
            while left > 0:
                got = await queue.get()
                while not queue.empty():
                    got += queue.get_nowait()
                got = min(got, left)
                left -= got
                yield got
        finally:
            self.running.discard(queue)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.step_s)
            for queue in self.running:
                queue.put_nowait(1)


class InstantEngine:
    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.active = 0
        self._tokens: PromptTokenizer | None = None
        step_ms = float(os.environ.get("PATHCOST_STEP_MS") or 0)
        self.clock = StepClock(step_ms / 1000) if step_ms > 0 else None

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

    def vocab_size(self) -> int:
        return self._tok().vocab_size()

    def _reply(self, request: GenerationRequest) -> tuple[str, int]:
        ids = request.prompt_token_ids
        n = max(1, min(request.max_tokens, len(ids) // 2))
        # no detokenization cost on our side (vLLM would do it in its output processor)
        return "x" * (2 * n), n

    async def generate(self, request: GenerationRequest, request_id: str) -> Generation:
        text, n = self._reply(request)
        if self.clock is not None:
            async for _ in self.clock.tokens(n):
                pass
        return Generation(text, len(request.prompt_token_ids), n, "stop", 0.0, 0.0)

    async def generate_stream(
        self, request: GenerationRequest, request_id: str
    ) -> AsyncIterator[GenerationChunk]:
        text, n = self._reply(request)
        n_in = len(request.prompt_token_ids)
        if self.clock is None:
            yield GenerationChunk(text, n, True, n_in, "stop")
            return
        done = 0
        async for got in self.clock.tokens(n):
            done += got
            end = done >= n
            yield GenerationChunk("xx" * got, done, end, n_in, "stop" if end else None)

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


def write_config(out: Path) -> Path:
    """A serve config of this app (one replica, the tiny model's tokenizer) at ``out``. The
    ``RAY_SERVE_*`` variables of this process's environment (``run_case.sh NAME VAR=VALUE``) go
    into its runtime env too, so that the replicas see what Ray's controller sees (e.g.
    ``RAY_SERVE_ENABLE_HA_PROXY=0``: Ray's proxy instead of the configs' HAProxy ingress)."""
    from serve_app.tools.launcher import derive_config, stdout_to_stderr
    from serve_app.tools.tiny_model import build_tiny_model

    with stdout_to_stderr():  # a shell captures the path this prints
        model = build_tiny_model(out.parent / "tiny-model")
    ray_serve_env = {k: v for k, v in os.environ.items() if k.startswith("RAY_SERVE_")}
    config = derive_config(
        "serve_config.cpu.yaml",
        args={"engine": {"model": str(model)}, "limits": {"max_engine_requests": 64}},
        deployment={"num_replicas": 1, "max_ongoing_requests": 32, "max_queued_requests": 64},
        runtime_env={"env_vars": ray_serve_env},
    )
    config["applications"][0]["import_path"] = "bench.pathcost.instant:build"
    out.write_text(yaml.safe_dump(config, sort_keys=False))
    return out


if __name__ == "__main__":
    print(write_config(Path(sys.argv[1]).resolve()))
