"""Prompt families: how each translation model wants to be asked, registered by name.

``FAMILIES`` is the one registry: the config's ``prompt.family`` must name one of them, and
``make_prompt_family`` builds the configured one; ``unservable_model`` names the models no
family can serve (the config refuses them). A new family is a ``PromptFamily`` subclass
in a module of its own, added to ``_ALL`` below (docs/development.md says how).
"""

from __future__ import annotations

from serve_app.core.config import PromptConfig
from serve_app.translation.families.base import (
    NO_OPTIONS,
    ChatPrompt,
    Prompt,
    PromptFamily,
    PromptOptions,
    RawPrompt,
    effective_sampling,
)
from serve_app.translation.families.chat import ChatPrompts
from serve_app.translation.families.hy_mt import HunyuanMtPrompts, HyMtPrompts, unservable_model
from serve_app.translation.families.seed_x import SeedXPrompts
from serve_app.translation.families.translategemma import TranslateGemmaPrompts

_ALL: tuple[type[PromptFamily], ...] = (
    HyMtPrompts,
    HunyuanMtPrompts,
    SeedXPrompts,
    TranslateGemmaPrompts,
    ChatPrompts,
)
FAMILIES: dict[str, type[PromptFamily]] = {cls.name: cls for cls in _ALL}


def make_prompt_family(config: PromptConfig) -> PromptFamily:
    """The configured family (the config has checked that it is registered)."""
    return FAMILIES[config.family].from_config(config)


__all__ = [
    "FAMILIES",
    "NO_OPTIONS",
    "ChatPrompt",
    "Prompt",
    "PromptFamily",
    "PromptOptions",
    "RawPrompt",
    "effective_sampling",
    "make_prompt_family",
    "unservable_model",
]
