"""A chat completion on the replica's engine: the messages rendered through the model's own
chat template (as vLLM's ``/v1/chat/completions`` does), generated ``n`` times, with the
service's admission control, deadline, metrics and character accounting.

Everything that can fail (model name, lengths, the template, the context) fails before any
engine work, as a 4xx. Rendering and tokenizing are proportional to the input, so they are
planned as the native API's texts are: after a check for free engine slots, a short input
(``limits.inline_plan_chars``) on the event loop, a longer one in the service's bounded
planning pool (``translation/planning.py``) under the request's deadline (one deadline,
the request's timeout from its arrival, for the encoding and the completion), refused at once
(503 ``overloaded``, Retry-After) while the characters waiting for that pool would pass its
bound. (Python's default executor, which they used, ran up to min(32, cores + 4) of them
at once, each fighting the event loop for the GIL.) A streamed completion's producer task
owns admission and the deadline (as ``TranslationService``'s streams do): closing the
stream cancels it, which aborts the engine requests.
"""

from __future__ import annotations

import functools
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Protocol

import jinja2

from serve_app.api.compat.openai.errors import openai_error
from serve_app.api.compat.openai.protocol import (
    INT64_MIN,
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Choice,
    ChunkChoice,
    CompletionUsage,
    Delta,
    FinishReason,
    Model,
    ModelList,
)
from serve_app.api.errors import http_status, internal_error_message
from serve_app.core.aio import produced
from serve_app.core.characters import ESCAPE_JOINER
from serve_app.core.errors import InvalidRequest, ModelNotFound, ServiceError, TextTooLong
from serve_app.engine.protocol import Generation, GenerationChunk, GenerationRequest
from serve_app.translation.families import ChatPrompt
from serve_app.translation.piece import gather_all
from serve_app.translation.planning import Budget
from serve_app.translation.service import TranslationService

# The metrics' language-pair labels of chat completions (they name no languages).
CHAT_PAIR = ("chat", "chat")

logger = logging.getLogger("ray.serve.translator")


@dataclass(frozen=True)
class Jobs:
    """A validated chat completion: one engine request per choice, and the request's
    deadline (``time.monotonic`` seconds), which its encoding already counted against."""

    requests: tuple[GenerationRequest, ...]
    prompt_tokens: int
    characters: int
    deadline: float
    # Whether a message holds a word joiner of its own: else every one in the answer is a
    # copy of the escaping's (``answer_text``).
    keeps_joiners: bool = False

    def answer_text(self, text: str) -> str:
        """The model's text without the word joiners the prompt's escaping put into the
        messages' control-token strings (``<|im_start|>`` is sent as ``<`` U+2060
        ``|im_start|>``, and a model copies it): the client never sent them. A single
        character, so a stream's chunks lose theirs one by one."""
        return text if self.keeps_joiners else text.replace(ESCAPE_JOINER, "")


def _choices(job: GenerationRequest, n: int, seed: int | None) -> tuple[GenerationRequest, ...]:
    """One engine request per choice. With a seed, choice i samples with ``seed + i``, as
    vLLM's parallel sampling seeds its children: the same seed gives the same choices, and
    the choices of one request differ."""
    if seed is None:
        return (job,) * n
    return tuple(replace(job, seed=_int64(seed + i)) for i in range(n))


def _int64(value: int) -> int:
    """``value`` wrapped into a signed 64-bit integer (the seed past INT64_MAX)."""
    return (value - INT64_MIN) % 2**64 + INT64_MIN


class ChatServing:
    def __init__(self, service: TranslationService) -> None:
        self.service = service
        self.model = service.config.served_model_name
        self.created = int(time.time())

    def models(self) -> ModelList:
        return ModelList(data=[Model(id=self.model, created=self.created)])

    def model_info(self, name: str) -> Model:
        self.check_model(name)
        return Model(id=self.model, created=self.created)

    def check_model(self, name: str | None) -> None:
        """404 for a model other than the served one; none named means the served one."""
        if name is not None and name != self.model:
            raise ModelNotFound(
                f"The model '{name}' does not exist; this server serves '{self.model}' "
                "(GET /v1/models)."
            )

    # -- validation -----------------------------------------------------------------------

    async def prepare(self, body: ChatCompletionRequest, deadline: float) -> Jobs:
        """The engine requests of ``body``, or the 4xx it deserves; encoding the messages
        and then the completion share ``deadline`` (the request's timeout from its arrival,
        ``TranslationService.deadline_of``): each had a timeout of its own, so a request
        could run for about twice ``request_timeout_s``."""
        self.check_model(body.model)
        if body.n > self.service.limits.max_engine_requests:
            raise InvalidRequest(
                f"n is too large: a replica holds {self.service.limits.max_engine_requests} "
                "engine requests at most."
            )
        characters = body.characters()
        limit = self.service.limits.max_text_chars
        if characters > limit:
            raise TextTooLong(f"The messages hold {characters} characters; at most {limit}.")
        self._check_biases(body)
        prompt_ids = await self._encoded(body, characters, deadline)
        max_tokens = self._max_tokens(body, len(prompt_ids))
        s = self.service.flow.sampling
        overrides = {"temperature": body.temperature, "top_p": body.top_p}
        overrides["presence_penalty"] = body.presence_penalty
        s = s.model_copy(update={k: v for k, v in overrides.items() if v is not None})
        job = GenerationRequest.sampled(prompt_ids, max_tokens, s, body.stop_sequences())
        job = replace(
            job,
            frequency_penalty=body.frequency_penalty or 0.0,
            stream=body.stream,
            logit_bias=body.biases(),
        )
        keeps = any(ESCAPE_JOINER in m.text() for m in body.messages)
        requests = _choices(job, body.n, body.seed)
        return Jobs(requests, len(prompt_ids), characters, deadline, keeps)

    def _check_biases(self, body: ChatCompletionRequest) -> None:
        """A 400 for a biased token past the model's vocabulary, before a stream opens (the
        engine's refusal would come as an error event of a 200 stream)."""
        biased = [token for token, _ in body.biases()]
        vocab = self.service.engine.vocab_size() if biased else 0
        if biased and max(biased) >= vocab:
            raise InvalidRequest(
                f"logit_bias names token {max(biased)}; this model's token ids run from 0 "
                f"to {vocab - 1}."
            )

    async def _encoded(
        self, body: ChatCompletionRequest, characters: int, deadline: float
    ) -> list[int]:
        """The prompt's token ids, planned as ``TranslationService._plan`` plans a text: on
        the loop up to ``limits.inline_plan_chars`` characters, else in the planning pool
        (503 while its queue is full) before ``deadline`` (504 beyond it)."""
        service = self.service
        service.admission.check(body.n)  # a free slot per choice, before any work
        if characters <= service.limits.inline_plan_chars:
            return self._encode(body)
        async with service.until(deadline) as budget:
            job = functools.partial(self._encode, body)
            (ids,) = await service.planner.run_all([job], [characters], budget)
        return ids

    def _encode(self, body: ChatCompletionRequest, budget: Budget | None = None) -> list[int]:
        """The prompt's token ids (in a planning thread, checked against ``budget`` first)."""
        if budget is not None:
            budget.check()
        engine = self.service.engine
        # Chat templates know no "developer" role (OpenAI's newer name for system).
        roles = [("system" if m.role == "developer" else m.role) for m in body.messages]
        messages = [
            {"role": role, "content": engine.as_data(m.text())}
            for role, m in zip(roles, body.messages, strict=True)
        ]
        kwargs = dict(self.service.config.prompt.chat_template_kwargs)
        try:
            return engine.encode(ChatPrompt(messages, kwargs))
        except (jinja2.TemplateError, ValueError, TypeError, KeyError) as exc:
            raise InvalidRequest(
                f"The model's chat template cannot render these messages: {exc}"
            ) from exc

    def _max_tokens(self, body: ChatCompletionRequest, prompt_tokens: int) -> int:
        context = self.service.config.engine.max_model_len or 1 << 30
        room = context - prompt_tokens
        if room < 1:
            raise TextTooLong(
                f"This model's maximum context length is {context} tokens; the messages "
                f"take {prompt_tokens}."
            )
        asked = body.output_limit()
        if asked is not None and asked > room:
            raise InvalidRequest(
                f"max_tokens is too large: the messages take {prompt_tokens} of the "
                f"{context} tokens of context, leaving {room}."
            )
        return min(asked or room, room, self.service.limits.max_output_tokens)

    # -- completions ----------------------------------------------------------------------

    async def complete(self, jobs: Jobs, request_id: str) -> ChatCompletion:
        service, n = self.service, len(jobs.requests)
        service.require_ready()
        engine_id = service.engine_id(request_id)  # unique, whatever the client's id
        with service.admission.admit(n):
            async with service.until(jobs.deadline):
                generations = await gather_all(
                    [
                        service.engine.generate(job, choice_id(engine_id, i, n))
                        for i, job in enumerate(jobs.requests)
                    ]
                )
        for i, g in enumerate(generations):
            self._record(jobs, i, g.input_tokens, g.output_tokens, g)
        service.characters += jobs.characters
        choices = [
            Choice(
                index=i,
                message=AssistantMessage(content=jobs.answer_text(g.text)),
                finish_reason=_reason(g),
            )
            for i, g in enumerate(generations)
        ]
        completion = sum(g.output_tokens for g in generations)
        return ChatCompletion(
            id=completion_id(request_id),
            created=int(time.time()),
            model=self.model,
            choices=choices,
            usage=_usage(jobs.prompt_tokens, completion),
        )

    def _record(
        self, jobs: Jobs, index: int, inputs: int, outputs: int, g: Generation | None = None
    ) -> None:
        chars = jobs.characters if index == 0 else 0  # the messages are counted once
        timings = (g.queue_s, g.ttft_s) if g is not None else (None, None)
        self.service.metrics.translation(CHAT_PAIR, chars, inputs, outputs, *timings)

    def check_stream(self, jobs: Jobs) -> None:
        """What refuses a stream before it starts (its status can still be a 503)."""
        self.service.require_ready()
        self.service.admission.check(len(jobs.requests))

    async def open_stream(self, jobs: Jobs, request_id: str) -> Produced:
        """The choices' chunks once they are admitted: a refusal (503 ``overloaded``, its
        Retry-After) is raised here, before a status is sent. Admitted only once the body
        was read, a storm of streams that all passed ``check_stream`` got 200s whose only
        event was the error, which no client retries. The caller closes what it gets."""
        chunks = self._produced(jobs, request_id)
        try:
            await anext(chunks)  # the producer's first item: its admission (or refusal)
        except BaseException:
            await chunks.aclose()
            raise
        return chunks

    async def stream(
        self, chunks: Produced, jobs: Jobs, writer: StreamWriter
    ) -> AsyncIterator[bytes]:
        """The completion (``chunks`` from ``open_stream``) as ``writer``'s server-sent
        events: its opening, content as generated, each choice's finish, its closing with
        the usage; an error once started is ``writer``'s failure event."""
        yield writer.opening(len(jobs.requests))
        completion = 0
        try:
            async with aclosing(chunks) as produced_chunks:
                async for index, chunk in produced_chunks:
                    if chunk is None:
                        continue
                    if text := jobs.answer_text(chunk.text):
                        yield writer.content(index, text)
                    if chunk.finished:
                        completion += chunk.output_tokens
                        self._record(jobs, index, chunk.input_tokens, chunk.output_tokens)
                        yield writer.finish(index, _reason(chunk))
            self.service.characters += jobs.characters
            yield writer.closing(_usage(jobs.prompt_tokens, completion))
        except ServiceError as exc:
            logger.warning("stream %s failed: %s (%s)", writer.request_id, exc.code, exc.message)
            yield writer.failure(exc)
        except Exception:  # a bug: the client still gets an error event, never a silent end
            logger.exception("stream %s failed unexpectedly", writer.request_id)
            yield writer.failure(internal_error(writer.request_id))

    def _produced(self, jobs: Jobs, request_id: str) -> Produced:
        """Every choice's chunks as they come, from a producer task that owns admission
        and the deadline (a deadline spanning this generator's yields would land in the
        consumer); the first item, without a chunk, says the choices are admitted."""
        service, n = self.service, len(jobs.requests)
        engine_id = service.engine_id(request_id)  # unique, whatever the client's id

        async def produce(put: Callable[[tuple[int, GenerationChunk | None]], None]) -> None:
            async def pump(index: int, job: GenerationRequest) -> None:
                ids = choice_id(engine_id, index, n)
                async for chunk in service.engine.generate_stream(job, ids):
                    put((index, chunk))

            with service.admission.admit(n):
                put((-1, None))
                async with service.until(jobs.deadline):
                    await gather_all([pump(i, job) for i, job in enumerate(jobs.requests)])

        return produced(produce)


# A stream's items: (choice index, chunk); the first, (-1, None), its admission.
Produced = AsyncGenerator[tuple[int, GenerationChunk | None], None]


class StreamWriter(Protocol):
    """The events of one streamed completion, in an API's own format."""

    request_id: str

    def opening(self, choices: int) -> bytes: ...

    def content(self, index: int, text: str) -> bytes: ...

    def finish(self, index: int, reason: FinishReason) -> bytes: ...

    def closing(self, usage: CompletionUsage) -> bytes: ...

    def failure(self, exc: ServiceError) -> bytes: ...


class ChunkWriter:
    """``chat.completion.chunk`` events of one completion: a role chunk per choice, content
    chunks, a finish chunk per choice, the usage chunk (``choices: []``) when asked, then
    ``[DONE]``; an error once started is a ``data: {"error": ...}`` event (the ``openai``
    client raises ``APIError`` on it)."""

    def __init__(self, request_id: str, model: str, include_usage: bool) -> None:
        self.request_id = request_id
        self.head = {"id": completion_id(request_id), "created": int(time.time()), "model": model}
        self.include_usage = include_usage

    def _event(self, chunk: ChatCompletionChunk) -> bytes:
        data = chunk.model_dump(exclude=None if self.include_usage else {"usage"})
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()

    def _choice(self, choice: ChunkChoice) -> bytes:
        return self._event(ChatCompletionChunk(**self.head, choices=[choice]))

    def opening(self, choices: int) -> bytes:
        return b"".join(
            self._choice(ChunkChoice(index=i, delta=Delta(role="assistant", content="")))
            for i in range(choices)
        )

    def content(self, index: int, text: str) -> bytes:
        return self._choice(ChunkChoice(index=index, delta=Delta(content=text)))

    def finish(self, index: int, reason: FinishReason) -> bytes:
        return self._choice(ChunkChoice(index=index, delta=Delta(), finish_reason=reason))

    def closing(self, usage: CompletionUsage) -> bytes:
        if not self.include_usage:
            return DONE
        return self._event(ChatCompletionChunk(**self.head, choices=[], usage=usage)) + DONE

    def failure(self, exc: ServiceError) -> bytes:
        return sse_error(exc) + DONE


DONE = b"data: [DONE]\n\n"


def sse_error(exc: ServiceError) -> bytes:
    """An error after the stream started, as vLLM and OpenAI send it (the ``openai``
    client raises ``APIError`` on it)."""
    _, body = openai_error(http_status(exc), exc.code, exc.message)
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()


def internal_error(request_id: str) -> ServiceError:
    """The error sent for an unexpected exception (its status 500, code ``internal_error``),
    as the native stream words it: the request id to quote, nothing of the exception."""
    return ServiceError(internal_error_message(request_id))


def _reason(out: Generation | GenerationChunk) -> FinishReason:
    return "length" if out.finish_reason == "length" else "stop"


def _usage(prompt: int, completion: int) -> CompletionUsage:
    return CompletionUsage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


def completion_id(request_id: str) -> str:
    return f"chatcmpl-{request_id or uuid.uuid4().hex}"


def choice_id(request_id: str, index: int, n: int) -> str:
    """The engine request id of choice ``index`` (the request id itself for one choice)."""
    return request_id if n == 1 else f"{request_id}-{index}"
