"""The inference engine a replica owns: ``TranslationEngine`` over vLLM's ``AsyncLLM``.

It calls ``AsyncLLM.generate`` directly from the replica's event loop (continuous batching, no
worker processes or queues of our own), asks for the final output only, and relies on vLLM
aborting a request whose caller is cancelled (client gone or deadline passed).
vLLM is imported lazily: importing this module costs nothing.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from serve_app.core.config import EngineConfig
from serve_app.core.errors import EngineStartupError, EngineUnavailable
from serve_app.engine.protocol import EngineLoad, Generation, GenerationChunk, GenerationRequest
from serve_app.engine.tokenizer import PromptTokenizer

if TYPE_CHECKING:
    from vllm import SamplingParams

    from serve_app.translation.families.base import Prompt

logger = logging.getLogger("ray.serve.translator")


def sampling_params(request: GenerationRequest) -> SamplingParams:
    """The vLLM sampling parameters of ``request``."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(
        max_tokens=request.max_tokens,
        min_tokens=request.min_tokens,
        ignore_eos=request.ignore_eos,
        temperature=request.temperature,
        top_p=request.top_p,
        top_k=request.top_k if request.top_k > 0 else -1,
        repetition_penalty=request.repetition_penalty,
        frequency_penalty=request.frequency_penalty,
        min_p=request.min_p,
        presence_penalty=request.presence_penalty,
        stop=list(request.stop) or None,
        seed=request.seed,
        logit_bias=dict(request.logit_bias) or None,
        # Non-streaming: one output at the end instead of one per token; streaming:
        # only the new text of each step.
        output_kind=RequestOutputKind.DELTA if request.stream else RequestOutputKind.FINAL_ONLY,
    )


class SchedulerStatsRecorder:
    """Keeps the last running/waiting counts vLLM's scheduler reported (a stat logger).

    vLLM builds stat loggers from factories, ``factory(vllm_config, engine_index)``; this
    object is one (``__call__``) and the logger it makes writes back here.
    """

    def __init__(self) -> None:
        self.running = 0
        self.waiting = 0

    def __call__(self, vllm_config: Any, engine_index: int = 0) -> Any:
        from vllm.v1.metrics.loggers import StatLoggerBase

        recorder = self

        class _Logger(StatLoggerBase):
            def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
                pass

            def record(self, scheduler_stats: Any, iteration_stats: Any, *a: Any, **k: Any) -> None:
                if scheduler_stats is not None:
                    recorder.running = int(scheduler_stats.num_running_reqs)
                    recorder.waiting = int(scheduler_stats.num_waiting_reqs)

            def log_engine_initialized(self) -> None:
                pass

        return _Logger(vllm_config, engine_index)

    def load(self, unfinished: int) -> EngineLoad:
        """The split of ``unfinished`` (exact, counted by the engine client) into running and
        waiting, by the last scheduler report (which lags by a step, and stays stale once the
        engine goes idle: the exact count bounds it)."""
        running = min(self.running, unfinished)
        return EngineLoad(running=running, waiting=unfinished - running)


def _engine_dead_error() -> type[BaseException]:
    from vllm.v1.engine.exceptions import EngineDeadError

    return EngineDeadError


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
        """Inside Ray, vLLM's own metrics go to Ray's exporter, tagged with the replica
        (buffered, ``serve_app.engine.metrics``, unless ``engine_metrics_flush_s`` is 0); the
        scheduler's running/waiting counts are kept for the autoscaler."""
        import ray

        loggers: list[Any] = [self._scheduler_stats]
        if not (self.config.export_engine_metrics and ray.is_initialized()):
            return loggers
        if self.config.engine_metrics_flush_s > 0:
            from serve_app.engine.metrics import buffered_ray_stat_logger

            flush_s, sample = (
                self.config.engine_metrics_flush_s,
                self.config.engine_metrics_token_sample,
            )
            loggers.append(buffered_ray_stat_logger(flush_s, sample))
        else:
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

    def vocab_size(self) -> int:
        """The model's vocabulary, as vLLM checks ``logit_bias`` against it (its embedding
        rows: at least the tokenizer's ids)."""
        if self._llm is None:
            raise EngineUnavailable("The engine has not started.", retry_after_s=1)
        return int(self._llm.model_config.get_vocab_size())

    async def generate(self, request: GenerationRequest, request_id: str) -> Generation:
        from vllm.inputs import TokensPrompt

        if self._llm is None or self._llm.errored:
            raise EngineUnavailable("The engine is not running.", retry_after_s=1)
        final = None
        prompt = TokensPrompt(prompt_token_ids=request.prompt_token_ids)
        try:
            params = sampling_params(request)
            async for output in self._llm.generate(
                prompt, params, request_id, priority=request.priority
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
        params = sampling_params(replace(request, stream=True))
        produced = 0
        try:
            async for output in self._llm.generate(
                prompt, params, request_id, priority=request.priority
            ):
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
