"""The OpenAI API's routes under ``/v1``: ``GET /v1/models``, ``GET /v1/models/{model}``,
``POST /v1/chat/completions`` and ``POST /v1/responses`` (``responses.py``; JSON, or
server-sent events with ``stream``), with OpenAI's
error shape for everything under ``/v1`` (``errors.py``). Keys come as
``Authorization: Bearer`` (the security middleware); quotas are charged the messages'
characters before any work, refunded if it fails."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from serve_app.api.compat.openai.errors import openai_error
from serve_app.api.compat.openai.protocol import (
    ChatCompletion,
    ChatCompletionRequest,
    Model,
    ModelList,
)
from serve_app.api.compat.openai.responses import (
    ResponseEventWriter,
    ResponseObject,
    ResponsesRequest,
    response_of,
)
from serve_app.api.compat.openai.serving import CHAT_PAIR, ChatServing, ChunkWriter, StreamWriter
from serve_app.api.errors import register_error_format
from serve_app.api.keys import charged
from serve_app.api.pacing import paced
from serve_app.api.sse import EventStreamResponse
from serve_app.translation.service import TranslationService

Answer = TypeVar("Answer", bound=BaseModel)

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": 'Error: {"error": {"message", "type", "param", "code"}}'}
    for code in (400, 401, 404, 413, 429, 503, 504)
}
_STREAM: dict[str, Any] = {
    "description": "With stream: text/event-stream of chat.completion.chunk objects, then "
    "data: [DONE].",
    "content": {"text/event-stream": {}},
}
_EVENTS: dict[str, Any] = {
    "description": "With stream: text/event-stream of typed events (response.created, "
    "response.output_text.delta, ..., response.completed).",
    "content": {"text/event-stream": {}},
}


def openai_router(app: FastAPI, service: TranslationService) -> None:
    """Adds the OpenAI endpoints and their error shape to ``app``."""
    chat = ChatServing(service)
    router = APIRouter(prefix="/v1", tags=["OpenAI API compatibility"], responses=_ERRORS)

    @router.get("/models", response_model=ModelList)
    async def models() -> ModelList:
        """The served model (its name is the ``model`` of chat completions)."""
        return chat.models()

    @router.get("/models/{model:path}", response_model=Model)
    async def model(model: str) -> Model:
        """One model, or 404."""
        return chat.model_info(model)

    async def serve(
        body: ChatCompletionRequest,
        request: Request,
        answer: Callable[[ChatCompletion, str], Answer],
        writer: Callable[[str], StreamWriter],
    ) -> Answer | StreamingResponse:
        """``body`` answered by ``answer`` of its completion, or streamed as ``writer``'s
        events; the messages' characters charged first, once for each of the ``n`` choices
        asked (each is a translation of them: charged once, ``n`` 50 was 50 for the price
        of one)."""
        request.state.pair = CHAT_PAIR
        request_id = request.state.request_id
        deadline = service.deadline_of(None)  # one for the encoding and the completion
        async with charged(request, body.characters() * body.n):
            jobs = await chat.prepare(body, deadline)
            if not body.stream:
                return answer(await chat.complete(jobs, request_id), request_id)
            chat.check_stream(jobs)
            produced = await chat.open_stream(jobs, request_id)
        events = chat.stream(produced, jobs, writer(request_id))
        return EventStreamResponse(paced(events, service.limits.stream_interval_s), produced)

    @router.post("/chat/completions", response_model=ChatCompletion, responses={200: _STREAM})
    async def chat_completions(
        body: ChatCompletionRequest, request: Request
    ) -> ChatCompletion | StreamingResponse:
        """The messages through the model's chat template; the reply is the model's
        answer (a translation, when the messages ask for one)."""
        usage = body.stream_options is not None and body.stream_options.include_usage
        return await serve(
            body,
            request,
            lambda completion, _: completion,
            lambda request_id: ChunkWriter(request_id, chat.model, usage),
        )

    @router.post("/responses", response_model=ResponseObject, responses={200: _EVENTS})
    async def responses(
        body: ResponsesRequest, request: Request
    ) -> ResponseObject | StreamingResponse:
        """``instructions`` and ``input`` as a chat completion's messages; the output is
        one message of text (Responses API, text only), echoing the request's settings."""
        settings = body.settings()
        return await serve(
            body.as_chat(),
            request,
            lambda completion, request_id: response_of(completion, request_id, settings),
            lambda request_id: ResponseEventWriter(request_id, chat.model, settings),
        )

    app.include_router(router)
    register_error_format(app, "/v1", openai_error)
