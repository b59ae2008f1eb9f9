"""The flow of one text: from a request item to its translation.

``plan`` does everything that can fail before any engine work (blank text, length, languages
with auto-detection, options the model supports, the cache lookup, splitting a long text into
pieces and building their prompts), so errors surface before admission. ``run`` translates
the pieces concurrently, cleans each output (``hygiene``), re-splits a piece whose
translation ran out of tokens at its sentence ends (a single sentence that still does keeps
what it translated and is reported as ``truncated``), reassembles the text with its original
whitespace and fills the cache. ``stream`` does the same piece after piece, yielding the text
as it is generated. Every engine request goes through ``generate`` or ``generate_stream``, on
a slot that admission counts (``admission``), re-splits included; their tokenizing runs in a
worker thread, never on the event loop. A piece stuck in a blank loop is decoded once more
(``piece``), never answered with an empty translation.
A text read as markup (a ``document``: HTML, XML, Markdown, variables) goes to ``markupflow``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from serve_app.core import characters
from serve_app.core.characters import invisible
from serve_app.core.config import AppConfig
from serve_app.core.context import current_key, engine_priority, same_language_kept
from serve_app.core.errors import (
    EngineUnavailable,
    InvalidRequest,
    LanguageDetectionFailed,
    ServiceError,
    TextTooLong,
    UnsupportedLanguagePair,
    UnsupportedOption,
)
from serve_app.core.metrics import ServiceMetrics
from serve_app.core.schemas import TextItem, TranslateResponse, Usage
from serve_app.engine.protocol import (
    Generation,
    GenerationChunk,
    GenerationRequest,
    TranslationEngine,
)
from serve_app.engine.tokenizer import escape_special_tokens, special_token_escaper
from serve_app.engine.warmup import warm_up
from serve_app.translation.admission import Admission
from serve_app.translation.cache import CachedTranslation, TranslationCache, request_key
from serve_app.translation.detect import Candidate, LanguageDetector
from serve_app.translation.families import PromptFamily, PromptOptions, effective_sampling
from serve_app.translation.languages import ALL_LANGUAGES, Language, LanguageRegistry
from serve_app.translation.markup import Document
from serve_app.translation.markup.fidelity import FidelityTracker
from serve_app.translation.markupflow import MarkupFlow
from serve_app.translation.piece import PieceOutput, gather_all, unstuck
from serve_app.translation.planning import Budget
from serve_app.translation.segment import Split, split_sentences, split_text

logger = logging.getLogger("ray.serve.translator")

Event = tuple[str, dict[str, Any]]

# A text with nothing to translate (``characters.invisible``), in the words of the request
# models' refusal.
BLANK_TEXT = f"Invalid request: {characters.BLANK_TEXT}."
# A piece whose translation hits the token limit is re-split at most this many times.
_MAX_RESPLITS = 2
# What the engine's warm-up translates (``warm_up``).
WARMUP_TEXT = "The weather is fine today, and the shop opens at nine."


@dataclass(frozen=True)
class Plan:
    """A validated text, ready for the engine (or already answered by the cache)."""

    text: str
    source: Language
    target: Language
    detected: Candidate | None
    options: PromptOptions
    cache_key: str | None
    cached: CachedTranslation | None
    split: Split | None = None
    jobs: tuple[GenerationRequest, ...] = ()
    document: Document | None = None  # markup (``markupflow``): its segments are translated
    owner: str = ""  # the API key that asked: the cache entry is its own

    @property
    def engine_requests(self) -> int:
        return len(self.document.segments) if self.document is not None else len(self.jobs)


class TextTranslator:
    def __init__(
        self,
        config: AppConfig,
        engine: TranslationEngine,
        family: PromptFamily,
        languages: LanguageRegistry,
        metrics: ServiceMetrics,
        require_ready: Callable[[], None],
        admission: Admission,
    ) -> None:
        self.config = config
        self.limits = config.limits
        self.engine = engine
        self.family = family
        self.sampling = effective_sampling(family, config.prompt.sampling)
        self.languages = languages
        self.metrics = metrics
        self.require_ready = require_ready
        self.admission = admission
        self._family_controls = special_token_escaper(family.control_strings())
        self.detector = LanguageDetector()
        # Which method a tagged segment tries first (``markupflow``): this replica's memory.
        self.fidelity = FidelityTracker(config.markup)
        c = config.cache
        self.cache = TranslationCache(c.max_entries, c.max_bytes) if c.enabled else None

    # -- planning -------------------------------------------------------------------------

    def plan(
        self, item: TextItem, document: Document | None = None, budget: Budget | None = None
    ) -> Plan:
        """Runs in a planning thread (``planning``): its work is proportional to the text;
        ``budget`` (the request's deadline) is checked between steps."""
        budget = budget or Budget(math.inf)
        text = item.text
        if invisible(text):  # 10,000 ZWJs were 60 engine requests of nothing to translate
            raise InvalidRequest(BLANK_TEXT)
        if len(text) > self.limits.max_text_chars:
            raise TextTooLong(
                f"Text has {len(text)} characters; the limit is {self.limits.max_text_chars}."
            )
        target = self.languages.resolve_target(item.target_lang)
        budget.check()
        source, detected = self._source(item.source_lang, text)
        kept = source.code == target.code and same_language_kept.get()
        if not kept:
            self._check_pair(source, target, detected)
        options = self._options(item)
        if kept:  # already in the target language: answered as it is, no engine work
            kept_text = CachedTranslation(text, 1, False)
            return Plan(text, source, target, detected, options, None, kept_text)
        markup = [item.format, item.tag_options and item.tag_options.model_dump()]
        key, owner = None, current_key.get()
        if self.cache is not None and item.cache:
            parts = (source.code, target.code, options, markup, text)
            key = request_key(self.config, self.sampling, *parts, owner)
        cached = self._lookup(key, owner)
        plan = Plan(
            text, source, target, detected, options, key, cached, document=document, owner=owner
        )
        if cached is not None:
            return plan
        self.require_ready()
        if document is not None:
            self._check_document(document)
            return plan
        # Splitting has counted each piece's tokens already: count each text once (the
        # tokenizer was the replica's largest CPU cost per request).
        count = functools.lru_cache(maxsize=256)(budget.counting(self.engine.count_tokens))
        split = split_text(text, self.limits.max_input_tokens, count)
        self._check_pieces(len(split.pieces))
        jobs = tuple(self._generation(plan, piece.text, count) for piece in split.pieces)
        budget.check()
        return Plan(text, source, target, detected, options, key, None, split, jobs, owner=owner)

    def _check_pieces(self, n: int) -> None:
        """A text needing more engine requests than a replica ever holds can never run:
        refused before its pieces' prompts are built."""
        if n > self.limits.max_engine_requests:
            raise TextTooLong(
                f"The text needs {n} engine requests (pieces of "
                f"{self.limits.max_input_tokens} tokens); a replica holds at most "
                f"{self.limits.max_engine_requests}."
            )

    def _check_document(self, document: Document) -> None:
        """A document whose segments may need more engine requests than a replica ever
        holds (``Document.engine_requests``: each text run between tags is one when the
        model loses tags) is refused, as a text of too many pieces is: one request of
        ``<i>a</i>`` repeated was 12,500 engine requests."""
        limit = self.limits.max_engine_requests
        if document.engine_requests(limit) > limit:
            raise TextTooLong(
                f"The text's markup splits it into more than {limit} parts to translate "
                f"(blocks, and the text runs between inline tags); a replica holds at most "
                f"{limit} engine requests. Send it in smaller parts."
            )

    def detect(self, text: str) -> list[tuple[Language, float]]:
        """Offered languages ``text`` may be in, likeliest first, with confidences."""
        found: dict[str, tuple[Language, float]] = {}
        for candidate in self.detector.candidates(text):
            try:
                lang = self.languages.resolve(candidate.code)
            except ServiceError:
                continue
            found.setdefault(lang.code, (lang, candidate.confidence))
        return list(found.values())

    def _check_pair(self, source: Language, target: Language, detected: Candidate | None) -> None:
        """Refuses a pair this model does not translate; a detected source that is the target
        says it was detected (the client may have meant another source)."""
        if detected is not None and source.code == target.code:
            raise UnsupportedLanguagePair(
                f"The text was detected as '{source.code}' (confidence "
                f"{detected.confidence:.2f}), the target language; give source_lang if that is "
                "wrong."
            )
        self.languages.resolve_pair(source.code, target.code)

    def _source(self, raw: str | None, text: str) -> tuple[Language, Candidate | None]:
        if raw is not None and raw.strip().lower() != "auto":
            return self.languages.resolve(raw), None
        found = self.detect(text)
        if not found:
            best = self.detector.candidates(text, k=1)
            guess = f" (best guess '{best[0].code}')" if best else ""
            raise LanguageDetectionFailed(
                f"Could not detect a supported source language{guess}; give source_lang."
            )
        lang, confidence = found[0]
        return lang, Candidate(lang.code, confidence)

    def _options(self, item: TextItem) -> PromptOptions:
        glossary = tuple((g.source, g.target) for g in item.glossary)
        options = PromptOptions(glossary, item.context or None, item.formality)
        missing = options.requested() - self.family.supports
        if missing:
            raise UnsupportedOption(
                f"The configured model (prompt family '{self.config.prompt.family}') does not "
                f"support {', '.join(sorted(missing))}."
            )
        return options

    def _lookup(self, key: str | None, owner: str) -> CachedTranslation | None:
        if key is None or self.cache is None:
            return None
        hit = self.cache.get(key, owner)
        self.metrics.cache(hit is not None)
        return hit

    def _generation(
        self, plan: Plan, text: str, count: Callable[[str], int] | None = None, markup: bool = False
    ) -> GenerationRequest:
        # Everything a client wrote enters the prompt as data: control-token strings in it
        # (the tokenizer's, the family's own) are escaped, so no text, context or glossary
        # term can close the user's turn, open a thinking block or change the target.
        data = self.as_data
        options = plan.options.for_text(text)
        options = PromptOptions(
            tuple((data(s), data(t)) for s, t in options.glossary),
            data(options.context) if options.context else None,
            options.formality,
            markup,
        )
        prompt = self.family.build(plan.source, plan.target, data(text), options)
        prompt_ids = self.engine.encode(prompt)
        text_tokens = (count or self.engine.count_tokens)(text)
        max_tokens = self._max_output_tokens(text_tokens, len(prompt_ids))
        stop = self.family.stop_sequences(text)
        priority = engine_priority.get()
        return GenerationRequest.sampled(prompt_ids, max_tokens, self.sampling, stop, priority)

    async def warm_up(self, requests: int) -> None:
        """The engine decodes ``requests`` at once on a short translation prompt of this
        family, with its sampling, before the replica is ready (``engine/warmup.py``)."""
        english, german = ALL_LANGUAGES["en"], ALL_LANGUAGES["de"]  # offered or not
        prompt = self.family.build(english, german, WARMUP_TEXT, PromptOptions())
        await warm_up(self.engine, self.engine.encode(prompt), self.sampling, requests)

    def as_data(self, text: str) -> str:
        return escape_special_tokens(self.engine.as_data(text), self._family_controls)

    def _max_output_tokens(self, n_text: int, n_prompt: int) -> int:
        lim = self.limits
        budget = math.ceil(lim.output_tokens_ratio * n_text) + lim.output_tokens_margin
        room = (self.config.engine.max_model_len or 1 << 30) - n_prompt
        max_tokens = min(lim.max_output_tokens, budget, room)
        if max_tokens < 1:
            raise TextTooLong("The prompt leaves no room for a translation in the context.")
        return max_tokens

    # -- translating ----------------------------------------------------------------------

    async def generate(self, job: GenerationRequest, request_id: str) -> Generation:
        """One engine request, counted by admission (``admission.slot``): every engine
        request of the flow goes through here or ``generate_stream``."""
        async with self.admission.slot():
            return await self.engine.generate(job, request_id)

    async def generate_stream(
        self, job: GenerationRequest, request_id: str
    ) -> AsyncIterator[GenerationChunk]:
        async with self.admission.slot():
            async for chunk in self.engine.generate_stream(job, request_id):
                yield chunk

    async def run(self, plan: Plan, request_id: str) -> TranslateResponse:
        if plan.cached is not None:
            c = plan.cached
            return self._response(plan, c.translation, Usage(input_tokens=0, output_tokens=0), c)
        if plan.document is not None:
            return await MarkupFlow(self).respond(plan, plan.document, request_id)
        assert plan.split is not None
        pieces = plan.split.pieces
        outs = await gather_all(
            [
                self._piece(plan, piece.text, job, _piece_id(request_id, i, len(pieces)))
                for i, (piece, job) in enumerate(zip(pieces, plan.jobs, strict=True))
            ]
        )
        return self._finish(plan, plan.split, outs)

    async def _piece(
        self, plan: Plan, text: str, job: GenerationRequest, request_id: str, depth: int = 0
    ) -> PieceOutput:
        out = await self._decode(plan, text, job, request_id)
        if out.stuck:
            logger.warning("request %s: a blank loop hit the token limit; again", request_id)
            return out.then(await self._decode(plan, text, unstuck(job), f"{request_id}-u"))
        if not out.truncated:
            return out
        resplit = (
            await asyncio.to_thread(self._resplit, plan, text) if depth < _MAX_RESPLITS else None
        )
        if resplit is None:
            logger.warning("request %s: a translation hit the output token limit", request_id)
            return out
        halves, jobs = resplit
        subs = await gather_all(
            [
                self._piece(plan, p.text, job, f"{request_id}-r{i}", depth + 1)
                for i, (p, job) in enumerate(zip(halves.pieces, jobs, strict=True))
            ]
        )
        joined = halves.join([s.text for s in subs])
        return PieceOutput(
            joined if joined.strip() else out.text,  # the halves' answer, unless it is empty
            out.input_tokens + sum(s.input_tokens for s in subs),
            out.output_tokens + sum(s.output_tokens for s in subs),
            any(s.truncated for s in subs),
        )

    def _resplit(self, plan: Plan, text: str) -> tuple[Split, list[GenerationRequest]] | None:
        """A piece's halves at sentence ends and their requests, or None for one sentence
        (in a worker thread: tokenizing is proportional to the piece)."""
        halves = split_sentences(text, self.engine.count_tokens)
        if halves is None:
            return None
        return halves, [self._generation(plan, p.text) for p in halves.pieces]

    async def _decode(
        self, plan: Plan, text: str, job: GenerationRequest, request_id: str
    ) -> PieceOutput:
        """One generation of a piece, cleaned; ``truncated`` if it ran to its token limit."""
        result = await self.generate(job, request_id)
        timings = (result.queue_s, result.ttft_s)
        self._record(plan, text, result.input_tokens, result.output_tokens, *timings)
        return PieceOutput(
            self.family.clean(result.text, text),
            result.input_tokens,
            result.output_tokens,
            truncated=job.ran_out(result.finish_reason),
        )

    async def stream(self, plan: Plan, request_id: str) -> AsyncIterator[Event]:
        """``start``, then ``delta`` events (each piece's output as it is generated, cleaned
        as it goes by ``StreamCleaner``, and the whitespace before, between and after the
        pieces), then ``done`` with the cleaned, reassembled response."""
        yield "start", self._start_event(plan)
        if plan.cached is not None:
            c = plan.cached
            yield "delta", {"text": c.translation, "segment": 0}
            usage = Usage(input_tokens=0, output_tokens=0)
            yield "done", self._response(plan, c.translation, usage, c).model_dump()
            return
        if plan.document is not None:  # markup: checked and rebuilt whole, then sent
            done = await self.run(plan, request_id)
            yield "delta", {"text": done.translation, "segment": 0}
            yield "done", done.model_dump()
            return
        assert plan.split is not None
        pieces, outs = plan.split.pieces, list[PieceOutput]()
        if plan.split.lead:  # the text's own leading whitespace, as ``done`` has it
            yield "delta", {"text": plan.split.lead, "segment": 0}
        for i, (piece, job) in enumerate(zip(pieces, plan.jobs, strict=True)):
            piece_id = _piece_id(request_id, i, len(pieces))
            async for event in self._stream_piece(plan, piece.text, job, piece_id, i, outs):
                yield event
            if piece.sep and i < len(pieces) - 1:
                yield "delta", {"text": piece.sep, "segment": i}
        if plan.split.trail:
            yield "delta", {"text": plan.split.trail, "segment": len(pieces) - 1}
        yield "done", self._finish(plan, plan.split, outs).model_dump()

    async def _stream_piece(
        self,
        plan: Plan,
        text: str,
        job: GenerationRequest,
        rid: str,
        i: int,
        outs: list[PieceOutput],
    ) -> AsyncIterator[Event]:
        """One piece's deltas, cleaned as they come; its result is appended to ``outs``. A
        blank loop (nothing was sent) is decoded again and streamed in its place."""
        first: PieceOutput | None = None
        for attempt, attempt_id in ((job, rid), (unstuck(job), f"{rid}-u")):
            last: GenerationChunk | None = None
            cleaner = self.family.stream_cleaner(text)
            async for chunk in self.generate_stream(attempt, attempt_id):
                last = chunk
                if delta := cleaner.feed(chunk.text):
                    yield "delta", {"text": delta, "segment": i}
            out = self._streamed_piece(plan, text, attempt, last, cleaner.result())
            if delta := cleaner.finish():
                yield "delta", {"text": delta, "segment": i}
            out = first.then(out) if first else out
            if first or not out.stuck:
                outs.append(out)
                return
            first = out

    def _finish(self, plan: Plan, split: Split, outs: list[PieceOutput]) -> TranslateResponse:
        """Reassembles the pieces, fills the cache and makes the response."""
        done = CachedTranslation(
            split.join([o.text for o in outs]), len(outs), any(o.truncated for o in outs)
        )
        if all(o.text.strip() for o in outs):  # a piece left empty is a failure, not kept
            self._store(plan, done)
        usage = Usage(
            input_tokens=sum(o.input_tokens for o in outs),
            output_tokens=sum(o.output_tokens for o in outs),
        )
        return self._response(plan, done.translation, usage, done, cached=False)

    def _streamed_piece(
        self,
        plan: Plan,
        text: str,
        job: GenerationRequest,
        last: GenerationChunk | None,
        cleaned: str,
    ) -> PieceOutput:
        if last is None or not last.finished:
            raise EngineUnavailable("The engine ended the stream early.", retry_after_s=1)
        self._record(plan, text, last.input_tokens, last.output_tokens)
        truncated = job.ran_out(last.finish_reason)
        return PieceOutput(cleaned, last.input_tokens, last.output_tokens, truncated)

    def _start_event(self, plan: Plan) -> dict[str, Any]:
        d = plan.detected
        return {
            "source_lang": plan.source.code,
            "target_lang": plan.target.code,
            "detected_source_lang": d.code if d else None,
            "detection_confidence": d.confidence if d else None,
            "segments": plan.cached.segments if plan.cached else plan.engine_requests,
            "cached": plan.cached is not None,
        }

    def _record(
        self,
        plan: Plan,
        text: str,
        input_tokens: int,
        output_tokens: int,
        queue_s: float | None = None,
        ttft_s: float | None = None,
    ) -> None:
        pair = (plan.source.code, plan.target.code)
        self.metrics.translation(pair, len(text), input_tokens, output_tokens, queue_s, ttft_s)

    def _store(self, plan: Plan, done: CachedTranslation) -> None:
        """Keeps a complete translation (``CachedTranslation.storable``) for its owner."""
        if self.cache is not None and plan.cache_key is not None:
            self.cache.put(plan.cache_key, done, plan.owner)

    def _response(
        self,
        plan: Plan,
        translation: str,
        usage: Usage,
        done: CachedTranslation,
        cached: bool = True,
    ) -> TranslateResponse:
        d = plan.detected
        return TranslateResponse(
            translation=translation,
            source_lang=plan.source.code,
            target_lang=plan.target.code,
            model=self.config.served_model_name,
            usage=usage,
            detected_source_lang=d.code if d else None,
            detection_confidence=d.confidence if d else None,
            cached=cached,
            segments=done.segments,
            truncated=done.truncated,
            markup=done.markup,
        )


def _piece_id(request_id: str, index: int, count: int) -> str:
    return request_id if count == 1 else f"{request_id}-p{index}"
