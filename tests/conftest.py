"""Shared fixtures; tests are marked by tier from their top folder (unit, integration, e2e,
bench); unit tests sit in folders that mirror the package's layers."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    # A run started in the background by a shell (`./test.sh` runs two tiers side by side)
    # inherits SIGINT ignored, and so would every server a test starts: the tests that stop
    # one with SIGINT (Ctrl-C, as users do) would wait out their kill timeouts instead.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).resolve().relative_to(ROOT / "tests").parts
        if len(parts) > 1 and parts[0] in {"unit", "integration", "e2e", "bench"}:
            item.add_marker(getattr(pytest.mark, parts[0]))
    # End-to-end modules that start a Ray cluster of their own stop every other one on the
    # machine (`ray stop --force`): they run before the shared session cluster (the `cluster`
    # fixture) starts, and the tests that use it run last. The sort is stable.
    items.sort(key=lambda item: "cluster" in getattr(item, "fixturenames", ()))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight Qwen2 model with a ChatML template, built locally."""
    from serve_app.tools.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))
