"""vLLM's ``AsyncLLM`` in-process under a closed loop of 25 users, for the engine core's GC log.

    VLLM_GC_DEBUG=1 VLLM_CPU_KVCACHE_SPACE=1 python -m bench.gcwatch.engine_loop MODEL SECONDS

Each user asks for 10-200 forced tokens (``ignore_eos``, final output only), as the
journey's variable workload does; the engine has the production sizes (24 places, 8,192
tokens a step). vLLM logs each collection of its engine core (``GC took ... ms``) and this
prints the requests per second.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
import uuid


async def main(model: str, seconds: float) -> None:
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine.async_llm import AsyncLLM

    args = AsyncEngineArgs(
        model=model, max_num_seqs=24, max_num_batched_tokens=8192, gpu_memory_utilization=0.2,
        enforce_eager=True, dtype="float32", max_model_len=1024,
    )  # fmt: skip
    llm = AsyncLLM.from_engine_args(args)
    rnd, done, end = random.Random(0), 0, time.monotonic() + seconds

    async def user() -> None:
        nonlocal done
        while time.monotonic() < end:
            n = rnd.randint(10, 200)
            params = SamplingParams(
                max_tokens=n, min_tokens=n, ignore_eos=True,
                output_kind=RequestOutputKind.FINAL_ONLY,
            )  # fmt: skip
            prompt = TokensPrompt(prompt_token_ids=[rnd.randint(5, 200) for _ in range(n + 30)])
            async for _ in llm.generate(prompt, params, uuid.uuid4().hex):
                pass
            done += 1

    began = time.monotonic()
    await asyncio.gather(*(user() for _ in range(25)))
    print("RPS", round(done / (time.monotonic() - began), 2), flush=True)
    llm.shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
