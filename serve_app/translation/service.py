"""The translation service: from a validated request to the engine and back.

It owns what sits between HTTP and the engine for whole requests: batches (per-item errors),
admission control (``admission``: 503 when the replica's engine holds enough work), deadlines
(504, which cancels and so aborts the engine requests; planning included) and the engine's
lifecycle (start with a timeout, shutdown). A request is checked cheaply first (character
counts, a free slot), then planned off the event loop (``planning``), then admitted with the
engine requests its plan needs. The flow of each text (languages, detection, cache,
splitting, prompts, hygiene) is ``textflow``'s. It knows nothing of HTTP or Ray.

Engine request ids are the request's id (the client's ``X-Request-ID``, when valid) with a
number of this replica's own: two requests sent with the same id never meet in the engine.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict, replace

from serve_app.core.aio import produced
from serve_app.core.characters import invisible
from serve_app.core.config import AppConfig
from serve_app.core.context import current_key
from serve_app.core.errors import (
    BatchTooLarge,
    ClientError,
    DeadlineExceeded,
    EngineStartupError,
    EngineUnavailable,
    InvalidRequest,
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
from serve_app.translation.admission import Admission
from serve_app.translation.families import make_prompt_family
from serve_app.translation.languages import Language, LanguageRegistry
from serve_app.translation.markupflow import needs_reading, read_document
from serve_app.translation.piece import gather_all
from serve_app.translation.planning import Budget, Planner
from serve_app.translation.textflow import BLANK_TEXT, Event, Plan, TextTranslator

# Planning threads: the tokenizer releases the GIL, the rest is Python; more threads than
# cores would only make each plan slower. One core is left to the event loop and Ray's
# proxy: on 2 cores beside a busy one, two planning threads took /healthz's p99 to
# 0.35-0.73 s, one to 0.26-0.29 s, with the same p99 on a quiet machine (docs/reliability.md).
_PLANNING_WORKERS = max(1, min(4, (os.cpu_count() or 1) - 1))

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
        self.characters = 0  # translated by this replica (DeepL's /v2/usage)
        lim = self.limits
        self.admission = Admission(lim.max_engine_requests, self.metrics, lim.retry_after_s)
        # Two largest batches' worth of text may wait to be planned; beyond, 503 at once.
        pending = 2 * lim.max_batch_items * lim.max_text_chars
        self.planner = Planner(_PLANNING_WORKERS, pending, self.metrics, lim.retry_after_s)
        self.flow = TextTranslator(
            config,
            engine,
            self.family,
            self.languages,
            self.metrics,
            self.require_ready,
            self.admission,
        )
        self._ids = itertools.count()

    @property
    def in_flight(self) -> int:
        """Engine requests this replica holds (admitted ones, and their retries)."""
        return self.admission.in_flight

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
        await self.flow.warm_up(self.config.engine.warmup_requests)
        self.ready = True

    def shutdown(self) -> None:
        self.ready = False
        self.planner.shutdown()
        self.engine.shutdown()

    async def check_health(self) -> None:
        await self.engine.check_health()

    # -- requests -------------------------------------------------------------------------

    async def translate(self, request: TranslateRequest, request_id: str) -> TranslateResponse:
        engine_id = self.engine_id(request_id)
        async with self.deadline(request.timeout_s) as budget:
            (plan,) = await self._plan([request], budget)
            if isinstance(plan, ServiceError):
                raise plan
            self._check_pieces(plan.engine_requests, TextTooLong)
            with self.admission.admit(plan.engine_requests):
                response = await self.flow.run(plan, engine_id)
        self.characters += len(plan.text)
        return response

    def check_batch_size(self, items: int) -> None:
        """A 413 for a batch of more than ``max_batch_items`` (compat routes call it before
        building their items: a 100,000-text body cost seconds of validation first)."""
        if items > self.limits.max_batch_items:
            raise BatchTooLarge(
                f"A batch holds at most {self.limits.max_batch_items} items; got {items}."
            )

    async def translate_batch(
        self, request: BatchTranslateRequest, request_id: str
    ) -> BatchTranslateResponse:
        """Translates the items concurrently; an item that fails gets its error in its place
        (the others are still translated). Limits, overload and the deadline apply to the
        whole batch."""
        self.check_batch_size(len(request.items))
        engine_id = self.engine_id(request_id)
        async with self.deadline(request.timeout_s) as budget:
            planned = await self._plan(request.items, budget)
            plans = [_item_plan(i, p) for i, p in enumerate(planned)]
            self.metrics.batch(len(plans))
            n = sum(p.engine_requests for p in plans if isinstance(p, Plan))
            self._check_pieces(n, BatchTooLarge)
            with self.admission.admit(n):
                results = await gather_all(
                    [self._run_item(i, p, f"{engine_id}-{i}") for i, p in enumerate(plans)]
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
        deadline = self.deadline_of(request.timeout_s)
        async with self.until(deadline) as budget:
            (plan,) = await self._plan([request], budget)
        if isinstance(plan, ServiceError):
            raise plan
        self._check_pieces(plan.engine_requests, TextTooLong)
        self.admission.check(plan.engine_requests)
        return self._stream(plan, deadline, self.engine_id(request_id))

    def _stream(self, plan: Plan, deadline: float, request_id: str) -> AsyncIterator[Event]:
        """Events from a producer task. The deadline must not span this generator's yields
        (its cancellation would land in whoever consumes the stream), so the producer owns
        admission and the deadline; closing the stream (client gone) cancels the producer,
        which aborts the engine request."""

        async def produce(put: Callable[[Event], None]) -> None:
            with self.admission.admit(plan.engine_requests):
                async with self.until(deadline):
                    async for event in self.flow.stream(plan, request_id):
                        put(event)
            self.characters += len(plan.text)

        return produced(produce)

    async def alternatives(
        self, items: Sequence[TextItem], k: int, request_id: str
    ) -> list[list[str]]:
        """``k`` sampled translations of each plain-text item (markup items: none), the
        cache bypassed, decoded at ``ALTERNATIVE_TEMPERATURE`` at least, so that they are
        other translations, not copies of the first (``ClientError`` of an item: none for
        it). Duplicates are the caller's to drop. Planned in the planning pool."""
        plain = [i for i, item in enumerate(items) if not needs_reading(item)]
        if not plain:
            return [[] for _ in items]
        engine_id = self.engine_id(request_id)
        async with self.deadline(None) as budget:
            uncached = [items[i].model_copy(update={"cache": False}) for i in plain]
            planned = await self._plan(uncached, budget)
            plans = {i: p for i, p in zip(plain, planned, strict=True) if isinstance(p, Plan)}
            sampled = [_sampled(p) for p in plans.values() for _ in range(k)]
            n = sum(p.engine_requests for p in sampled)
            self._check_pieces(n, BatchTooLarge)
            with self.admission.admit(n):
                done = await gather_all(
                    [self.flow.run(p, f"{engine_id}-a{j}") for j, p in enumerate(sampled)]
                )
        answers = iter(r.translation for r in done)
        return [[next(answers) for _ in range(k)] if i in plans else [] for i in range(len(items))]

    def detect(self, text: str) -> list[tuple[Language, float]]:
        if invisible(text):
            raise InvalidRequest(BLANK_TEXT)
        return self.flow.detect(text)

    def cache_stats(self) -> CacheStatsResponse:
        cache = self.flow.cache
        if cache is None:
            c = self.config.cache
            return CacheStatsResponse(
                enabled=False, hits=0, misses=0, evictions=0, entries=0, bytes=0,
                max_entries=c.max_entries, max_bytes=c.max_bytes,
            )  # fmt: skip
        # The caller's own entries and lookups: another key's use is not its business.
        return CacheStatsResponse(enabled=True, **asdict(cache.stats(current_key.get())))

    def pair_labels(self, items: Sequence[TextItem]) -> Pair:
        """Metric labels for a request's language pair: canonical codes ("auto" for a detected
        source), or "invalid" / "mixed", so label values stay bounded whatever clients send."""
        pairs = set()
        for item in items:
            auto = item.source_lang is None or item.source_lang.strip().lower() == "auto"
            try:
                src = "auto" if auto else self.languages.resolve(item.source_lang or "").code
                tgt = self.languages.resolve_target(item.target_lang).code
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

    async def _plan(self, items: Sequence[TextItem], budget: Budget) -> list[Plan | ServiceError]:
        """Each item's plan (or its error), made in the planning pool after a cheap check:
        a free engine slot for every item, and room for its characters in the pool's queue
        (503 at once otherwise, before any work proportional to the text). Plain texts of
        at most ``limits.inline_plan_chars`` in all are planned here, on the loop."""
        self.admission.check(len(items))
        # A text over the limit is refused at its first step: it costs no more than that.
        chars = [min(len(item.text), self.limits.max_text_chars + 1) for item in items]
        if sum(chars) <= self.limits.inline_plan_chars and not any(map(needs_reading, items)):
            # Short plain text: bounded work (well under a millisecond), cheaper here than
            # the hop to a planning thread and back, which waits for the GIL behind this
            # busy loop (a switch interval, 5 ms) and then for the loop to take the result.
            return [self._plan_one(item, budget) for item in items]
        jobs = [functools.partial(self._plan_one, item) for item in items]
        return await self.planner.run_all(jobs, chars, budget)

    def _plan_one(self, item: TextItem, budget: Budget) -> Plan | ServiceError:
        """One item's plan (in a planning thread): its document when it is read as markup,
        then ``textflow.plan``. Its own errors are returned, the deadline's raised."""
        try:
            budget.check()
            document = (
                read_document(item, self.limits.max_text_chars) if needs_reading(item) else None
            )
            return self.flow.plan(item, document, budget)
        except DeadlineExceeded:
            raise
        except ServiceError as exc:
            return exc

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

    def engine_id(self, request_id: str) -> str:
        """The request's id in the engine: unique on this replica, whatever the client sent."""
        return f"{request_id}.{next(self._ids)}"

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

    def deadline_of(self, requested: float | None) -> float:
        """The request's deadline (``time.monotonic`` seconds) from its ``timeout_s``."""
        seconds = min(requested or self.limits.request_timeout_s, self.limits.max_request_timeout_s)
        return time.monotonic() + seconds

    def deadline(self, requested: float | None) -> AbstractAsyncContextManager[Budget]:
        """The request's deadline from its ``timeout_s``, as a context (504 beyond it)."""
        return self.until(self.deadline_of(requested))

    def until(self, deadline: float) -> AbstractAsyncContextManager[Budget]:
        """A context at ``deadline`` (``deadline_of``, fixed when the request came): the
        stages of one request (planning, then the engine's work) share it, so the request
        ends within its timeout, not within one timeout per stage."""
        return _deadline(deadline)


@asynccontextmanager
async def _deadline(deadline: float) -> AsyncIterator[Budget]:
    """``asyncio.timeout`` at ``deadline`` that surfaces as a 504; cancelling aborts the
    engine requests and stops the planning (its ``Budget``)."""
    budget = Budget(deadline)
    loop = asyncio.get_running_loop()
    timeout = asyncio.timeout_at(loop.time() + (deadline - time.monotonic()))
    try:
        async with timeout:
            yield budget
    except TimeoutError as exc:
        if not timeout.expired():
            raise
        raise DeadlineExceeded("The translation did not finish within its deadline.") from exc
    finally:
        budget.cancelled.set()


def _item_plan(index: int, plan: Plan | ServiceError) -> Plan | ItemError:
    return _item_error(index, plan) if isinstance(plan, ServiceError) else plan


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
