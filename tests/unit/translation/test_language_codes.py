from __future__ import annotations

import re

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


@pytest.mark.parametrize(
    ("codes", "raw"),
    [
        (["en", "zh"], "zh-Hant"),  # Seed-X offers no traditional Chinese: was answered in zh
        (["en", "zh"], "zh-TW"),
        (["en", "zh"], "ZH-HANT"),  # DeepL's code
        (["en", "sr"], "sr-Latn"),
        (["en", "sr"], "sr-ME"),  # Montenegro writes Serbian in Latin
        (["en", "pa"], "pa-PK"),  # Shahmukhi
        (["en", "yue"], "yue-Hans"),
    ],
)
def test_a_target_in_a_script_not_offered_is_unsupported(codes: list[str], raw: str) -> None:
    """A target tag naming (or implying by its region) a script its language is not offered
    in fell back to the bare language, so the answer came in the other script (Cyrillic for
    ``sr-Latn``, simplified characters for ``zh-TW``) while the client asked for its own. As a
    source, the base language reads the text, as before."""
    registry = LanguageRegistry(codes)
    with pytest.raises(UnsupportedLanguage, match="script"):
        registry.resolve_target(raw)
    assert registry.resolve(raw).code == codes[1]


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("sr-Cyrl", "sr"),
        ("sr-RS", "sr"),
        ("zh-Hant-TW", "zh-Hant"),
        ("zh-SG", "zh"),
        ("en-US", "en"),
        ("en-x-foo", "en"),
        ("de-DE-u-co-phonebk", "de"),
        ("es-419", "es"),
        ("yue-HK", "yue"),
        ("iw", "he"),
    ],
)
def test_a_target_in_its_usual_script_falls_back(raw: str, code: str) -> None:
    assert LanguageRegistry(ALL_LANGUAGES).resolve_target(raw).code == code


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ("\u0435n", "U+0435 (CYRILLIC SMALL LETTER IE)"),  # looks like "en"
        ("\uff45\uff4e", "U+FF45 (FULLWIDTH LATIN SMALL LETTER E)"),
        ("en\u200b", "U+200B (ZERO WIDTH SPACE)"),
        ("auto\u200b", "U+200B (ZERO WIDTH SPACE)"),
        ("e\x00n", "U+0000"),
        ("en US", "U+0020 (SPACE)"),
    ],
)
def test_a_code_with_a_lookalike_or_invisible_character_names_it(raw: str, named: str) -> None:
    """ "'еn' is not a valid BCP-47 language code" read as if "en" were refused: the
    refusal names the character a client cannot see."""
    registry = LanguageRegistry(ALL_LANGUAGES)
    for resolve in (registry.resolve, registry.resolve_target):
        with pytest.raises(InvalidLanguageCode, match=re.escape(named)):
            resolve(raw)
