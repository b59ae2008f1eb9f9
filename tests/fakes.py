"""A deterministic fake engine for unit tests of the service and the API (no vLLM)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import Counter
from collections.abc import AsyncIterator, Callable

from serve_app.core.config import EngineConfig
from serve_app.engine.protocol import EngineLoad, Generation, GenerationChunk, GenerationRequest
from serve_app.engine.tokenizer import escape_special_tokens, special_token_escaper
from serve_app.engine.warmup import WARMUP_ID
from serve_app.translation.families import ChatPrompt, Prompt

FAKE_SPECIAL_TOKENS = special_token_escaper(["<|im_start|>", "<|im_end|>"])


def _content_text(content: str | list[dict[str, str]]) -> str:
    """A message's text: its content, or the texts of its structured entries."""
    if isinstance(content, str):
        return content
    return "\n".join(entry.get("text", "") for entry in content)


class FakeEngine:
    """Token ids are the prompt's characters; the "translation" is the prompt text back.

    ``hold`` (an Event) keeps generations pending until set, so tests control timing
    without sleeping. Cancelled request ids are recorded.
    """

    def __init__(self, config: EngineConfig | None = None) -> None:
        self.config = config
        self.started = False
        self.shut_down = False
        self.healthy = True
        self.hold: asyncio.Event | None = None
        self.fail_with: BaseException | None = None
        self.active: set[str] = set()
        self.cancelled: list[str] = []
        self.requests: list[GenerationRequest] = []
        # finish_reason "length" for prompts holding this marker (a translation cut short).
        self.truncate_marker: str | None = None
        # Prompts holding this marker (and not ``truncate_marker``) get a degenerate loop: a
        # newline repeated to the token limit, unless decoded with a frequency penalty while
        # ``blank_loop_cured`` (as a real model's loop breaks under one).
        self.blank_loop_marker: str | None = None
        self.blank_loop_cured = True
        # Streaming fails with ``fail_with`` after this many chunks (an error mid-stream).
        self.fail_after_chunks: int | None = None
        # The "translation" of a prompt's text; default: the prompt's text back.
        self.reply: Callable[[str], str] | None = None
        self.max_running: int | None = None  # beyond this, active requests count as waiting
        # At most ``slots`` generations run at once; the others wait and start in order of
        # (priority, arrival) as vLLM's "priority" scheduling, or of arrival only when
        # ``by_priority`` is off ("fcfs"). ``ran`` records the ids in the order they ran.
        self.slots: int | None = None
        self.by_priority = True
        self.ran: list[str] = []
        self.waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._running = 0
        self._arrivals = itertools.count()
        # The service's warm-up at start (``engine/warmup.py``) is answered at once and not
        # recorded, unless a test of the warm-up itself asks for it (``warmup_as_requests``).
        self.warmup_as_requests = False
        self.warmups = 0

    async def start(self) -> None:
        self.started = True

    def encode(self, prompt: Prompt) -> list[int]:
        if isinstance(prompt, ChatPrompt):
            text = "\n".join(_content_text(m["content"]) for m in prompt.messages)
        else:
            text = prompt.text
        return [ord(c) for c in text]

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def as_data(self, text: str) -> str:
        return escape_special_tokens(text, FAKE_SPECIAL_TOKENS)

    def vocab_size(self) -> int:
        return 0x110000  # token ids are characters

    async def _slot(self, priority: int) -> None:
        """Waits for a free slot (see ``slots``)."""
        if self.slots is None:
            return
        if self._running < self.slots and not self.waiting:
            self._running += 1
            return
        slot: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        rank = priority if self.by_priority else 0
        heapq.heappush(self.waiting, (rank, next(self._arrivals), slot))
        try:
            await slot
        except asyncio.CancelledError:
            if slot.done() and not slot.cancelled():
                self._free()  # handed a slot while being cancelled: pass it on
            raise

    def _free(self) -> None:
        if self.slots is None:
            return
        while self.waiting:
            _, _, slot = heapq.heappop(self.waiting)
            if not slot.done():
                slot.set_result(None)  # the slot passes to the next waiting request
                return
        self._running -= 1

    async def generate(self, request: GenerationRequest, request_id: str) -> Generation:
        if request_id.startswith(WARMUP_ID) and not self.warmup_as_requests:
            self.warmups += 1
            return Generation("", len(request.prompt_token_ids), request.max_tokens, "length")
        self.requests.append(request)
        self.active.add(request_id)
        try:
            await self._slot(request.priority)
        except asyncio.CancelledError:
            self.cancelled.append(request_id)
            self.active.discard(request_id)
            raise
        self.ran.append(request_id)
        try:
            if self.hold is not None:
                await self.hold.wait()
            if self.fail_with is not None:
                raise self.fail_with
            text, reason = self._output(request)
            out = request.max_tokens if self._looping(request) else min(3, request.max_tokens)
            return Generation(text, len(request.prompt_token_ids), out, reason)
        except asyncio.CancelledError:
            self.cancelled.append(request_id)
            raise
        finally:
            self.active.discard(request_id)
            self._free()

    def _finish_reason(self, prompt: str) -> str:
        marked = self.truncate_marker is not None and self.truncate_marker in prompt
        return "length" if marked else "stop"

    def _looping(self, request: GenerationRequest) -> bool:
        prompt = "".join(chr(i) for i in request.prompt_token_ids)
        if self.blank_loop_marker is None or self._finish_reason(prompt) == "length":
            return False
        cured = self.blank_loop_cured and request.frequency_penalty > 0
        return self.blank_loop_marker in prompt and not cured

    def _output(self, request: GenerationRequest) -> tuple[str, str]:
        """The fake translation of ``request`` and its finish reason."""
        if self._looping(request):
            return "\n" * request.max_tokens, "length"
        prompt = "".join(chr(i) for i in request.prompt_token_ids)
        text = self.reply(prompt) if self.reply is not None else prompt
        return text, self._finish_reason(prompt)

    async def generate_stream(
        self, request: GenerationRequest, request_id: str
    ) -> AsyncIterator[GenerationChunk]:
        """The fake translation in chunks of 4 characters."""
        self.requests.append(request)
        self.active.add(request_id)
        try:
            text, finish_reason = self._output(request)
            chunks = [text[i : i + 4] for i in range(0, len(text), 4)]
            for n, chunk in enumerate(chunks, 1):
                if self.hold is not None:
                    await self.hold.wait()
                if self.fail_after_chunks is not None and n > self.fail_after_chunks:
                    raise self.fail_with or RuntimeError("engine failed")
                last = n == len(chunks)
                reason = finish_reason if last else None
                yield GenerationChunk(chunk, n, last, len(request.prompt_token_ids), reason)
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            self.cancelled.append(request_id)
            raise
        finally:
            self.active.discard(request_id)

    async def check_health(self) -> None:
        if not self.healthy:
            raise RuntimeError("engine dead")

    def num_unfinished_requests(self) -> int:
        return len(self.active)

    def load(self) -> EngineLoad:
        active = len(self.active)
        running = active if self.max_running is None else min(active, self.max_running)
        return EngineLoad(running=running, waiting=active - running)

    def shutdown(self) -> None:
        self.shut_down = True


class RecordingMetrics:
    """Keeps what the service and the API record, for assertions."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, int, tuple[str, str]]] = []
        self.translations: list[tuple[tuple[str, str], int, int, int]] = []
        self.batches: list[int] = []
        self.rejections: list[str] = []
        self.loads: list[int] = []
        self.cache_lookups: list[bool] = []
        self.markup: Counter[str] = Counter()

    def request(self, endpoint: str, status: int, pair: tuple[str, str], seconds: float) -> None:
        assert seconds >= 0
        self.requests.append((endpoint, status, pair))

    def translation(
        self,
        pair: tuple[str, str],
        characters: int,
        input_tokens: int,
        output_tokens: int,
        queue_s: float | None,
        ttft_s: float | None,
    ) -> None:
        self.translations.append((pair, characters, input_tokens, output_tokens))

    def batch(self, size: int) -> None:
        self.batches.append(size)

    def rejected(self, reason: str) -> None:
        self.rejections.append(reason)

    def load(self, in_flight: int) -> None:
        self.loads.append(in_flight)

    def cache(self, hit: bool) -> None:
        self.cache_lookups.append(hit)

    def markup_segments(self, method: str, count: int) -> None:
        self.markup[method] += count
