"""HTML against plain text through the service on the CPU: does markup cost throughput?

``python -m bench.markup_ratio`` sends the ``html`` workload (social posts with mentions and
links, the ``variable`` workload's token counts) and the ``variable`` workload through the
service's own app (``create_app``: middlewares, routes, ``TranslationService``, the markup
path) at 25 concurrent users, and reports the ratio of their requests per second. The engine
is ``PacedEngine``: it answers each prompt's text back (well-formed, so the placeholder path
is taken) after decoding its tokens on a shared simulated accelerator, a fixed number of
tokens per second divided among the sequences in flight (processor sharing, as continuous
batching shares a GPU), calibrated by default to the H100 replica's measured rate (31 RPS of
~105-token texts at 25 users). Splitting a post into segments therefore buys no extra
capacity: the ratio shows whether the markup work (parsing, placeholders, a thread per
request, more engine requests) keeps up with the accelerator. With ``--instant`` the engine
answers at once, and the figures are the service's own CPU cost per request. With
``--lose-tags`` the engine drops every placeholder from its answers, as a random-weight model
does (each tagged segment then falls back, or goes structural first once the replica's
``markup.method: auto`` has seen it fail); ``--method`` sets ``markup.method``
(``placeholders`` is the behaviour before the method was chosen per replica). Each run
reports the engine's work per request: engine requests, prompt characters, generated tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx

from bench.workloads import Item, make_workload
from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.engine.protocol import EngineLoad, Generation, GenerationChunk, GenerationRequest
from serve_app.translation.families import ChatPrompt, Prompt
from serve_app.translation.service import TranslationService

_PLACEHOLDER = re.compile(r"</?x\d+/?>")
# The H100 replica at 25 users (README): 31 RPS of texts of 10-200 tokens (~105 on average).
H100_TOKENS_PER_S = 31 * 105


class SharedDecoder:
    """Tokens decoded at ``tokens_per_s`` in all, shared equally by the sequences in flight."""

    def __init__(self, tokens_per_s: float, tick_s: float = 0.005) -> None:
        self.rate = tokens_per_s
        self.tick_s = tick_s
        self.active: dict[int, list[float | asyncio.Future[None]]] = {}
        self.ids = itertools.count()
        self.ticker: asyncio.Task[None] | None = None

    async def decode(self, tokens: int) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.active[next(self.ids)] = [float(tokens), done]
        if self.ticker is None or self.ticker.done():
            self.ticker = asyncio.create_task(self._tick())
        await done

    async def _tick(self) -> None:
        last = time.perf_counter()
        while self.active:
            await asyncio.sleep(self.tick_s)
            now = time.perf_counter()
            share, last = (now - last) * self.rate / len(self.active), now
            for key, entry in list(self.active.items()):
                left, done = entry
                assert isinstance(left, float)
                assert isinstance(done, asyncio.Future)
                entry[0] = left - share
                if left - share <= 0:
                    done.set_result(None)
                    del self.active[key]


class PacedEngine:
    """Answers a prompt's text (after its last blank line: the chat family's layout) back,
    once its words are decoded by ``decoder`` (None: at once). Token ids are characters."""

    def __init__(self, decoder: SharedDecoder | None, lose_tags: bool = False) -> None:
        self.decoder = decoder
        self.lose_tags = lose_tags
        self.in_flight = 0
        self.work = EngineWork()

    async def start(self) -> None:
        return None

    def encode(self, prompt: Prompt) -> list[int]:
        text = prompt.messages[-1]["content"] if isinstance(prompt, ChatPrompt) else prompt.text
        return [ord(c) for c in text]

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def as_data(self, text: str) -> str:
        return text

    def vocab_size(self) -> int:
        return 0x110000  # token ids are characters

    async def generate(self, request: GenerationRequest, request_id: str) -> Generation:
        text = "".join(map(chr, request.prompt_token_ids)).rsplit("\n\n", 1)[-1]
        if self.lose_tags:
            text = _PLACEHOLDER.sub("", text)
        # Words only: placeholder tags are not the post's text (the workloads' token counts).
        tokens = max(1, round(1.3 * len(_PLACEHOLDER.sub(" ", text).split())))
        self.work.add(len(request.prompt_token_ids), tokens)
        self.in_flight += 1
        try:
            if self.decoder is not None:
                await self.decoder.decode(tokens)
        finally:
            self.in_flight -= 1
        return Generation(text, len(request.prompt_token_ids), tokens, "stop")

    def generate_stream(
        self, request: GenerationRequest, request_id: str
    ) -> AsyncIterator[GenerationChunk]:
        raise NotImplementedError("the benchmark does not stream")

    async def check_health(self) -> None:
        return None

    def num_unfinished_requests(self) -> int:
        return self.in_flight

    def load(self) -> EngineLoad:
        return EngineLoad(running=self.in_flight)

    def shutdown(self) -> None:
        return None


@dataclass
class EngineWork:
    """What the engine was asked for: requests, prompt characters (the prompt's token ids
    are its characters here: templates included) and generated tokens (1.3 per word)."""

    requests: int = 0
    prompt_chars: int = 0
    output_tokens: int = 0

    def add(self, prompt_chars: int, output_tokens: int) -> None:
        self.requests += 1
        self.prompt_chars += prompt_chars
        self.output_tokens += output_tokens


@dataclass(frozen=True)
class Run:
    workload: str
    requests: int
    ok: int
    seconds: float
    fallback_segments: int
    structural_segments: int
    work: EngineWork

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def per_request(self) -> dict[str, float]:
        """Engine requests, prompt characters and generated tokens per request sent."""
        w = self.work
        n = self.requests
        return {
            "engine_requests": w.requests / n,
            "prompt_chars": w.prompt_chars / n,
            "output_tokens": w.output_tokens / n,
        }


@dataclass(frozen=True)
class Model:
    """How the simulated model treats tags, and the service's ``markup.method``."""

    lose_tags: bool = False
    method: str = "auto"


def _config(method: str = "auto") -> AppConfig:
    return AppConfig.model_validate(
        {
            "prompt": {"family": "chat", "sampling": {"temperature": 0}},
            "cache": {"enabled": False},  # every request does its work
            "limits": {"max_engine_requests": 10_000},
            "markup": {"method": method},
        }
    )


async def service(model: Model) -> tuple[TranslationService, PacedEngine]:
    """One service for every run of a comparison, as one stays up through a GPU journey: the
    replica's choice of markup method carries over from run to run."""
    engine = PacedEngine(None, model.lose_tags)
    svc = TranslationService(_config(model.method), engine)
    await svc.start()
    return svc, engine


async def measure(
    target: tuple[TranslationService, PacedEngine],
    kind: str,
    items: list[Item],
    users: int,
    rate: float | None,
) -> Run:
    """``items`` sent by ``users`` concurrent clients (each waits for its answer)."""
    svc, engine = target
    engine.decoder = SharedDecoder(rate) if rate else None
    engine.work = EngineWork()
    transport = httpx.ASGITransport(app=create_app(svc))
    queue, ok, fallback, structural = list(items), 0, 0, 0
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:

        async def user() -> None:
            nonlocal ok, fallback, structural
            while queue:
                item = queue.pop()
                body = {"text": item.text, "source_lang": item.source_lang}
                body |= {"target_lang": item.target_lang, "format": item.format}
                r = await client.post("/translate", json=body, timeout=600)
                ok += r.status_code == 200
                markup = r.json().get("markup") if r.status_code == 200 else None
                fallback += markup["fallback_segments"] if markup else 0
                structural += markup["structural_segments"] if markup else 0

        start = time.perf_counter()
        await asyncio.gather(*[user() for _ in range(users)])
        seconds = time.perf_counter() - start
    return Run(kind, len(items), ok, seconds, fallback, structural, engine.work)


async def compare(
    n: int,
    users: int = 25,
    rate: float | None = H100_TOKENS_PER_S,
    rounds: int = 2,
    model: Model = Model(),
) -> dict[str, object]:
    """Plain and HTML alternated ``rounds`` times on one service; the ratio of the best RPS
    of each."""
    plain, html = make_workload("variable", n, seed=1), make_workload("html", n, seed=1)
    runs: list[Run] = []
    target = await service(model)
    for _ in range(rounds):
        runs.append(await measure(target, "variable", plain, users, rate))
        runs.append(await measure(target, "html", html, users, rate))
    best = {k: max(r.rps for r in runs if r.workload == k) for k in ("variable", "html")}
    return {
        "users": users,
        "tokens_per_s": rate,
        "model": model.__dict__,
        "rps": best,
        "ratio": best["html"] / best["variable"],
        "us_per_request": {k: 1e6 / v for k, v in best.items()} if rate is None else None,
        "runs": [
            {k: v for k, v in r.__dict__.items() if k != "work"}
            | {"rps": r.rps, "per_request": r.per_request()}
            for r in runs
        ],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--users", type=int, default=25)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--tokens-per-s", type=float, default=H100_TOKENS_PER_S)
    p.add_argument("--instant", action="store_true", help="no decode time: the CPU cost alone")
    p.add_argument("--lose-tags", action="store_true", help="the engine drops placeholders")
    p.add_argument("--method", choices=["auto", "placeholders", "structural"], default="auto")
    ns = p.parse_args()
    rate = None if ns.instant else ns.tokens_per_s
    model = Model(ns.lose_tags, ns.method)
    result = asyncio.run(compare(ns.requests, ns.users, rate, ns.rounds, model))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
