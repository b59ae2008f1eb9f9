"""Shared fixtures; tests are marked by tier from their folder (unit, integration, e2e)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = Path(str(item.fspath)).parent.name
        if tier in {"unit", "integration", "e2e", "bench"}:
            item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight Qwen2 model with a ChatML template, built locally."""
    from serve_app.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))
