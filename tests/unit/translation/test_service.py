from __future__ import annotations

import asyncio

import pytest

from serve_app.core.config import AppConfig
from serve_app.core.errors import EngineStartupError, TextTooLong
from serve_app.core.schemas import TranslateRequest
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine


class SlowStartEngine(FakeEngine):
    async def start(self) -> None:
        await asyncio.Event().wait()


def request(text: str) -> TranslateRequest:
    return TranslateRequest(text=text, source_lang="en", target_lang="de")


async def started(args: dict) -> tuple[TranslationService, FakeEngine]:
    engine = FakeEngine()
    service = TranslationService(AppConfig.model_validate(args), engine)
    await service.start()
    return service, engine


async def test_output_budget_follows_input_length() -> None:
    service, engine = await started(
        {"limits": {"output_tokens_ratio": 2.0, "output_tokens_margin": 5}}
    )
    await service.translate(request("one two three"), "r")
    assert engine.requests[-1].max_tokens == 2 * 3 + 5


class CountingEngine(FakeEngine):
    def __init__(self) -> None:
        super().__init__()
        self.counted: list[str] = []

    def count_tokens(self, text: str) -> int:
        self.counted.append(text)
        return super().count_tokens(text)


async def test_each_text_is_tokenized_once() -> None:
    # Splitting counts the text; the output budget must reuse that count, not tokenize again.
    engine = CountingEngine()
    service = TranslationService(AppConfig.model_validate({}), engine)
    await service.start()
    await service.translate(request("one two three"), "r")
    assert engine.counted == ["one two three"]
    assert engine.requests[-1].max_tokens > 3


async def test_output_budget_capped_by_limit_and_context() -> None:
    service, engine = await started({"limits": {"max_output_tokens": 7}})
    await service.translate(request("a " * 100), "r")
    assert engine.requests[-1].max_tokens == 7
    # The fake's prompt has one token per character: the context leaves little room.
    service, engine = await started(
        {"engine": {"max_model_len": 200}, "limits": {"max_input_tokens": 100}}
    )
    await service.translate(request("a " * 50), "r")
    assert engine.requests[-1].max_tokens == 200 - len(engine.requests[-1].prompt_token_ids)
    with pytest.raises(TextTooLong, match="no room"):
        await service.translate(request("a " * 99), "r")


async def test_family_sampling_reaches_the_engine() -> None:
    service, engine = await started({"prompt": {"sampling": {"temperature": 0.2}}})
    await service.translate(request("hi"), "r")
    sent = engine.requests[-1]
    assert (sent.temperature, sent.top_p, sent.top_k, sent.repetition_penalty) == (
        0.2,
        0.6,
        20,
        1.05,
    )


async def test_chat_family_samples_as_qwen3s_card_asks() -> None:
    service, engine = await started(
        {"prompt": {"family": "chat", "sampling": {"presence_penalty": 1.5}}}
    )
    await service.translate(request("hi"), "r")
    sent = engine.requests[-1]
    assert (sent.temperature, sent.top_p, sent.top_k, sent.min_p, sent.presence_penalty) == (
        0.7,
        0.8,
        20,
        0.0,
        1.5,
    )
    assert sent.stop == ()


async def test_seed_x_stop_sequence_reaches_the_engine() -> None:
    service, engine = await started({"prompt": {"family": "seed_x"}})
    await service.translate(request("May the force be with you"), "r")
    assert engine.requests[-1].stop == ("[COT]",)
    await service.translate(request("Keep the [COT] marker"), "r2")
    assert engine.requests[-1].stop == ()


async def test_ignore_eos_forces_the_whole_output_budget() -> None:
    service, engine = await started(
        {
            "prompt": {"sampling": {"ignore_eos": True}},
            "limits": {"output_tokens_ratio": 1.0, "output_tokens_margin": 0},
        }
    )
    await service.translate(request("one two three four"), "r")
    sent = engine.requests[-1]
    assert (sent.min_tokens, sent.max_tokens, sent.ignore_eos) == (4, 4, True)
    service, engine = await started({})
    await service.translate(request("one two"), "r")
    assert (engine.requests[-1].min_tokens, engine.requests[-1].ignore_eos) == (0, False)


async def test_startup_timeout_fails_the_replica() -> None:
    config = AppConfig.model_validate({"engine": {"startup_timeout_s": 0.05}})
    service = TranslationService(config, SlowStartEngine())
    with pytest.raises(EngineStartupError, match="did not start within"):
        await service.start()
    assert not service.ready


def test_supported_languages_must_be_known_to_the_family() -> None:
    config = AppConfig.model_validate(
        {"prompt": {"family": "seed_x"}, "supported_languages": ["en", "yue"]}
    )
    with pytest.raises(ValueError, match="yue"):
        TranslationService(config, FakeEngine())


async def test_shutdown_stops_the_engine() -> None:
    service, engine = await started({})
    service.shutdown()
    assert engine.shut_down
    assert not service.ready
