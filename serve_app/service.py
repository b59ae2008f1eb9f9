"""The translation service: from a validated request to the engine and back.

It owns what sits between HTTP and the engine: resolving languages, building and tokenizing
the prompt, the token limits, admission control (503 when the replica's engine holds enough
work), deadlines (504, which cancels and so aborts the engine request) and the engine's
lifecycle (start with a timeout, shutdown). It knows nothing of HTTP or Ray.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass

from serve_app.config import AppConfig
from serve_app.engine import GenerationRequest, TranslationEngine
from serve_app.errors import (
    BatchTooLarge,
    DeadlineExceeded,
    EngineStartupError,
    EngineUnavailable,
    Overloaded,
    ServiceError,
    TextTooLong,
)
from serve_app.languages import Language, LanguageRegistry
from serve_app.metrics import NoMetrics, Pair, ServiceMetrics
from serve_app.prompts import effective_sampling, make_prompt_family
from serve_app.schemas import (
    BatchTranslateRequest,
    BatchTranslateResponse,
    LanguageInfo,
    LanguagesResponse,
    TextItem,
    TranslateRequest,
    TranslateResponse,
    Usage,
)

logger = logging.getLogger("ray.serve.translator")

# No tokenizer of the supported families packs more characters than this into one token of
# ordinary text, so longer texts are refused without spending time tokenizing them.
_MAX_CHARS_PER_TOKEN = 32


@dataclass(frozen=True)
class _Job:
    source: Language
    target: Language
    characters: int
    generation: GenerationRequest


def language_registry(config: AppConfig) -> LanguageRegistry:
    """The languages and pairs offered; ValueError if the config names unknown ones."""
    family = make_prompt_family(config.prompt)
    codes = config.supported_languages or list(family.languages)
    unknown = sorted(set(codes) - set(family.languages))
    if unknown:
        raise ValueError(
            f"supported_languages {unknown} are unknown to prompt family '{config.prompt.family}'"
        )
    return LanguageRegistry(codes, config.supported_language_pairs)


class TranslationService:
    def __init__(
        self,
        config: AppConfig,
        engine: TranslationEngine,
        metrics: ServiceMetrics | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics or NoMetrics()
        self.limits = config.limits
        self.engine = engine
        self.family = make_prompt_family(config.prompt)
        self.sampling = effective_sampling(self.family, config.prompt.sampling)
        self.languages = language_registry(config)
        self.ready = False
        self.in_flight = 0

    async def start(self) -> None:
        timeout = self.config.engine.startup_timeout_s
        try:
            await asyncio.wait_for(self.engine.start(), timeout)
        except TimeoutError as exc:
            raise EngineStartupError(
                f"The engine for '{self.config.engine.model}' did not start within "
                f"{timeout:.0f}s (engine.startup_timeout_s)."
            ) from exc
        self.ready = True

    def shutdown(self) -> None:
        self.ready = False
        self.engine.shutdown()

    async def check_health(self) -> None:
        await self.engine.check_health()

    # -- requests -------------------------------------------------------------------------

    async def translate(self, request: TranslateRequest, request_id: str) -> TranslateResponse:
        job = self._prepare(request)
        with self._admit(1):
            async with self._deadline(request.timeout_s):
                return await self._run(job, request_id)

    async def translate_batch(
        self, request: BatchTranslateRequest, request_id: str
    ) -> BatchTranslateResponse:
        if len(request.items) > self.limits.max_batch_items:
            raise BatchTooLarge(
                f"A batch holds at most {self.limits.max_batch_items} items; "
                f"got {len(request.items)}."
            )
        jobs = [self._prepare(item, index) for index, item in enumerate(request.items)]
        self.metrics.batch(len(jobs))
        with self._admit(len(jobs)):
            async with self._deadline(request.timeout_s):
                results = await _gather_all(
                    [self._run(job, f"{request_id}-{i}") for i, job in enumerate(jobs)]
                )
        usage = Usage(
            input_tokens=sum(r.usage.input_tokens for r in results),
            output_tokens=sum(r.usage.output_tokens for r in results),
        )
        return BatchTranslateResponse(results=results, usage=usage)

    def pair_labels(self, items: list[TextItem]) -> Pair:
        """Metric labels for a request's language pair: canonical codes, or "invalid" /
        "mixed", so label values stay bounded whatever clients send."""
        pairs = set()
        for item in items:
            try:
                src, tgt = (
                    self.languages.resolve(item.source_lang),
                    self.languages.resolve(item.target_lang),
                )
            except ServiceError:
                return ("invalid", "invalid")
            pairs.add((src.code, tgt.code))
        return pairs.pop() if len(pairs) == 1 else ("mixed", "mixed")

    def list_languages(self) -> LanguagesResponse:
        infos = [
            LanguageInfo(code=lang.code, name=lang.name, targets=self.languages.targets_for(code))
            for code, lang in self.languages.languages.items()
        ]
        return LanguagesResponse(model=self.config.served_model_name, languages=infos)

    # -- steps ----------------------------------------------------------------------------

    def _prepare(self, item: TextItem, index: int | None = None) -> _Job:
        """Validates one text against languages and limits; errors name the batch index."""
        try:
            return self._build_job(item)
        except ServiceError as exc:
            if index is not None:
                exc.message = f"items[{index}]: {exc.message}"
                exc.args = (exc.message,)
            raise

    def _build_job(self, item: TextItem) -> _Job:
        source, target = self.languages.resolve_pair(item.source_lang, item.target_lang)
        limit = self.limits.max_input_tokens
        if len(item.text) > limit * _MAX_CHARS_PER_TOKEN:
            raise TextTooLong(f"Text is longer than the limit of {limit} tokens.")
        self._require_ready()
        n_text = self.engine.count_tokens(item.text)
        if n_text > limit:
            raise TextTooLong(f"Text has {n_text} tokens; the limit is {limit}.")
        text = self.engine.as_data(item.text)
        prompt_ids = self.engine.encode(self.family.build(source, target, text))
        max_tokens = self._max_output_tokens(n_text, len(prompt_ids))
        s = self.sampling
        generation = GenerationRequest(
            prompt_token_ids=prompt_ids,
            max_tokens=max_tokens,
            temperature=s.temperature if s.temperature is not None else 0.0,
            top_p=s.top_p if s.top_p is not None else 1.0,
            top_k=s.top_k if s.top_k is not None else -1,
            repetition_penalty=s.repetition_penalty or 1.0,
        )
        return _Job(source, target, len(item.text), generation)

    def _max_output_tokens(self, n_text: int, n_prompt: int) -> int:
        lim = self.limits
        budget = math.ceil(lim.output_tokens_ratio * n_text) + lim.output_tokens_margin
        room = (self.config.engine.max_model_len or 1 << 30) - n_prompt
        max_tokens = min(lim.max_output_tokens, budget, room)
        if max_tokens < 1:
            raise TextTooLong("The prompt leaves no room for a translation in the context.")
        return max_tokens

    def _require_ready(self) -> None:
        if not self.ready:
            self.metrics.rejected("engine_unavailable")
            raise EngineUnavailable("The engine is not ready yet.", retry_after_s=5)

    @contextmanager
    def _admit(self, n: int) -> Iterator[None]:
        """Counts engine requests in flight; refuses work beyond the replica's limit."""
        if self.in_flight + n > self.limits.max_engine_requests:
            self.metrics.rejected("overloaded")
            raise Overloaded(
                "The server is at capacity; retry after the delay given in Retry-After.",
                retry_after_s=self.limits.retry_after_s,
            )
        self.in_flight += n
        self.metrics.load(self.in_flight)
        try:
            yield
        finally:
            self.in_flight -= n
            self.metrics.load(self.in_flight)

    def _deadline(self, requested: float | None) -> AbstractAsyncContextManager[None]:
        seconds = min(requested or self.limits.request_timeout_s, self.limits.max_request_timeout_s)
        return _deadline(seconds)

    async def _run(self, job: _Job, request_id: str) -> TranslateResponse:
        result = await self.engine.generate(job.generation, request_id)
        self.metrics.translation(
            (job.source.code, job.target.code),
            job.characters,
            result.input_tokens,
            result.output_tokens,
            result.queue_s,
            result.ttft_s,
        )
        return TranslateResponse(
            translation=result.text.strip(),
            source_lang=job.source.code,
            target_lang=job.target.code,
            model=self.config.served_model_name,
            usage=Usage(input_tokens=result.input_tokens, output_tokens=result.output_tokens),
        )


@asynccontextmanager
async def _deadline(seconds: float) -> AsyncIterator[None]:
    """``asyncio.timeout`` that surfaces as a 504; cancelling aborts the engine requests."""
    timeout = asyncio.timeout(seconds)
    try:
        async with timeout:
            yield
    except TimeoutError as exc:
        if not timeout.expired():
            raise
        raise DeadlineExceeded(f"The translation did not finish within {seconds:g}s.") from exc


async def _gather_all(coros: list) -> list[TranslateResponse]:
    """Runs all; on the first failure cancels the rest (aborting them) and raises it."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(c) for c in coros]
    except BaseExceptionGroup as group_error:
        raise group_error.exceptions[0] from None
    return [t.result() for t in tasks]
