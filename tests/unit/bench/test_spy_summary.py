"""bench.spy_summary: shares of a py-spy raw profile's samples per function, inclusive and
own, over all stacks or the ones holding a text; read from a real py-spy file's format."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from bench import spy_summary

pytestmark = pytest.mark.unit

# py-spy's raw format: frames outermost first, joined by ";", then the sample count.
MAIN = "thread (0x1);run_busy_loop (vllm/v1/engine/core.py:1363);step (vllm/v1/engine/core.py:"
SCHED = "schedule (vllm/v1/core/sched/scheduler.py:"
PROFILE = (
    f"{MAIN}590);{SCHED}200) 30\n"
    f"{MAIN}594);result (concurrent/futures/_base.py:451) 50\n"
    f"{MAIN}601);{SCHED}215) 10\n"
    "thread (0x2);process_output_sockets (vllm/v1/engine/core.py:1700) 10\n"
)


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    path = tmp_path / "engine_core.txt.gz"
    with gzip.open(path, "wt") as out:
        out.write(PROFILE)
    return path


def test_inclusive_and_own_shares_add_a_functions_lines(profile: Path) -> None:
    result = spy_summary.shares(spy_summary.read(profile))
    assert result["total"] == 100
    inclusive, own = result["inclusive"], result["own"]
    assert isinstance(inclusive, dict)
    assert isinstance(own, dict)
    # Lines 200 and 215 of schedule are one function; step holds every main-thread sample.
    assert inclusive["schedule (vllm/v1/core/sched/scheduler.py)"] == 40
    assert own["schedule (vllm/v1/core/sched/scheduler.py)"] == 40
    assert inclusive["step (vllm/v1/engine/core.py)"] == 90
    assert own["step (vllm/v1/engine/core.py)"] == 0
    assert inclusive["thread (0x2)"] == 10


def test_match_keeps_the_stacks_holding_the_text_as_shares_of_all(profile: Path) -> None:
    result = spy_summary.shares(spy_summary.read(profile), match="schedule")
    assert (result["total"], result["kept"]) == (100, 40)
    text = spy_summary.report(result, top=10)
    assert "samples 100, kept 40" in text
    assert " 40.0   40.0  schedule (vllm/v1/core/sched/scheduler.py)" in text
    assert "result (" not in text


def test_lines_that_are_not_stacks_are_passed_over(tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text("garbage\n" + "a (x.py:1);b (y.py:2) 3\n")
    assert spy_summary.read(path) == [(["a (x.py:1)", "b (y.py:2)"], 3)]
