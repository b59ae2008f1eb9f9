"""The inference engine a replica owns: the interface and its vLLM ``AsyncLLM`` implementation.

The translation service talks to ``TranslationEngine`` only, so tests inject a fake. The vLLM
implementation calls ``AsyncLLM.generate`` directly from the replica's event loop (continuous
batching, no worker processes or queues of our own), asks for the final output only, and
relies on vLLM aborting a request whose caller is cancelled (client gone or deadline passed).
vLLM is imported lazily: importing this module costs nothing.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from serve_app.autoscaling import EngineLoad, SchedulerStatsRecorder
from serve_app.config import EngineConfig
from serve_app.errors import EngineStartupError, EngineUnavailable
from serve_app.prompts import ChatPrompt, Prompt, escape_special_tokens, special_token_escaper

if TYPE_CHECKING:
    from vllm import SamplingParams

logger = logging.getLogger("ray.serve.translator")


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt, already tokenized, and how to decode it."""

    prompt_token_ids: list[int]
    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    repetition_penalty: float = 1.0
    min_tokens: int = 0
    ignore_eos: bool = False
    stream: bool = False

    def to_sampling_params(self) -> SamplingParams:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        return SamplingParams(
            max_tokens=self.max_tokens,
            min_tokens=self.min_tokens,
            ignore_eos=self.ignore_eos,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k if self.top_k > 0 else -1,
            repetition_penalty=self.repetition_penalty,
            # Non-streaming: one output at the end instead of one per token; streaming:
            # only the new text of each step.
            output_kind=RequestOutputKind.DELTA if self.stream else RequestOutputKind.FINAL_ONLY,
        )


@dataclass(frozen=True)
class Generation:
    text: str
    input_tokens: int
    output_tokens: int
    finish_reason: str | None
    queue_s: float | None = None
    ttft_s: float | None = None


@dataclass(frozen=True)
class GenerationChunk:
    """New text of one step of a streamed generation; the last has ``finished`` set."""

    text: str
    output_tokens: int
    finished: bool = False
    input_tokens: int = 0
    finish_reason: str | None = None


class TranslationEngine(Protocol):
    """What the translation service needs from an engine."""

    async def start(self) -> None: ...

    def encode(self, prompt: Prompt) -> list[int]: ...

    def count_tokens(self, text: str) -> int: ...

    def as_data(self, text: str) -> str: ...

    async def generate(self, request: GenerationRequest, request_id: str) -> Generation: ...

    def generate_stream(
        self, request: GenerationRequest, request_id: str
    ) -> AsyncIterator[GenerationChunk]: ...

    async def check_health(self) -> None: ...

    def num_unfinished_requests(self) -> int: ...

    def load(self) -> EngineLoad: ...

    def shutdown(self) -> None: ...


def _engine_dead_error() -> type[BaseException]:
    from vllm.v1.engine.exceptions import EngineDeadError

    return EngineDeadError


class PromptTokenizer:
    """A Hugging Face tokenizer as the service uses it: prompts to token ids, lengths of
    texts, and texts made safe to place in a prompt."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._special = special_token_escaper(special_tokens(tokenizer))

    def encode(self, prompt: Prompt) -> list[int]:
        tok = self.tokenizer
        if isinstance(prompt, ChatPrompt):
            text = tok.apply_chat_template(
                prompt.messages,
                tokenize=False,
                add_generation_prompt=True,
                **prompt.template_kwargs,
            )
            # The template already holds any BOS the model expects.
            return list(tok.encode(text, add_special_tokens=False))
        return list(tok.encode(prompt.text, add_special_tokens=prompt.add_special_tokens))

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def as_data(self, text: str) -> str:
        """The text with the tokenizer's special tokens escaped (see ``prompts``)."""
        return escape_special_tokens(text, self._special)


class VLLMEngine:
    """``TranslationEngine`` over vLLM's ``AsyncLLM`` (vLLM 0.26 and 0.32+)."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self._llm: Any = None
        self._tokens: PromptTokenizer | None = None
        self._scheduler_stats = SchedulerStatsRecorder()

    async def start(self) -> None:
        token = self.config.hf_token()
        if token:
            # huggingface_hub and vLLM read HF_TOKEN; the value is never logged.
            os.environ["HF_TOKEN"] = token
        logger.info("starting vLLM engine for model %s", self.config.model)
        try:
            self._llm = await asyncio.to_thread(self._create)
        except Exception as exc:
            raise EngineStartupError(startup_failure_message(self.config.model, exc)) from exc
        tokenizer = self._llm.get_tokenizer()
        self._tokens = PromptTokenizer(
            await tokenizer if inspect.isawaitable(tokenizer) else tokenizer
        )

    def _create(self) -> Any:
        from vllm.v1.engine.async_llm import AsyncLLM

        # Built off the event loop; AsyncLLM starts its output handler at the first request.
        return AsyncLLM.from_engine_args(
            self.config.to_engine_args(), stat_loggers=self._stat_loggers()
        )

    def _stat_loggers(self) -> list[Any]:
        """Inside Ray, vLLM's own metrics go to Ray's exporter, tagged with the replica; the
        scheduler's running/waiting counts are kept for the autoscaler."""
        import ray

        loggers: list[Any] = [self._scheduler_stats]
        if self.config.export_engine_metrics and ray.is_initialized():
            from vllm.v1.metrics.ray_wrappers import RayPrometheusStatLogger

            loggers.append(RayPrometheusStatLogger)
        return loggers

    @property
    def tokens(self) -> PromptTokenizer:
        if self._tokens is None:
            raise EngineUnavailable("The engine has not started.", retry_after_s=1)
        return self._tokens

    def encode(self, prompt: Prompt) -> list[int]:
        return self.tokens.encode(prompt)

    def count_tokens(self, text: str) -> int:
        return self.tokens.count_tokens(text)

    def as_data(self, text: str) -> str:
        return self.tokens.as_data(text)

    async def generate(self, request: GenerationRequest, request_id: str) -> Generation:
        from vllm.inputs import TokensPrompt

        if self._llm is None or self._llm.errored:
            raise EngineUnavailable("The engine is not running.", retry_after_s=1)
        final = None
        prompt = TokensPrompt(prompt_token_ids=request.prompt_token_ids)
        try:
            async for output in self._llm.generate(
                prompt, request.to_sampling_params(), request_id
            ):
                final = output
        except _engine_dead_error() as exc:
            raise EngineUnavailable("The engine stopped.", retry_after_s=1) from exc
        if final is None:
            raise EngineUnavailable("The engine returned no output.", retry_after_s=1)
        completion = final.outputs[0]
        queue_s, ttft_s = _timings(getattr(final, "metrics", None))
        return Generation(
            text=completion.text,
            input_tokens=len(final.prompt_token_ids or request.prompt_token_ids),
            output_tokens=len(completion.token_ids),
            finish_reason=completion.finish_reason,
            queue_s=queue_s,
            ttft_s=ttft_s,
        )

    async def generate_stream(
        self, request: GenerationRequest, request_id: str
    ) -> AsyncIterator[GenerationChunk]:
        """The generation step by step (vLLM's DELTA outputs: only the new text each time)."""
        from vllm.inputs import TokensPrompt

        if self._llm is None or self._llm.errored:
            raise EngineUnavailable("The engine is not running.", retry_after_s=1)
        prompt = TokensPrompt(prompt_token_ids=request.prompt_token_ids)
        params = replace(request, stream=True).to_sampling_params()
        produced = 0
        try:
            async for output in self._llm.generate(prompt, params, request_id):
                completion = output.outputs[0]
                produced += len(completion.token_ids)
                yield GenerationChunk(
                    text=completion.text,
                    output_tokens=produced,
                    finished=output.finished,
                    input_tokens=len(output.prompt_token_ids or request.prompt_token_ids),
                    finish_reason=completion.finish_reason,
                )
        except _engine_dead_error() as exc:
            raise EngineUnavailable("The engine stopped.", retry_after_s=1) from exc

    async def check_health(self) -> None:
        if self._llm is None:
            raise EngineUnavailable("The engine has not started.")
        await self._llm.check_health()

    def num_unfinished_requests(self) -> int:
        if self._llm is None:
            return 0
        # AsyncLLM.get_num_unfinished_requests() is missing in vLLM 0.26; this is in both.
        return int(self._llm.output_processor.get_num_unfinished_requests())

    def load(self) -> EngineLoad:
        return self._scheduler_stats.load(self.num_unfinished_requests())

    def shutdown(self) -> None:
        if self._llm is not None:
            logger.info("shutting down vLLM engine")
            self._llm.shutdown()
            self._llm = None


def special_tokens(tokenizer: Any) -> list[str]:
    """Every special token string of a Hugging Face tokenizer, added ones included."""
    tokens = list(getattr(tokenizer, "all_special_tokens", []))
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    tokens += [t.content for t in added.values() if getattr(t, "special", False)]
    return tokens


def _timings(stats: Any) -> tuple[float | None, float | None]:
    """Engine queue wait and time to first token from vLLM's per-request stats, if kept."""
    if stats is None:
        return None, None
    queued, scheduled = getattr(stats, "queued_ts", 0.0), getattr(stats, "scheduled_ts", 0.0)
    queue_s = scheduled - queued if queued and scheduled >= queued else None
    return queue_s, getattr(stats, "first_token_latency", 0.0) or None


def startup_failure_message(model: str, exc: BaseException) -> str:
    """A start-up error that names the model and says how to use a local copy."""
    return (
        f"Could not start the engine for model '{model}': {type(exc).__name__}: {exc}. "
        "If this machine cannot reach the Hugging Face hub, download the model elsewhere "
        "(huggingface-cli download MODEL --local-dir DIR), copy DIR here and set "
        "args.engine.model to that local folder in the serve config. Gated models also "
        "need a token in the variable named by args.engine.hf_token_env."
    )
