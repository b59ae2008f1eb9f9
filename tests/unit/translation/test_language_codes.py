from __future__ import annotations

import pytest

from serve_app.core.errors import InvalidLanguageCode, UnsupportedLanguage, UnsupportedLanguagePair
from serve_app.translation.languages import ALL_LANGUAGES, LanguageRegistry


@pytest.fixture
def registry() -> LanguageRegistry:
    return LanguageRegistry(ALL_LANGUAGES)


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("en", "en"),
        ("EN", "en"),
        ("en-US", "en"),
        ("en_GB", "en"),
        ("zh", "zh"),
        ("zh-Hans", "zh"),
        ("zh-CN", "zh"),
        ("zh-Hant", "zh-Hant"),
        ("zh_TW", "zh-Hant"),
        ("zh-hk", "zh-Hant"),
        ("pt-BR", "pt-BR"),
        ("pt-br", "pt-BR"),
        ("pt-PT", "pt"),
        ("iw", "he"),
        ("in", "id"),
        ("fil", "tl"),
        ("tl", "tl"),
        (" de ", "de"),
    ],
)
def test_resolve_normalizes_bcp47(registry: LanguageRegistry, raw: str, code: str) -> None:
    assert registry.resolve(raw).code == code


@pytest.mark.parametrize("raw", ["", "   ", "../etc", "english", "a b", "x" * 40, "en--US"])
def test_malformed_codes_are_rejected(registry: LanguageRegistry, raw: str) -> None:
    with pytest.raises(InvalidLanguageCode):
        registry.resolve(raw)


@pytest.mark.parametrize("raw", ["xx", "tlh", "12"])
def test_unknown_codes_are_unsupported(registry: LanguageRegistry, raw: str) -> None:
    with pytest.raises((UnsupportedLanguage, InvalidLanguageCode)):
        registry.resolve(raw)


def test_registry_limited_to_its_codes() -> None:
    registry = LanguageRegistry(["en", "de"])
    assert registry.resolve("de-AT").code == "de"
    with pytest.raises(UnsupportedLanguage, match="'fr'"):
        registry.resolve("fr")


def test_same_language_pair_is_refused(registry: LanguageRegistry) -> None:
    with pytest.raises(UnsupportedLanguagePair):
        registry.resolve_pair("en-US", "en")


def test_allowed_pairs_are_enforced() -> None:
    registry = LanguageRegistry(["en", "de", "fr"], ["en:de", "de:en"])
    assert [x.code for x in registry.resolve_pair("en", "de")] == ["en", "de"]
    with pytest.raises(UnsupportedLanguagePair, match="'en' to 'fr'"):
        registry.resolve_pair("en", "fr")
    assert registry.targets_for("en") == ["de"]
    assert registry.targets_for("fr") == []


def test_all_pairs_when_unrestricted() -> None:
    registry = LanguageRegistry(["en", "de", "fr"])
    assert registry.targets_for("en") == ["de", "fr"]


def test_malformed_pair_config_is_refused() -> None:
    with pytest.raises(ValueError, match="src:tgt"):
        LanguageRegistry(["en", "de"], ["en-de"])
