"""Warm-up: a new engine decodes a few requests before its replica takes traffic.

Why: vLLM compiles some GPU kernels only when a step first needs them. Its Triton top-k/top-p
sampler (vLLM 0.26) runs for steps of 8 or more sequences that sample with top-k or top-p, and
is compiled at the first such step, for each shape class of the batch (Triton specializes a
size that is a multiple of 16). On an H200 that compile held every request of the replica for
7.4 s, the first time its batch reached 8 sequences, and again on the second replica that the
autoscaler started (vLLM logs "Triton kernel JIT compilation during inference",
bench/results/2026-11-24-h200x2-ramp). A replica that scales up under load must not stall the
requests it was started for, so the engine decodes a batch first, with the sampling that
translations use: ``requests`` at once (16 by default, a multiple of 16), and some of them
ending two steps before the others, so that later steps run a batch of another size (9).
vLLM's own request counters include them; the service's metrics do not.
"""

from __future__ import annotations

import asyncio
import logging
import time

from serve_app.core.config import SamplingConfig
from serve_app.engine.protocol import Generation, GenerationRequest, TranslationEngine

logger = logging.getLogger("ray.serve.translator")

# Tokens each warm-up request decodes: the short ones end after SHORT, the others go on to
# LONG, so the batch shrinks from ``requests`` to the long ones' count part way.
SHORT, LONG = 2, 4
# A warm-up still running after this long is given up (its requests are aborted): an engine
# that cannot decode a few tokens in two minutes has other trouble, which its health shows.
TIMEOUT_S = 120.0
WARMUP_ID = "warmup-"  # engine request ids: warmup-0, warmup-1, ...


def warmup_requests(
    prompt_ids: list[int], sampling: SamplingConfig, requests: int
) -> list[GenerationRequest]:
    """``requests`` engine requests on ``prompt_ids`` decoded as ``sampling`` says, exactly
    LONG tokens for ``requests // 2 + 1`` of them and SHORT for the others: the batch starts
    at ``requests`` (16 by default) and goes on at about half (9: not a multiple of 16)."""
    forced = sampling.model_copy(update={"ignore_eos": True})
    long_count = requests // 2 + 1
    return [
        GenerationRequest.sampled(prompt_ids, LONG if i < long_count else SHORT, forced, ())
        for i in range(requests)
    ]


async def warm_up(
    engine: TranslationEngine, prompt_ids: list[int], sampling: SamplingConfig, requests: int
) -> list[Generation]:
    """Decodes ``warmup_requests`` at once on ``engine``; their generations (none if
    ``requests`` is 0 or the warm-up failed or took over ``TIMEOUT_S``: that is logged, not
    raised, since a replica that could not warm up still serves)."""
    if requests <= 0:
        return []
    began = time.monotonic()
    jobs = warmup_requests(prompt_ids, sampling, requests)
    try:
        async with asyncio.timeout(TIMEOUT_S):
            done = await asyncio.gather(
                *(engine.generate(job, f"{WARMUP_ID}{i}") for i, job in enumerate(jobs))
            )
    except Exception:
        logger.warning("engine warm-up failed; the replica serves without it", exc_info=True)
        return []
    took = time.monotonic() - began
    logger.info("engine warmed up: %d requests decoded at once in %.2f s", requests, took)
    return list(done)
