"""API keys fail closed: a configured key source that yields no key on a node stops the
replica from starting (it once turned authentication off, silently); without any source
configured (the demo), keys are off and the replica starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from serve_app.api.app import create_app
from serve_app.api.security import load_api_keys
from serve_app.core.config import AppConfig, SecurityConfig
from serve_app.core.errors import KeysMissing
from serve_app.serving.deployment import TranslatorDeployment
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine


@pytest.mark.parametrize("value", [None, "", " , ,"])
def test_an_unset_or_empty_key_variable_is_refused(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("TRANSLATOR_KEYS", raising=False)
    else:
        monkeypatch.setenv("TRANSLATOR_KEYS", value)
    with pytest.raises(KeysMissing, match="TRANSLATOR_KEYS"):
        load_api_keys(SecurityConfig(api_keys_env="TRANSLATOR_KEYS"))


def test_a_key_file_of_comments_only_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("# keys go here\n\n   # none yet\n")
    with pytest.raises(KeysMissing, match="holds no key"):
        load_api_keys(SecurityConfig(api_keys_file=str(path)))


def test_each_configured_source_must_yield_keys(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A file with keys does not make up for a variable that is missing on this node."""
    monkeypatch.delenv("TRANSLATOR_KEYS", raising=False)
    path = tmp_path / "keys"
    path.write_text("file-key\n")
    with pytest.raises(KeysMissing):
        load_api_keys(SecurityConfig(api_keys_env="TRANSLATOR_KEYS", api_keys_file=str(path)))


def test_no_source_configured_means_keys_off() -> None:
    assert load_api_keys(SecurityConfig()) == []


async def test_the_app_is_not_built_without_its_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRANSLATOR_KEYS", raising=False)
    config = AppConfig.model_validate({"security": {"api_keys_env": "TRANSLATOR_KEYS"}})
    service = TranslationService(config, FakeEngine())
    with pytest.raises(KeysMissing):
        create_app(service)


async def test_the_replica_stops_before_its_engine_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TRANSLATOR_KEYS", raising=False)
    config = AppConfig.model_validate({"security": {"api_keys_env": "TRANSLATOR_KEYS"}})
    engines: list[FakeEngine] = []

    def engine_cls(_: object) -> FakeEngine:
        engines.append(FakeEngine())
        return engines[-1]

    cls = TranslatorDeployment.func_or_class
    replica = cls.__new__(cls)
    with pytest.raises(KeysMissing):
        await cls.__init__(replica, config, engine_cls=engine_cls)
    assert engines == []  # refused before any engine was made
