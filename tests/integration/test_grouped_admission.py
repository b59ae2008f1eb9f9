"""Grouped admission (serve_app/engine/grouped_admission.py) on the installed vLLM: its
subclass of vLLM's own schedulers, driven step by step, and the real engine with it chosen
through ``scheduler_cls`` (the engine core process imports it by name)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from serve_app.core.config import EngineConfig
from serve_app.engine.grouped_admission import (
    CONFIG_KEY,
    SCHEDULER,
    grouped_admission_scheduler,
    scheduler_classes,
)
from serve_app.engine.protocol import GenerationRequest
from serve_app.engine.vllm import VLLMEngine
from serve_app.translation.families.base import RawPrompt
from tests.integration.test_vllm_engine import engine_config

SEQS = 8


def scheduler_parts(model: Path, group: int, hold: int) -> dict[str, Any]:
    """What vLLM's engine core hands its scheduler class: a config for ``SEQS`` sequences,
    a KV cache of plenty of blocks, the structured-output manager."""
    import torch
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    config = VllmConfig(
        scheduler_config=SchedulerConfig(
            max_num_seqs=SEQS,
            max_num_batched_tokens=2048,
            max_model_len=512,
            is_encoder_decoder=False,
        ),
        model_config=ModelConfig(model=str(model), max_model_len=512),
        cache_config=CacheConfig(block_size=16),
        additional_config={CONFIG_KEY: {"group": group, "max_hold_steps": hold}},
    )
    config.cache_config.num_gpu_blocks = 1000
    spec = FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=1, dtype=torch.float32)
    kv = KVCacheConfig(
        num_blocks=1000, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["l"], spec)]
    )
    return {
        "vllm_config": config,
        "kv_cache_config": kv,
        "structured_output_manager": StructuredOutputManager(config),
        "block_size": 16,
    }


def add_requests(scheduler: Any, n: int, stream: bool = False, first: int = 0) -> None:
    """``n`` requests answered whole, as the service sends non-streaming ones (FINAL_ONLY),
    or token by token (``stream``: DELTA, as /translate/stream and streamed chat)."""
    from vllm.sampling_params import RequestOutputKind, SamplingParams
    from vllm.v1.request import Request

    kind = RequestOutputKind.DELTA if stream else RequestOutputKind.FINAL_ONLY
    for i in range(first, first + n):
        params = SamplingParams(max_tokens=50, output_kind=kind)
        scheduler.add_request(Request(f"r{i}", [1, 2, 3, 4], params, None))


def finish(scheduler: Any, n: int) -> None:
    from vllm.v1.request import RequestStatus

    ids = [r.request_id for r in scheduler.running[:n]]
    scheduler.finish_requests(ids, RequestStatus.FINISHED_ABORTED)


def admitted(scheduler: Any) -> int:
    return len(scheduler.schedule().scheduled_new_reqs)


def vllm_classes() -> list[type]:
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler

    return [Scheduler, AsyncScheduler]


@pytest.mark.parametrize("kind", [0, 1], ids=["sync", "async"])
def test_admits_a_group_at_once_or_after_the_hold(tiny_model_dir: Path, kind: int) -> None:
    scheduler = scheduler_classes()[kind](**scheduler_parts(tiny_model_dir, group=4, hold=3))
    assert isinstance(scheduler, vllm_classes()[kind])
    add_requests(scheduler, 14)
    assert admitted(scheduler) == SEQS  # an idle engine fills its batch at once
    finish(scheduler, 1)
    assert [admitted(scheduler) for _ in range(3)] == [0, 0, 0]  # one free place: held
    assert admitted(scheduler) == 1  # held max_hold_steps: admitted
    finish(scheduler, 2)
    assert admitted(scheduler) == 0
    finish(scheduler, 2)
    assert admitted(scheduler) == 4  # a group's worth of places: four prefills in one step
    assert len(scheduler.waiting) == 14 - SEQS - 5
    finish(scheduler, 4)
    assert admitted(scheduler) == 1  # the last one waiting, with places to spare


def admitted_ids(scheduler: Any) -> list[str]:
    return [r.req_id for r in scheduler.schedule().scheduled_new_reqs]


@pytest.mark.parametrize("kind", [0, 1], ids=["sync", "async"])
def test_no_step_is_held_while_a_streaming_request_waits(tiny_model_dir: Path, kind: int) -> None:
    """A client reading tokens as they come waits for the first one: while a streaming
    request waits, each step admits as vLLM's own scheduler would (first come, first
    served here), and holding resumes once it runs."""
    scheduler = scheduler_classes()[kind](**scheduler_parts(tiny_model_dir, group=4, hold=8))
    add_requests(scheduler, SEQS + 2)
    assert admitted(scheduler) == SEQS
    finish(scheduler, 1)
    assert admitted_ids(scheduler) == []  # whole answers only: held
    add_requests(scheduler, 1, stream=True, first=100)
    steps = []
    for _ in range(3):
        steps.append(admitted_ids(scheduler))
        finish(scheduler, 1)
    assert steps == [["r8"], ["r9"], ["r100"]]  # one place a step, in arrival order
    add_requests(scheduler, 2, first=200)
    assert admitted_ids(scheduler) == []  # only whole answers wait: held again


def test_vllm_alone_admits_each_free_place_at_once(tiny_model_dir: Path) -> None:
    """The same steps with vLLM's own scheduler: what grouping changes."""
    scheduler = vllm_classes()[0](**scheduler_parts(tiny_model_dir, group=4, hold=3))
    add_requests(scheduler, 14)
    assert admitted(scheduler) == SEQS
    finish(scheduler, 1)
    assert admitted(scheduler) == 1


def test_the_factory_follows_the_engines_async_choice(tiny_model_dir: Path) -> None:
    parts = scheduler_parts(tiny_model_dir, group=4, hold=3)
    for use_async in (False, True):
        parts["vllm_config"].scheduler_config.async_scheduling = use_async
        scheduler = grouped_admission_scheduler(**parts)
        async_scheduler = vllm_classes()[1]
        assert isinstance(scheduler, async_scheduler) is use_async
        assert scheduler.admission.group == 4


def test_an_engine_with_full_graph_mixed_steps_takes_the_full_graph_group(
    tiny_model_dir: Path,
) -> None:
    """The scheduler reads the cudagraph mode vLLM resolved on its own config (the worker's
    fallback included): FULL gives the full-graph group, vLLM's default keeps the group."""
    from vllm.config.compilation import CUDAGraphMode

    for mode, group in ((CUDAGraphMode.FULL, 1), (CUDAGraphMode.FULL_AND_PIECEWISE, 4)):
        parts = scheduler_parts(tiny_model_dir, group=4, hold=8)
        parts["vllm_config"].compilation_config.cudagraph_mode = mode
        scheduler = grouped_admission_scheduler(**parts)
        assert scheduler.admission.group == group, mode
        add_requests(scheduler, SEQS + 2)
        assert admitted(scheduler) == SEQS
        finish(scheduler, 1)
        assert admitted(scheduler) == (1 if group == 1 else 0)  # held only with a group


async def test_the_engine_serves_every_request_with_grouped_admission(
    tiny_model_dir: Path,
) -> None:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    grouped = {"max_num_seqs": 4, "warmup_requests": 0, "admission_group": 3}
    settings = engine_config(tiny_model_dir).model_dump() | grouped
    engine = VLLMEngine(EngineConfig.model_validate(settings | {"admission_max_hold_steps": 4}))
    await engine.start()
    try:
        # What the engine core process was given (it imports the scheduler by this name).
        vllm_config = engine._llm.vllm_config
        assert vllm_config.scheduler_config.scheduler_cls == SCHEDULER
        assert vllm_config.additional_config[CONFIG_KEY] == {
            "group": 3,
            "max_hold_steps": 4,
            "full_graph_group": 1,
        }
        prompt = engine.encode(RawPrompt("Translate: the quick brown fox"))
        lengths = [5 + 3 * i for i in range(12)]
        jobs = [
            GenerationRequest(prompt_token_ids=prompt, max_tokens=n, min_tokens=n, ignore_eos=True)
            for n in lengths
        ]
        results = await asyncio.wait_for(
            asyncio.gather(*(engine.generate(j, f"g{i}") for i, j in enumerate(jobs))), 120
        )
    finally:
        engine.shutdown()
    assert [r.output_tokens for r in results] == lengths
