"""What the translation service needs from an engine, and what it gets back.

The service talks to ``TranslationEngine`` only (tests inject a fake); ``engine/vllm.py``
implements it over vLLM's ``AsyncLLM``. Nothing here imports vLLM.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from serve_app.core.config import SamplingConfig
    from serve_app.translation.families.base import Prompt


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt, already tokenized, and how to decode it."""

    prompt_token_ids: list[int]
    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    min_p: float = 0.0
    presence_penalty: float = 0.0
    # Strings that end the generation (not part of the returned text).
    stop: tuple[str, ...] = ()
    min_tokens: int = 0
    ignore_eos: bool = False
    stream: bool = False
    # vLLM's request priority: lower is scheduled first (with scheduling_policy "priority").
    priority: int = 0
    # Sampling seed (None: the engine's own randomness) and (token id, bias) pairs added to
    # the logits; both asked by OpenAI clients.
    seed: int | None = None
    logit_bias: tuple[tuple[int, float], ...] = ()

    @classmethod
    def sampled(
        cls,
        prompt_ids: list[int],
        max_tokens: int,
        s: SamplingConfig,
        stop: tuple[str, ...],
        priority: int = 0,
    ) -> GenerationRequest:
        """A request decoded as ``s`` says (its unset values: the engine's neutral ones);
        ``ignore_eos`` forces exactly ``max_tokens`` (benchmarks)."""
        return cls(
            prompt_token_ids=prompt_ids,
            max_tokens=max_tokens,
            temperature=s.temperature if s.temperature is not None else 0.0,
            top_p=s.top_p if s.top_p is not None else 1.0,
            top_k=s.top_k if s.top_k is not None else -1,
            repetition_penalty=s.repetition_penalty or 1.0,
            min_p=s.min_p or 0.0,
            presence_penalty=s.presence_penalty or 0.0,
            stop=stop,
            min_tokens=max_tokens if s.ignore_eos else 0,
            ignore_eos=s.ignore_eos,
            priority=priority,
        )

    def ran_out(self, finish_reason: str | None) -> bool:
        """Whether an answer that ended with ``finish_reason`` was cut at its token limit: a
        ``length`` finish, unless ``ignore_eos`` asked for exactly ``max_tokens`` (then every
        answer ends so by request: not a truncation to re-split, report or decode again)."""
        return finish_reason == "length" and not self.ignore_eos


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

    def vocab_size(self) -> int:
        """Token ids run from 0 below this (``logit_bias`` keys are checked against it)."""
        ...

    async def generate(self, request: GenerationRequest, request_id: str) -> Generation: ...

    def generate_stream(
        self, request: GenerationRequest, request_id: str
    ) -> AsyncIterator[GenerationChunk]: ...

    async def check_health(self) -> None: ...

    def num_unfinished_requests(self) -> int: ...

    def load(self) -> EngineLoad: ...

    def shutdown(self) -> None: ...


@dataclass(frozen=True)
class EngineLoad:
    """Requests inside one engine: being decoded, and waiting for a slot in the batch."""

    running: int = 0
    waiting: int = 0

    @property
    def total(self) -> int:
        return self.running + self.waiting
