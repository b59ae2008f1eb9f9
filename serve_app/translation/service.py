"""The translation service: from a validated request to the engine and back.

It owns what sits between HTTP and the engine for whole requests: batches (per-item errors),
admission control (503 when the replica's engine holds enough work), deadlines (504, which
cancels and so aborts the engine requests) and the engine's lifecycle (start with a timeout,
shutdown). The flow of each text (languages, detection, cache, splitting, prompts, hygiene)
is ``textflow``'s. It knows nothing of HTTP or Ray.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, suppress
from dataclasses import asdict, replace

from serve_app.core.config import AppConfig
from serve_app.core.errors import (
    BatchTooLarge,
    ClientError,
    DeadlineExceeded,
    EngineStartupError,
    EngineUnavailable,
    InvalidRequest,
    Overloaded,
    ServiceError,
    TextTooLong,
)
from serve_app.core.metrics import NoMetrics, Pair, ServiceMetrics
from serve_app.core.schemas import (
    BatchTranslateRequest,
    BatchTranslateResponse,
    CacheStatsResponse,
    ErrorDetail,
    ItemError,
    LanguageInfo,
    LanguagesResponse,
    TextItem,
    TranslateRequest,
    TranslateResponse,
    Usage,
)
from serve_app.engine.protocol import TranslationEngine
from serve_app.translation.families import make_prompt_family
from serve_app.translation.languages import Language, LanguageRegistry
from serve_app.translation.markup import Document
from serve_app.translation.markupflow import needs_reading, read_document
from serve_app.translation.piece import gather_all
from serve_app.translation.textflow import Event, Plan, TextTranslator

logger = logging.getLogger("ray.serve.translator")


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
        self.languages = language_registry(config)
        self.ready = False
        self.in_flight = 0
        self.characters = 0  # translated by this replica (DeepL's /v2/usage)
        self.flow = TextTranslator(
            config, engine, self.family, self.languages, self.metrics, self.require_ready
        )

    async def start(self) -> None:
        timeout = self.config.engine.startup_timeout_s
        await asyncio.to_thread(self.flow.detector.load)
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
        (document,) = await self._read([request])
        if isinstance(document, ServiceError):
            raise document
        plan = self.flow.plan(request, document)
        self._check_pieces(plan.engine_requests, TextTooLong)
        with self.admit(plan.engine_requests):
            async with self.deadline(request.timeout_s):
                response = await self.flow.run(plan, request_id)
        self.characters += len(plan.text)
        return response

    async def translate_batch(
        self, request: BatchTranslateRequest, request_id: str
    ) -> BatchTranslateResponse:
        """Translates the items concurrently; an item that fails gets its error in its place
        (the others are still translated). Limits, overload and the deadline apply to the
        whole batch."""
        if len(request.items) > self.limits.max_batch_items:
            raise BatchTooLarge(
                f"A batch holds at most {self.limits.max_batch_items} items; "
                f"got {len(request.items)}."
            )
        documents = await self._read(request.items)
        plans = [
            self._plan_item(index, item, document)
            for index, (item, document) in enumerate(zip(request.items, documents, strict=True))
        ]
        self.metrics.batch(len(plans))
        n = sum(p.engine_requests for p in plans if isinstance(p, Plan))
        self._check_pieces(n, BatchTooLarge)
        with self.admit(n):
            async with self.deadline(request.timeout_s):
                results = await gather_all(
                    [self._run_item(i, p, f"{request_id}-{i}") for i, p in enumerate(plans)]
                )
        done = [r for r in results if isinstance(r, TranslateResponse)]
        usage = Usage(
            input_tokens=sum(r.usage.input_tokens for r in done),
            output_tokens=sum(r.usage.output_tokens for r in done),
        )
        return BatchTranslateResponse(results=results, failed=len(results) - len(done), usage=usage)

    async def translate_stream(
        self, request: TranslateRequest, request_id: str
    ) -> AsyncIterator[Event]:
        """Validates now (errors are plain 4xx answers), then streams events; errors once
        the stream has started are the stream's ``error`` event (see ``sse``)."""
        (document,) = await self._read([request])
        if isinstance(document, ServiceError):
            raise document
        plan = self.flow.plan(request, document)
        self._check_pieces(plan.engine_requests, TextTooLong)
        self.check_capacity(plan.engine_requests)
        return self._stream(plan, request, request_id)

    async def _stream(
        self, plan: Plan, request: TranslateRequest, request_id: str
    ) -> AsyncIterator[Event]:
        """Events from a producer task. The deadline must not span this generator's yields
        (its cancellation would land in whoever consumes the stream), so the producer owns
        admission and the deadline; closing the stream (client gone) cancels the producer,
        which aborts the engine request."""
        queue: asyncio.Queue[Event | BaseException | None] = asyncio.Queue()

        async def produce() -> None:
            try:
                with self.admit(plan.engine_requests):
                    async with self.deadline(request.timeout_s):
                        async for event in self.flow.stream(plan, request_id):
                            queue.put_nowait(event)
                self.characters += len(plan.text)
                queue.put_nowait(None)
            except Exception as exc:
                queue.put_nowait(exc)

        producer = asyncio.create_task(produce())
        try:
            while (item := await queue.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            producer.cancel()
            with suppress(asyncio.CancelledError):
                await producer

    async def alternatives(
        self, items: Sequence[TextItem], k: int, request_id: str
    ) -> list[list[str]]:
        """``k`` sampled translations of each plain-text item (markup items: none), the
        cache bypassed, decoded at ``ALTERNATIVE_TEMPERATURE`` at least, so that they are
        other translations, not copies of the first (``ClientError`` of an item: none for
        it). Duplicates are the caller's to drop."""
        plans = [self._plain_plan(item) for item in items]
        sampled = [_sampled(p) for p in plans if p is not None for _ in range(k)]
        n = sum(p.engine_requests for p in sampled)
        self._check_pieces(n, BatchTooLarge)
        with self.admit(n):
            async with self.deadline(None):
                done = await gather_all(
                    [self.flow.run(p, f"{request_id}-a{i}") for i, p in enumerate(sampled)]
                )
        answers = iter(r.translation for r in done)
        return [[next(answers) for _ in range(k)] if p is not None else [] for p in plans]

    def _plain_plan(self, item: TextItem) -> Plan | None:
        """The plan of a plain text item (no markup, variables or URLs), cache off."""
        if needs_reading(item):
            return None
        try:
            return self.flow.plan(item.model_copy(update={"cache": False}))
        except ClientError:
            return None

    def detect(self, text: str) -> list[tuple[Language, float]]:
        if not text.strip():
            raise InvalidRequest("Invalid request: text must not be empty or whitespace only.")
        return self.flow.detect(text)

    def cache_stats(self) -> CacheStatsResponse:
        cache = self.flow.cache
        if cache is None:
            c = self.config.cache
            return CacheStatsResponse(
                enabled=False, hits=0, misses=0, evictions=0, entries=0, bytes=0,
                max_entries=c.max_entries, max_bytes=c.max_bytes,
            )  # fmt: skip
        return CacheStatsResponse(enabled=True, **asdict(cache.stats()))

    def pair_labels(self, items: Sequence[TextItem]) -> Pair:
        """Metric labels for a request's language pair: canonical codes ("auto" for a detected
        source), or "invalid" / "mixed", so label values stay bounded whatever clients send."""
        pairs = set()
        for item in items:
            auto = item.source_lang is None or item.source_lang.strip().lower() == "auto"
            try:
                src = "auto" if auto else self.languages.resolve(item.source_lang or "").code
                tgt = self.languages.resolve(item.target_lang).code
            except ServiceError:
                return ("invalid", "invalid")
            pairs.add((src, tgt))
        return pairs.pop() if len(pairs) == 1 else ("mixed", "mixed")

    def list_languages(self) -> LanguagesResponse:
        infos = [
            LanguageInfo(code=lang.code, name=lang.name, targets=self.languages.targets_for(code))
            for code, lang in self.languages.languages.items()
        ]
        return LanguagesResponse(model=self.config.served_model_name, languages=infos)

    # -- steps ----------------------------------------------------------------------------

    async def _read(self, items: Sequence[TextItem]) -> list[Document | ServiceError | None]:
        """Each item's document (``markupflow.read_document``), read in a worker thread: the
        work is proportional to the input. Plain texts without markup need no thread."""
        if not any(needs_reading(item) for item in items):
            return [None] * len(items)
        return await asyncio.to_thread(self._read_all, items)

    def _read_all(self, items: Sequence[TextItem]) -> list[Document | ServiceError | None]:
        out: list[Document | ServiceError | None] = []
        for item in items:
            try:
                out.append(read_document(item, self.limits.max_text_chars))
            except ServiceError as exc:
                out.append(exc)
        return out

    def _plan_item(
        self, index: int, item: TextItem, document: Document | ServiceError | None
    ) -> Plan | ItemError:
        try:
            if isinstance(document, ServiceError):
                raise document
            return self.flow.plan(item, document)
        except ServiceError as exc:
            return _item_error(index, exc)

    async def _run_item(
        self, index: int, plan: Plan | ItemError, request_id: str
    ) -> TranslateResponse | ItemError:
        if isinstance(plan, ItemError):
            return plan
        try:
            response = await self.flow.run(plan, request_id)
        except ServiceError as exc:
            return _item_error(index, exc)
        self.characters += len(plan.text)
        return response

    def _check_pieces(self, n: int, error: type[ServiceError]) -> None:
        """A request needing more engine requests than a replica ever holds can never run."""
        if n > self.limits.max_engine_requests:
            raise error(
                f"The request needs {n} engine requests (long texts are split into pieces of "
                f"{self.limits.max_input_tokens} tokens); a replica holds at most "
                f"{self.limits.max_engine_requests}."
            )

    def require_ready(self) -> None:
        if not self.ready:
            self.metrics.rejected("engine_unavailable")
            raise EngineUnavailable("The engine is not ready yet.", retry_after_s=5)

    @contextmanager
    def admit(self, n: int) -> Iterator[None]:
        """Counts engine requests in flight; refuses work beyond the replica's limit."""
        self.check_capacity(n)
        self.in_flight += n
        self.metrics.load(self.in_flight)
        try:
            yield
        finally:
            self.in_flight -= n
            self.metrics.load(self.in_flight)

    def check_capacity(self, n: int) -> None:
        if self.in_flight + n > self.limits.max_engine_requests:
            self.metrics.rejected("overloaded")
            raise Overloaded(
                "The server is at capacity; retry after the delay given in Retry-After.",
                retry_after_s=self.limits.retry_after_s,
            )

    def deadline(self, requested: float | None) -> AbstractAsyncContextManager[None]:
        seconds = min(requested or self.limits.request_timeout_s, self.limits.max_request_timeout_s)
        return _deadline(seconds)


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


# Alternatives are sampled at this temperature at least (greedy decoding would repeat the
# first translation).
ALTERNATIVE_TEMPERATURE = 0.8


def _sampled(plan: Plan) -> Plan:
    """``plan`` decoded by sampling."""
    jobs = tuple(
        replace(j, temperature=max(j.temperature, ALTERNATIVE_TEMPERATURE)) for j in plan.jobs
    )
    return replace(plan, jobs=jobs)


def _item_error(index: int, exc: ServiceError) -> ItemError:
    """An item's own error (4xx: its text, languages, options). The server's troubles (503
    engine unavailable) fail the whole batch, so that clients retry it after Retry-After."""
    if not isinstance(exc, ClientError):
        raise exc
    return ItemError(index=index, error=ErrorDetail(code=exc.code, message=exc.message))
