"""``AppConfig.markup``: the defaults, and bad values refused at validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from serve_app.core.config import AppConfig
from serve_app.core.markup_config import MarkupConfig


def test_defaults_are_auto_with_a_window_that_can_fill() -> None:
    c = AppConfig().markup
    assert c == MarkupConfig()
    assert (c.method, c.window, c.min_attempts, c.max_failure_rate) == ("auto", 32, 16, 0.8)
    assert (c.probe_every, c.max_probe_every) == (16, 256)


def test_every_key_is_read() -> None:
    c = AppConfig.model_validate(
        {
            "markup": {
                "method": "structural",
                "window": 10,
                "min_attempts": 10,
                "max_failure_rate": 1,
                "probe_every": 2,
                "max_probe_every": 2,
            }
        }
    ).markup
    assert (c.method, c.window, c.min_attempts, c.max_failure_rate) == ("structural", 10, 10, 1)
    assert (c.probe_every, c.max_probe_every) == (2, 2)


@pytest.mark.parametrize(
    "markup",
    [
        {"method": "sometimes"},
        {"method": None},
        {"window": 0},
        {"window": 100_000},
        {"min_attempts": 0},
        {"window": 8, "min_attempts": 9},  # could never switch
        {"max_failure_rate": 0},
        {"max_failure_rate": 1.5},
        {"probe_every": 1},  # every segment a probe: auto would never save anything
        {"probe_every": 0},
        {"probe_every": 32, "max_probe_every": 16},  # the interval only grows
        {"max_probe_every": 20_000},
        {"windw": 8},
    ],
)
def test_bad_values_are_refused(markup: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        AppConfig.model_validate({"markup": markup})


def test_the_section_is_frozen() -> None:
    c = MarkupConfig()
    with pytest.raises(ValidationError):
        c.window = 3  # type: ignore[misc]
