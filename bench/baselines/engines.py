"""The seeds' engines, rebuilt for the journey: vLLM fed through worker processes and IPC queues.

Both plug into the project's ``TranslationService`` as a ``TranslationEngine``, so validation,
prompts, limits and the HTTP API are identical to the production path; only the way the
engine is fed differs, which is what the journey measures:

- ``QueueEngine(workers=N)``: N processes, each with a synchronous ``vllm.LLM``, take one
  request at a time from a multiprocessing queue (the GPU idles between requests and each
  request waits for the whole previous one).
- ``QueueEngine(batch=16, window_s=0.05)``: static batching: one worker collects up to 16
  requests or 50 ms, then generates them together (short texts wait for long ones).
They live in the benchmark code only, never in the production path.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing as mp
import queue
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from serve_app.core.config import EngineConfig
from serve_app.engine.protocol import EngineLoad, Generation, GenerationChunk, GenerationRequest
from serve_app.engine.tokenizer import PromptTokenizer
from serve_app.translation.families import Prompt

_READY = "__ready__"


def _collect(jobs: Any, batch: int, window_s: float) -> list[tuple[int, list[int], dict]]:
    """Blocks for one job, then gathers more until ``batch`` jobs or ``window_s`` passed."""
    first = jobs.get()
    if first is None:
        return []
    got, deadline = [first], time.monotonic() + window_s
    while len(got) < batch:
        try:
            job = jobs.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if job is None:
            jobs.put(None)  # let the loop see the stop signal next time
            break
        got.append(job)
    return got


def _worker(engine_kwargs: dict, jobs: Any, results: Any, batch: int, window_s: float) -> None:
    """A worker process: one synchronous vLLM engine fed from ``jobs``."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(**engine_kwargs)
    results.put((_READY, None))
    while True:
        got = _collect(jobs, batch, window_s)
        if not got:
            return
        prompts = [TokensPrompt(prompt_token_ids=ids) for _, ids, _ in got]
        params = [SamplingParams(**sp) for _, _, sp in got]
        outputs = llm.generate(prompts, params, use_tqdm=False)
        for (job_id, ids, _), out in zip(got, outputs, strict=True):
            c = out.outputs[0]
            results.put((job_id, (c.text, len(ids), len(c.token_ids), c.finish_reason)))


class QueueEngine:
    """``TranslationEngine`` over worker processes fed by multiprocessing queues."""

    def __init__(
        self, config: EngineConfig, workers: int = 1, batch: int = 1, window_s: float = 0.0
    ) -> None:
        self.config = config
        self.workers, self.batch, self.window_s = workers, batch, window_s
        ctx = mp.get_context("spawn")  # vLLM needs spawn; CUDA cannot be forked
        self._ctx = ctx
        self._jobs: Any = ctx.Queue()
        self._results: Any = ctx.Queue()
        self._procs: list[Any] = []
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tokens: PromptTokenizer | None = None

    async def start(self) -> None:
        from transformers import AutoTokenizer

        self._loop = asyncio.get_running_loop()
        name = self.config.tokenizer or self.config.model
        self._tokens = PromptTokenizer(AutoTokenizer.from_pretrained(name))
        kwargs = self.config.engine_kwargs()
        for _ in range(self.workers):
            args = (kwargs, self._jobs, self._results, self.batch, self.window_s)
            proc = self._ctx.Process(
                target=_worker, args=args
            )  # vLLM spawns children: not daemonic
            proc.start()
            self._procs.append(proc)
        for _ in range(self.workers):
            await asyncio.to_thread(self._wait_ready)
        threading.Thread(target=self._dispatch, daemon=True).start()

    def _wait_ready(self) -> None:
        """Blocks until a worker reports its engine loaded; fails if a worker died."""
        while True:
            try:
                tag, _ = self._results.get(timeout=1)
            except queue.Empty:
                if not all(p.is_alive() for p in self._procs):
                    raise RuntimeError("a worker process died while starting") from None
                continue
            if tag == _READY:
                return

    def _dispatch(self) -> None:
        """Hands each result from the IPC queue to the request waiting for it."""
        while True:
            job_id, result = self._results.get()
            if job_id is None:
                return
            future = self._pending.pop(job_id, None)
            if future is not None and self._loop is not None:
                self._loop.call_soon_threadsafe(_resolve, future, result)

    # Prompts are built and tokenized in the HTTP process, as the seeds' services did.
    def encode(self, prompt: Prompt) -> list[int]:
        assert self._tokens is not None
        return self._tokens.encode(prompt)

    def count_tokens(self, text: str) -> int:
        assert self._tokens is not None
        return self._tokens.count_tokens(text)

    def as_data(self, text: str) -> str:
        assert self._tokens is not None
        return self._tokens.as_data(text)

    def vocab_size(self) -> int:
        assert self._tokens is not None
        return self._tokens.vocab_size()

    async def generate(self, request: GenerationRequest, request_id: str) -> Generation:
        assert self._loop is not None
        job_id = next(self._ids)
        future: asyncio.Future[Any] = self._loop.create_future()
        self._pending[job_id] = future
        sampling = {
            "max_tokens": request.max_tokens,
            "min_tokens": request.min_tokens,
            "ignore_eos": request.ignore_eos,
            "temperature": request.temperature,
        }
        self._jobs.put((job_id, request.prompt_token_ids, sampling))
        text, n_in, n_out, finish = await future
        return Generation(text, n_in, n_out, finish)

    async def generate_stream(
        self, request: GenerationRequest, request_id: str
    ) -> AsyncIterator[GenerationChunk]:
        """The seeds' designs do not stream: the whole output comes as one chunk."""
        r = await self.generate(request, request_id)
        yield GenerationChunk(r.text, r.output_tokens, True, r.input_tokens, r.finish_reason)

    async def check_health(self) -> None:
        if not all(p.is_alive() for p in self._procs):
            raise RuntimeError("a worker process died")

    def num_unfinished_requests(self) -> int:
        return len(self._pending)

    def load(self) -> EngineLoad:
        # The workers' engines are out of reach: every pending request counts as running.
        return EngineLoad(running=len(self._pending))

    def shutdown(self) -> None:
        for _ in self._procs:
            self._jobs.put(None)
        self._results.put((None, None))
        for proc in self._procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()


def _resolve(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)
