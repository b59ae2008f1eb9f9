"""What one decoding of a piece of text gave, and the second decoding of a degenerate one.

A piece whose output ran to the token limit and cleans to nothing is a degenerate loop: a
model repeating a newline or a space until it was cut off (random weights do it on their
first token; real models now and then). Answering it as an empty translation would look
like success, so the piece is decoded once more with a frequency penalty, which breaks such
loops (``unstuck``), and the second answer is used (``PieceOutput.then``). ``gather_all``
runs the pieces of a text (or the texts of a batch) together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from serve_app.engine.protocol import GenerationRequest

# Lowers a generated token's logit by this much per earlier occurrence. vLLM applies it, as
# OpenAI defines it, to generated tokens only, so words of the source can still be copied.
UNSTICK_FREQUENCY_PENALTY = 1.0

T = TypeVar("T")


@dataclass(frozen=True)
class PieceOutput:
    """A piece's cleaned translation; ``truncated`` if it ran to its token limit."""

    text: str
    input_tokens: int
    output_tokens: int
    truncated: bool = False

    @property
    def stuck(self) -> bool:
        """Ran to the token limit and left nothing once cleaned: a degenerate loop."""
        return self.truncated and not self.text

    def then(self, retry: PieceOutput) -> PieceOutput:
        """``retry``'s answer, with the tokens of both decodings counted."""
        return PieceOutput(
            retry.text,
            self.input_tokens + retry.input_tokens,
            self.output_tokens + retry.output_tokens,
            retry.truncated,
        )


def unstuck(job: GenerationRequest) -> GenerationRequest:
    """``job`` decoded with a frequency penalty that breaks a degenerate loop."""
    return replace(job, frequency_penalty=max(job.frequency_penalty, UNSTICK_FREQUENCY_PENALTY))


async def gather_all(coros: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Runs all; on the first failure cancels the rest (aborting them) and raises it."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(c) for c in coros]
    except BaseExceptionGroup as group_error:
        raise group_error.exceptions[0] from None
    return [t.result() for t in tasks]
