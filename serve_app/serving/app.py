"""The application builders: ``build_app`` is what ``serve_config.yaml``'s ``import_path`` names."""

from __future__ import annotations

from typing import Any

from ray.serve import Application

from serve_app.core.config import AppConfig
from serve_app.engine.vllm import VLLMEngine
from serve_app.serving.deployment import EngineFactory, TranslatorDeployment
from serve_app.store.deployment import StoreDeployment
from serve_app.store.factory import needs_deployment
from serve_app.translation.service import language_registry


def build_app(args: dict[str, Any]) -> Application:
    """Validates the YAML ``args`` once and binds the translator deployment to them.

    Invalid args fail here, when ``serve run`` builds the app, not in every replica.
    """
    config = AppConfig.model_validate(args or {})
    language_registry(config)
    return make_app(config)


def make_app(config: AppConfig, engine_cls: EngineFactory = VLLMEngine) -> Application:
    """The application for a validated config; tests pass another ``engine_cls``. A SQLite
    store comes with its one ``StoreDeployment``, whose handle every translator replica gets."""
    store = None
    if config.store is not None and needs_deployment(config.store):
        store = StoreDeployment.bind(config.store)  # type: ignore[attr-defined]
    return TranslatorDeployment.bind(  # type: ignore[attr-defined]
        config, engine_cls=engine_cls, store_handle=store
    )
