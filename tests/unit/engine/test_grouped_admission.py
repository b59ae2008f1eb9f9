"""Grouped admission's rule and its engine arguments (the scheduler itself runs against
vLLM's own in tests/integration/test_grouped_admission.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from serve_app.core.config import EngineConfig
from serve_app.engine.grouped_admission import (
    CONFIG_KEY,
    SCHEDULER,
    AdmissionSettings,
    engine_args,
    grouped_admission_scheduler,
    holds,
    mixed_steps_graphed,
    streams,
)

FOUR = AdmissionSettings(group=4, max_hold_steps=8)


@pytest.mark.parametrize(
    ("free", "waiting", "running", "held", "expected"),
    [
        (1, 5, 23, 0, True),  # one place free, many wait: hold for more places
        (3, 1, 21, 0, True),  # fewer wait than the group: their followers are on the way
        (4, 5, 20, 0, False),  # a group's worth of places: admit
        (10, 5, 14, 0, False),
        (0, 5, 24, 0, False),  # no place at all: nothing to hold (vLLM admits nobody)
        (1, 0, 23, 0, False),  # nobody waits
        (1, 5, 0, 0, False),  # an idle engine admits at once
        (1, 5, 23, 7, True),
        (1, 5, 23, 8, False),  # held max_hold_steps steps: admit
    ],
)
def test_hold_rule(free: int, waiting: int, running: int, held: int, expected: bool) -> None:
    assert holds(FOUR, free, waiting, running, held) is expected


def test_a_group_of_one_never_holds() -> None:
    one = AdmissionSettings(group=1, max_hold_steps=8)
    assert not any(holds(one, free, 5, 23, 0) for free in range(25))


def test_engine_args_only_for_a_group() -> None:
    assert engine_args(AdmissionSettings(), {"x": 1}) == {}
    args = engine_args(FOUR, {"x": 1})
    assert args["scheduler_cls"] == SCHEDULER
    assert args["additional_config"] == {
        "x": 1,
        CONFIG_KEY: {"group": 4, "max_hold_steps": 8, "full_graph_group": 1},
    }
    # A group only where mixed steps are full graphs still needs the scheduler.
    assert engine_args(AdmissionSettings(full_graph_group=3), {})["scheduler_cls"] == SCHEDULER


def _engine(mode_name: str | None) -> object:
    """A vLLM config as the scheduler sees it, with vLLM's own CUDAGraphMode resolved."""
    from types import SimpleNamespace

    from vllm.config.compilation import CUDAGraphMode

    mode = None if mode_name is None else CUDAGraphMode[mode_name]
    return SimpleNamespace(compilation_config=SimpleNamespace(cudagraph_mode=mode))


@pytest.mark.parametrize(
    ("mode", "graphed"),
    [
        ("FULL", True),  # FA3 on Hopper: every step one graph
        ("FULL_AND_PIECEWISE", False),  # vLLM's default: mixed steps piecewise
        ("FULL_DECODE_ONLY", False),
        ("PIECEWISE", False),
        ("NONE", False),  # eager, and the CPU engine
        (None, False),
    ],
)
def test_mixed_steps_graphed_reads_vllms_resolved_mode(mode: str | None, graphed: bool) -> None:
    assert mixed_steps_graphed(_engine(mode)) is graphed


def test_each_engine_gets_the_group_for_its_graphs() -> None:
    """FULL asked on a GPU whose attention backend falls back to FULL_AND_PIECEWISE keeps
    the group: the scheduler reads the mode vLLM resolved, not the one configured."""
    asked = AdmissionSettings(group=4, max_hold_steps=8, full_graph_group=1)
    assert asked.for_engine(_engine("FULL")).group == 1
    assert asked.for_engine(_engine("FULL_AND_PIECEWISE")).group == 4
    assert asked.for_engine(_engine("NONE")).group == 4
    assert asked.for_engine(object()).group == 4  # no compilation config: as configured
    full_four = AdmissionSettings(group=1, full_graph_group=4)
    assert full_four.for_engine(_engine("FULL")).group == 4


def test_scheduler_path_names_the_factory() -> None:
    module, _, name = SCHEDULER.rpartition(".")
    assert __import__(module, fromlist=[name]).grouped_admission_scheduler is (
        grouped_admission_scheduler
    )


def test_serving_adds_the_scheduler_but_a_peer_gets_vllm_as_shipped() -> None:
    config = EngineConfig(
        admission_group=4,
        admission_max_hold_steps=6,
        extra_engine_args={"additional_config": {"other": True}},
    )
    serving = config.serving_kwargs()
    assert serving["scheduler_cls"] == SCHEDULER
    assert serving["additional_config"] == {
        "other": True,
        CONFIG_KEY: {"group": 4, "max_hold_steps": 6, "full_graph_group": 1},
    }
    peer = config.engine_kwargs()  # what `vllm serve` and the raw engine get in the bench
    assert "scheduler_cls" not in peer
    assert peer["additional_config"] == {"other": True}
    assert "scheduler_cls" not in EngineConfig().serving_kwargs()


@pytest.mark.parametrize("bad", [{"group": 0}, {"max_hold_steps": -1}, {"group": "x"}, {"y": 1}])
def test_settings_are_validated(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        AdmissionSettings.model_validate(bad)


@pytest.mark.parametrize(
    "field", ["admission_group", "admission_max_hold_steps", "admission_group_full_graphs"]
)
def test_config_bounds(field: str) -> None:
    with pytest.raises(ValidationError):
        EngineConfig(**{field: -1})  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        EngineConfig(**{field: 10**9})  # type: ignore[arg-type]


def test_only_a_whole_answer_can_be_held() -> None:
    """What the scheduler asks of each waiting request before it holds a step."""
    from types import SimpleNamespace

    from vllm.sampling_params import RequestOutputKind

    def request(kind: RequestOutputKind | None) -> SimpleNamespace:
        params = None if kind is None else SimpleNamespace(output_kind=kind)
        return SimpleNamespace(sampling_params=params)

    assert not streams(request(RequestOutputKind.FINAL_ONLY))
    assert streams(request(RequestOutputKind.DELTA))
    assert streams(request(RequestOutputKind.CUMULATIVE))
    assert not streams(request(None))  # pooling: no tokens to stream
