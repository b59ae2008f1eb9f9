"""The engine's warm-up: a batch decoded at once before the replica is ready, with the
translations' sampling, so that vLLM compiles a full batch's kernels before the first users."""

from __future__ import annotations

import asyncio
import logging

import pytest

from serve_app.core.config import AppConfig, SamplingConfig
from serve_app.engine.warmup import LONG, SHORT, warm_up, warmup_requests
from serve_app.translation.families import make_prompt_family
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine

SAMPLING = SamplingConfig(temperature=0.7, top_p=0.6, top_k=20, repetition_penalty=1.05)


def test_the_batch_starts_at_sixteen_and_goes_on_at_nine() -> None:
    jobs = warmup_requests([1, 2, 3], SAMPLING, 16)
    lengths = [job.max_tokens for job in jobs]
    assert sorted(lengths) == [SHORT] * 7 + [LONG] * 9
    # Triton specializes a batch size that is a multiple of 16: both kinds of step are run.
    assert len(jobs) % 16 == 0
    assert lengths.count(LONG) % 16 != 0
    assert lengths.count(LONG) >= 8
    for job in jobs:
        assert (job.temperature, job.top_p, job.top_k) == (0.7, 0.6, 20)
        assert job.repetition_penalty == 1.05
        assert job.ignore_eos
        assert job.min_tokens == job.max_tokens
        assert job.prompt_token_ids == [1, 2, 3]


async def test_the_requests_are_in_the_engine_at_once() -> None:
    engine = FakeEngine()
    engine.warmup_as_requests = True
    engine.hold = asyncio.Event()
    task = asyncio.create_task(warm_up(engine, [5, 6], SAMPLING, 16))
    async with asyncio.timeout(5):
        while len(engine.active) < 16:  # one after another would never hold 16
            await asyncio.sleep(0.01)
    assert not task.done()
    engine.hold.set()
    done = await task
    assert len(done) == 16
    assert not engine.active
    assert all(rid.startswith("warmup-") for rid in engine.ran)


async def test_a_failed_warm_up_is_logged_and_the_replica_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = FakeEngine()
    engine.warmup_as_requests = True
    engine.fail_with = RuntimeError("kernel")
    with caplog.at_level(logging.WARNING, logger="ray.serve.translator"):
        assert await warm_up(engine, [5], SAMPLING, 4) == []
    assert "warm-up failed" in caplog.text


async def test_none_when_switched_off() -> None:
    engine = FakeEngine()
    assert await warm_up(engine, [5], SAMPLING, 0) == []
    assert engine.requests == []
    assert engine.warmups == 0


async def test_a_warm_up_that_hangs_is_given_up(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("serve_app.engine.warmup.TIMEOUT_S", 0.2)
    engine = FakeEngine()
    engine.warmup_as_requests = True
    engine.hold = asyncio.Event()  # never set
    with caplog.at_level(logging.WARNING, logger="ray.serve.translator"):
        assert await warm_up(engine, [5], SAMPLING, 4) == []
    assert "warm-up failed" in caplog.text
    assert len(engine.cancelled) == 4
    assert not engine.active


@pytest.mark.parametrize("requests", [16, 0])
async def test_the_service_warms_its_engine_up_before_it_is_ready(requests: int) -> None:
    config = AppConfig(engine={"model": "fake", "warmup_requests": requests})  # type: ignore[arg-type]
    engine = FakeEngine()
    engine.warmup_as_requests = True
    service = TranslationService(config, engine)
    await service.start()
    assert service.ready
    assert len(engine.requests) == requests
    family = make_prompt_family(config.prompt)
    for job in engine.requests:  # the family's prompt and sampling (hy_mt: top_k 20, ...)
        assert job.top_k == family.sampling.top_k
        assert job.top_p == family.sampling.top_p
        assert "".join(map(chr, job.prompt_token_ids)).count("The weather is fine today") == 1


async def test_the_replica_is_not_ready_while_its_engine_warms_up() -> None:
    config = AppConfig(engine={"model": "fake"})  # type: ignore[arg-type]
    engine = FakeEngine()
    engine.warmup_as_requests = True
    engine.hold = asyncio.Event()
    service = TranslationService(config, engine)
    starting = asyncio.create_task(service.start())
    async with asyncio.timeout(5):
        while len(engine.active) < config.engine.warmup_requests:
            await asyncio.sleep(0.01)
    assert not service.ready  # Ray Serve routes to the replica only after start() returns
    engine.hold.set()
    await starting
    assert service.ready
