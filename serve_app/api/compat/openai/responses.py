"""OpenAI's Responses API (``POST /v1/responses``), the text-in, text-out subset.

It exists because translation front ends moved to it: the Bob plugin of openai-translator
(``src/adapter/openai.ts``) sends ``{model, temperature, stream, instructions, input}`` to
``/v1/responses``, and its "OpenAI compatible" service requires a URL ending in
``/responses``; ``openai.responses.create`` does the same. A response is a chat completion
underneath: ``instructions`` become a system message and ``input`` (a string, or messages of
text) the messages, through the same validation, admission, accounting and engine
(``ChatServing``). The answer is one ``message`` output item with one ``output_text`` part;
streamed, OpenAI's typed events (``response.created``, ``response.output_text.delta`` ...
``response.completed``). Nothing is stored, so ``previous_response_id`` is refused, as are
tools and structured output. A response echoes the settings it was asked with
(``instructions``, ``metadata``, ``temperature``, ``top_p``, ``max_output_tokens``, ``user``,
``text``, ``truncation``) as OpenAI's do, and says ``store: false``: nothing is kept.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from serve_app.api.compat.openai.errors import openai_error
from serve_app.api.compat.openai.protocol import (
    ChatCompletion,
    ChatCompletionRequest,
    ChatMessage,
    CompletionUsage,
    FinishReason,
    NullableFlag,
    joined_parts,
)
from serve_app.api.errors import http_status
from serve_app.api.sse import format_event
from serve_app.core.errors import ServiceError

# One message is left for ``instructions`` under the chat request's cap of 256.
MAX_INPUT_MESSAGES = 255
TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
# What ``include`` asks for to get the output's logprobs.
LOGPROBS = "message.output_text.logprobs"
# OpenAI's bounds on ``metadata``: pairs, key and value characters.
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)  # finite numbers


class InputText(_Request):
    """A text part of an input message (``input_text``; ``output_text`` in an assistant
    turn); images, files and audio are refused."""

    type: str
    text: str | None = None

    @model_validator(mode="after")
    def _text_only(self) -> InputText:
        if self.type not in TEXT_PARTS or self.text is None:
            raise ValueError(f"content parts of type '{self.type}' are not supported: text only")
        return self


class InputMessage(_Request):
    """An input item; only messages (no tool calls or item references)."""

    type: Literal["message"] = "message"
    role: Literal["system", "developer", "user", "assistant"]
    content: str | Annotated[list[InputText], Field(fail_fast=True)]

    def as_chat(self) -> ChatMessage:
        if isinstance(self.content, str):
            return ChatMessage(role=self.role, content=self.content)
        return ChatMessage(role=self.role, content=joined_parts(p.text for p in self.content))


class TextFormat(_Request):
    type: str = "text"


class TextOptions(_Request):
    format: TextFormat | None = None


def _check_metadata(metadata: dict[str, str] | None) -> None:
    """OpenAI's limits on ``metadata``, which a response echoes."""
    if metadata is None:
        return
    if len(metadata) > MAX_METADATA_PAIRS:
        raise ValueError(f"metadata: at most {MAX_METADATA_PAIRS} key-value pairs")
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY_CHARS:
            raise ValueError(f"metadata: keys of at most {MAX_METADATA_KEY_CHARS} characters")
        if len(value) > MAX_METADATA_VALUE_CHARS:
            raise ValueError(f"metadata: values of at most {MAX_METADATA_VALUE_CHARS} characters")


class ResponseSettings(BaseModel):
    """What a response echoes of its request, as OpenAI's responses do: the settings asked
    (``None`` where left out: the served model's own sampling applies), ``store`` false
    (nothing is kept here), the text format and truncation this server answers with."""

    model_config = ConfigDict(frozen=True)

    instructions: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    user: str | None = None
    previous_response_id: None = None
    store: Literal[False] = False
    text: dict[str, Any] = Field(default_factory=lambda: {"format": {"type": "text"}})
    truncation: Literal["disabled"] = "disabled"


def _refuse_stored(previous_response_id: str | None, conversation: Any, prompt: Any) -> None:
    """Nothing is stored here, so nothing stored can be named."""
    if previous_response_id:
        raise ValueError("previous_response_id: this server stores no responses")
    if conversation:
        raise ValueError("conversation: this server stores no conversations")
    if prompt:
        raise ValueError("prompt: this server stores no prompt templates; send instructions")


class ResponsesRequest(_Request):
    model: str | None = Field(
        None, description="The served model's name (GET /v1/models); left out: that one."
    )
    input: str | Annotated[list[InputMessage], Field(fail_fast=True)] = Field(
        ..., description="The text, or messages of text (roles as in chat completions)."
    )
    instructions: str | None = Field(None, description="A system message before the input.")
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    stream: NullableFlag = False
    text: TextOptions | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    # Refused when set: this server cannot honour them (as chat completions refuse them).
    tools: list[Any] | None = None
    tool_choice: Any = None  # "none" and "auto" ask for nothing
    top_logprobs: int | None = None
    include: list[str] | None = None
    # State stored at OpenAI: a previous response, a conversation, a prompt template.
    previous_response_id: str | None = None
    conversation: Any = None
    prompt: Any = None

    @model_validator(mode="after")
    def _servable(self) -> ResponsesRequest:
        """What this server cannot follow is a 400. ``tool_choice: "required"``,
        ``top_logprobs``, ``include`` of logprobs, a ``conversation`` or a stored ``prompt``
        were answered as if unasked: text without the tool call, the logprobs, the
        conversation's earlier turns or the template's instructions."""
        if isinstance(self.input, list) and not 1 <= len(self.input) <= MAX_INPUT_MESSAGES:
            raise ValueError(f"input: 1 to {MAX_INPUT_MESSAGES} messages")
        if self.tools or self.tool_choice not in (None, "none", "auto"):
            raise ValueError("tools are not supported by this server")
        if self.top_logprobs or LOGPROBS in (self.include or ()):
            raise ValueError("logprobs are not supported by this server")
        _refuse_stored(self.previous_response_id, self.conversation, self.prompt)
        _check_metadata(self.metadata)
        if self.text and self.text.format and self.text.format.type != "text":
            raise ValueError("text.format: only type 'text' is supported")
        return self

    def settings(self) -> ResponseSettings:
        """What the response echoes of this request."""
        return ResponseSettings(
            instructions=self.instructions,
            metadata=self.metadata or {},
            temperature=self.temperature,
            top_p=self.top_p,
            max_output_tokens=self.max_output_tokens,
            user=self.user,
        )

    def as_chat(self) -> ChatCompletionRequest:
        """The chat completion this response is."""
        system = (
            [ChatMessage(role="system", content=self.instructions)] if self.instructions else []
        )
        if isinstance(self.input, str):
            inputs = [ChatMessage(role="user", content=self.input)]
        else:
            inputs = [m.as_chat() for m in self.input]
        return ChatCompletionRequest(
            model=self.model,
            messages=system + inputs,
            max_completion_tokens=self.max_output_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            stream=self.stream,
        )


class _Answer(BaseModel):
    model_config = ConfigDict(frozen=True)


class OutputText(_Answer):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[Any] = Field(default_factory=list)


ItemStatus = Literal["in_progress", "completed", "incomplete"]


class OutputMessage(_Answer):
    type: Literal["message"] = "message"
    id: str
    status: ItemStatus
    role: Literal["assistant"] = "assistant"
    content: list[OutputText]


class ResponseUsage(_Answer):
    input_tokens: int
    input_tokens_details: dict[str, int] = Field(default_factory=lambda: {"cached_tokens": 0})
    output_tokens: int
    output_tokens_details: dict[str, int] = Field(default_factory=lambda: {"reasoning_tokens": 0})
    total_tokens: int


class IncompleteDetails(_Answer):
    reason: Literal["max_output_tokens"] = "max_output_tokens"


class ResponseObject(ResponseSettings):
    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: ItemStatus
    error: None = None
    incomplete_details: IncompleteDetails | None = None
    model: str
    output: list[OutputMessage]
    parallel_tool_calls: bool = False
    tool_choice: Literal["none"] = "none"
    tools: list[Any] = Field(default_factory=list)
    usage: ResponseUsage | None = None


def response_id(request_id: str) -> str:
    return f"resp_{request_id}"


def message_id(request_id: str) -> str:
    return f"msg_{request_id}"


def _status(reason: FinishReason) -> Literal["completed", "incomplete"]:
    return "incomplete" if reason == "length" else "completed"


def _usage(usage: CompletionUsage) -> ResponseUsage:
    return ResponseUsage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
    )


def finished_response(
    request_id: str,
    model: str,
    created: int,
    text: str,
    reason: FinishReason,
    usage: CompletionUsage,
    settings: ResponseSettings,
) -> ResponseObject:
    """The response with its one message, once generated, echoing ``settings``."""
    status = _status(reason)
    message = OutputMessage(
        id=message_id(request_id), status=status, content=[OutputText(text=text)]
    )
    return ResponseObject(
        id=response_id(request_id),
        created_at=created,
        status=status,
        incomplete_details=IncompleteDetails() if status == "incomplete" else None,
        model=model,
        output=[message],
        usage=_usage(usage),
        **settings.model_dump(),
    )


def response_of(
    completion: ChatCompletion, request_id: str, settings: ResponseSettings
) -> ResponseObject:
    """A (one-choice) chat completion as a response echoing ``settings``."""
    (choice,) = completion.choices
    return finished_response(
        request_id,
        completion.model,
        completion.created,
        choice.message.content,
        choice.finish_reason,
        completion.usage,
        settings,
    )


class ResponseEventWriter:
    """A streamed response's events (``ChatServing.stream``'s writer): ``response.created``,
    the message item and its text part added, ``response.output_text.delta`` per chunk, the
    text, part and item done, then ``response.completed`` with the usage. An error once
    started is an ``error`` event (OpenAI's fields, and ``error`` in OpenAI's error shape, on
    which the ``openai`` client and Bob raise)."""

    def __init__(self, request_id: str, model: str, settings: ResponseSettings) -> None:
        self.request_id = request_id
        self.model = model
        self.settings = settings
        self.created = int(time.time())
        self.sequence = 0
        self.text: list[str] = []
        self.reason: FinishReason = "stop"

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return format_event(kind, data)

    def _where(self) -> dict[str, Any]:
        return {"item_id": message_id(self.request_id), "output_index": 0, "content_index": 0}

    def _message(self, status: ItemStatus) -> dict[str, Any]:
        """The message item: empty while in progress, with the text once done."""
        text = [] if status == "in_progress" else [OutputText(text="".join(self.text))]
        item = OutputMessage(id=message_id(self.request_id), status=status, content=text)
        return item.model_dump()

    def opening(self, choices: int) -> bytes:
        started = ResponseObject(
            id=response_id(self.request_id),
            created_at=self.created,
            status="in_progress",
            model=self.model,
            output=[],
            **self.settings.model_dump(),
        )
        part = OutputText(text="").model_dump()
        return (
            self._event("response.created", response=started.model_dump())
            + self._event(
                "response.output_item.added", output_index=0, item=self._message("in_progress")
            )
            + self._event("response.content_part.added", **self._where(), part=part)
        )

    def content(self, index: int, text: str) -> bytes:
        self.text.append(text)
        return self._event("response.output_text.delta", **self._where(), delta=text, logprobs=[])

    def finish(self, index: int, reason: FinishReason) -> bytes:
        self.reason = reason
        text = "".join(self.text)
        status = _status(reason)
        return (
            self._event("response.output_text.done", **self._where(), text=text, logprobs=[])
            + self._event(
                "response.content_part.done",
                **self._where(),
                part=OutputText(text=text).model_dump(),
            )
            + self._event("response.output_item.done", output_index=0, item=self._message(status))
        )

    def closing(self, usage: CompletionUsage) -> bytes:
        done = finished_response(
            self.request_id,
            self.model,
            self.created,
            "".join(self.text),
            self.reason,
            usage,
            self.settings,
        )
        return self._event(f"response.{done.status}", response=done.model_dump())

    def failure(self, exc: ServiceError) -> bytes:
        _, body = openai_error(http_status(exc), exc.code, exc.message)
        error = body["error"]
        return self._event(
            "error", code=error["code"], message=error["message"], param=None, error=error
        )
