"""The OpenAI chat API's request and response shapes, the subset this service serves.

Requests ignore fields they do not know, as OpenAI-compatible servers (vLLM's included) do:
clients send many optional ones (``user``, ``store``, ``metadata``...). ``seed`` and
``logit_bias`` change the answer and are followed, as vLLM follows them. Fields that would
change the answer in a way this server cannot follow (tools, logprobs, non-text content,
structured output) are refused with a 400 rather than silently dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

# OpenAI caps ``stop`` at 4 sequences; ``n`` is capped lower than OpenAI's 128: each choice is
# one engine request, admitted like a batch item.
MAX_STOP = 4
MAX_CHOICES = 8
# OpenAI's bounds of a bias; vLLM clamps to them, OpenAI refuses past them (as here). More
# biased tokens than OpenAI takes (1,024) would only make each engine step slower.
MAX_BIAS = 100.0
MAX_BIASED_TOKENS = 1024
# A seed is a signed 64-bit integer (vLLM's bounds); a larger one reached the engine.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def null_as(default: object) -> BeforeValidator:
    """OpenAI's nullable parameters (``stream``, ``n``, ``include_usage``: "boolean or
    null") read ``null`` as their default, as OpenAI and vLLM do; it was a 400 here."""
    return BeforeValidator(lambda value: default if value is None else value)


# ``stream``: ``null`` is false.
NullableFlag = Annotated[bool, null_as(False)]
# OpenAI's words for ``stream_options`` sent without ``stream`` (vLLM: "Stream options can
# only be defined when `stream=True`."): it was silently ignored here.
STREAM_OPTIONS_WITHOUT_STREAM = (
    "The 'stream_options' parameter is only allowed when 'stream' is enabled."
)


class _Lenient(BaseModel):
    # Numbers are finite: ``temperature: "NaN"`` (a string pydantic reads as a float) was
    # "Input should be less than or equal to 2"; it is "Input should be a finite number".
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class ContentPart(_Lenient):
    """A part of a message's content; only ``text`` parts are served."""

    type: str
    text: str | None = None

    @model_validator(mode="after")
    def _text_only(self) -> ContentPart:
        if self.type != "text" or self.text is None:
            raise ValueError(f"content parts of type '{self.type}' are not supported: text only")
        return self


def joined_parts(texts: Iterable[str | None]) -> str:
    """A message's text parts as one text, a line apart, as vLLM joins them for a chat
    template that takes a string (``renderers/chat_utils.py``): joined with nothing, the
    parts ``Good`` and ``morning`` reached the model as ``Goodmorning``."""
    return "\n".join(text or "" for text in texts)


class ChatMessage(_Lenient):
    role: Literal["system", "developer", "user", "assistant"]
    content: str | Annotated[list[ContentPart], Field(fail_fast=True)] | None = None
    name: str | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return joined_parts(part.text for part in self.content)
        return self.content or ""


class StreamOptions(_Lenient):
    include_usage: NullableFlag = False


class ChatCompletionRequest(_Lenient):
    model_config = ConfigDict(
        extra="ignore",
        allow_inf_nan=False,
        json_schema_extra={
            "examples": [
                {
                    "model": "tencent/HY-MT1.5-1.8B",
                    "messages": [
                        {"role": "system", "content": "Translate into German."},
                        {"role": "user", "content": "Hello, world!"},
                    ],
                }
            ]
        },
    )

    # Optional, as in vLLM: single-model clients (Subtitle Edit's LM Studio and "OpenAI
    # Compatible" translators) leave it out when none is configured.
    model: str | None = Field(
        None, description="The served model's name (GET /v1/models); left out: that one."
    )
    messages: list[ChatMessage] = Field(..., min_length=1, max_length=256, fail_fast=True)
    max_tokens: int | None = Field(None, ge=1, description="Most tokens to generate per choice.")
    max_completion_tokens: int | None = Field(None, ge=1, description="Same as max_tokens.")
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    n: Annotated[int, null_as(1)] = Field(
        1, ge=1, le=MAX_CHOICES, description="Choices to generate (sampled apart)."
    )
    stop: str | list[str] | None = Field(None, description=f"Up to {MAX_STOP} stop strings.")
    stream: NullableFlag = False
    stream_options: StreamOptions | None = None
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    seed: int | None = Field(
        None, ge=INT64_MIN, le=INT64_MAX, description="Sampling seed; choice i uses seed + i."
    )
    logit_bias: dict[str, float] | None = Field(
        None, description="Token id (as a string) to a bias from -100 to 100."
    )
    # Refused when set: this server cannot honour them.
    tools: list[Any] | None = None
    functions: list[Any] | None = None
    tool_choice: Any = None  # "none" and "auto" ask for nothing
    function_call: Any = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    response_format: dict[str, Any] | None = None
    modalities: list[str] | None = None  # ["text"] asks for nothing
    audio: Any = None

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: str | list[str] | None) -> list[str]:
        stops = [value] if isinstance(value, str) else list(value or [])
        if len(stops) > MAX_STOP:
            raise ValueError(f"at most {MAX_STOP} stop sequences")
        if any(not s for s in stops):
            raise ValueError("stop sequences must not be empty")
        return stops

    @field_validator("logit_bias")
    @classmethod
    def _biases(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        """Keys are token ids; ``{"hello": 5}`` reached vLLM, whose error was a 400 only
        by luck of its wording."""
        if not value:
            return None
        if len(value) > MAX_BIASED_TOKENS:
            raise ValueError(f"logit_bias holds at most {MAX_BIASED_TOKENS} tokens")
        for token, bias in value.items():
            if not (token.isascii() and token.isdigit()) or len(token) > 18:
                raise ValueError(f"logit_bias keys are token ids, not {token[:40]!r}")
            if not -MAX_BIAS <= bias <= MAX_BIAS:
                raise ValueError(f"logit_bias values are from {-MAX_BIAS:g} to {MAX_BIAS:g}")
        return value

    def biases(self) -> tuple[tuple[int, float], ...]:
        """``logit_bias`` as the engine takes it: (token id, bias) pairs."""
        return tuple((int(token), bias) for token, bias in (self.logit_bias or {}).items())

    @model_validator(mode="after")
    def _servable(self) -> ChatCompletionRequest:
        """What this server cannot follow is a 400, not silently dropped: ``tool_choice:
        "required"``, ``top_logprobs``, ``modalities: ["audio"]`` were answered with plain
        text as if unasked."""
        calls = (self.tool_choice, self.function_call)
        if self.tools or self.functions or any(c not in (None, "none", "auto") for c in calls):
            raise ValueError("tools and functions are not supported by this server")
        if self.logprobs or self.top_logprobs:
            raise ValueError("logprobs are not supported by this server")
        if self.audio is not None or set(self.modalities or ()) - {"text"}:
            raise ValueError("audio is not supported by this server: text only")
        if self.response_format and self.response_format.get("type", "text") != "text":
            raise ValueError("response_format: only type 'text' is supported")
        if self.stream_options is not None and not self.stream:  # as OpenAI (and vLLM) refuse
            raise ValueError(STREAM_OPTIONS_WITHOUT_STREAM)
        return self

    def stop_sequences(self) -> tuple[str, ...]:
        return tuple(self.stop or ())

    def output_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    def characters(self) -> int:
        return sum(len(m.text()) for m in self.messages)


FinishReason = Literal["stop", "length"]


class CompletionUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int
    message: AssistantMessage
    finish_reason: FinishReason
    logprobs: None = None


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage


class Delta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int
    delta: Delta
    finish_reason: FinishReason | None = None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: CompletionUsage | None = None


class Model(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "serve-app"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Model]
