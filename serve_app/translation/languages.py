"""Language codes: parsing BCP-47 tags, the names prompts use, and which pairs are allowed.

Clients send ISO 639-1 / BCP-47 codes in any case or separator (``zh_TW``, ``PT-br``).
``langcodes`` standardizes them; a tag the table lacks falls back to its script variant
(``zh-TW`` -> ``zh-Hant``) and then to its base language (``en-US`` -> ``en``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import langcodes

from serve_app.core.errors import InvalidLanguageCode, UnsupportedLanguage, UnsupportedLanguagePair


@dataclass(frozen=True)
class Language:
    code: str
    name: str
    zh_name: str


# code, English name, Chinese name (HY-MT's Chinese prompt names the target in Chinese).
_TABLE: tuple[tuple[str, str, str], ...] = (
    ("zh", "Chinese", "中文"),
    ("zh-Hant", "Traditional Chinese", "繁体中文"),
    ("yue", "Cantonese", "粤语"),
    ("en", "English", "英语"),
    ("fr", "French", "法语"),
    ("pt", "Portuguese", "葡萄牙语"),
    ("pt-BR", "Brazilian Portuguese", "巴西葡萄牙语"),
    ("es", "Spanish", "西班牙语"),
    ("ja", "Japanese", "日语"),
    ("tr", "Turkish", "土耳其语"),
    ("ru", "Russian", "俄语"),
    ("ar", "Arabic", "阿拉伯语"),
    ("ko", "Korean", "韩语"),
    ("th", "Thai", "泰语"),
    ("it", "Italian", "意大利语"),
    ("de", "German", "德语"),
    ("vi", "Vietnamese", "越南语"),
    ("ms", "Malay", "马来语"),
    ("id", "Indonesian", "印尼语"),
    ("tl", "Filipino", "菲律宾语"),
    ("hi", "Hindi", "印地语"),
    ("pl", "Polish", "波兰语"),
    ("cs", "Czech", "捷克语"),
    ("nl", "Dutch", "荷兰语"),
    ("km", "Khmer", "高棉语"),
    ("my", "Burmese", "缅甸语"),
    ("fa", "Persian", "波斯语"),
    ("gu", "Gujarati", "古吉拉特语"),
    ("ur", "Urdu", "乌尔都语"),
    ("te", "Telugu", "泰卢固语"),
    ("mr", "Marathi", "马拉地语"),
    ("he", "Hebrew", "希伯来语"),
    ("bn", "Bengali", "孟加拉语"),
    ("ta", "Tamil", "泰米尔语"),
    ("uk", "Ukrainian", "乌克兰语"),
    ("bo", "Tibetan", "藏语"),
    ("kk", "Kazakh", "哈萨克语"),
    ("mn", "Mongolian", "蒙古语"),
    ("ug", "Uyghur", "维吾尔语"),
    ("da", "Danish", "丹麦语"),
    ("fi", "Finnish", "芬兰语"),
    ("hr", "Croatian", "克罗地亚语"),
    ("hu", "Hungarian", "匈牙利语"),
    ("nb", "Norwegian Bokmål", "书面挪威语"),
    ("no", "Norwegian", "挪威语"),
    ("ro", "Romanian", "罗马尼亚语"),
    ("sv", "Swedish", "瑞典语"),
    ("el", "Greek", "希腊语"),
    ("bg", "Bulgarian", "保加利亚语"),
    ("sk", "Slovak", "斯洛伐克语"),
    ("sl", "Slovenian", "斯洛文尼亚语"),
    ("sr", "Serbian", "塞尔维亚语"),
    ("lt", "Lithuanian", "立陶宛语"),
    ("lv", "Latvian", "拉脱维亚语"),
    ("et", "Estonian", "爱沙尼亚语"),
    ("ca", "Catalan", "加泰罗尼亚语"),
    ("sw", "Swahili", "斯瓦希里语"),
    ("af", "Afrikaans", "南非荷兰语"),
    ("kn", "Kannada", "卡纳达语"),
    ("ml", "Malayalam", "马拉雅拉姆语"),
    ("pa", "Punjabi", "旁遮普语"),
    ("zu", "Zulu", "祖鲁语"),
    ("is", "Icelandic", "冰岛语"),
)

ALL_LANGUAGES: dict[str, Language] = {c: Language(c, n, z) for c, n, z in _TABLE}

# Codes that standardize to something other than the table's key.
_ALIASES = {"fil": "tl", "zh-Hans": "zh", "pt-PT": "pt"}

_MAX_TAG_LENGTH = 35
# What no tag holds and a client cannot see: a lookalike (Cyrillic "е" in "en", full-width
# "ｅｎ"), an invisible or control character. Refused naming it: "'еn' is not a valid
# BCP-47 language code" read as if "en" were refused.
_ODD_CHARACTER = re.compile(r"[^\x21-\x7e]")


def _named(char: str) -> str:
    """``U+0435 (CYRILLIC SMALL LETTER IE)``: a character as a client can look it up."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" ({name})" if name else "")


def parse_tag(raw: str) -> langcodes.Language:
    """Standardizes a client's language tag; raises InvalidLanguageCode if malformed."""
    text = raw.strip().replace("_", "-")
    if not text or len(text) > _MAX_TAG_LENGTH:
        raise InvalidLanguageCode(f"'{raw[:_MAX_TAG_LENGTH]}' is not a language code.")
    if odd := _ODD_CHARACTER.search(text):
        raise InvalidLanguageCode(
            f"'{raw}' is not a language code: it holds {_named(odd.group())}; codes are ASCII "
            "letters and digits, separated by '-' or '_'."
        )
    try:
        return langcodes.Language.get(langcodes.standardize_tag(text, macro=True))
    except (ValueError, langcodes.tag_parser.LanguageTagError) as exc:
        raise InvalidLanguageCode(f"'{raw}' is not a valid BCP-47 language code.") from exc


def _script(tag: langcodes.Language) -> str | None:
    """The script ``tag`` is written in: named (``sr-Latn``), or implied by its region
    (``zh-TW``: Hant) or its language (``zh``: Hans)."""
    return tag.script or tag.maximize().script


def _usual_script(language: str) -> str | None:
    return _script(langcodes.Language.get(language))


def _candidates(tag: langcodes.Language, target: bool = False) -> list[str]:
    """The table codes ``tag`` may be, most specific first. A target's falls back to its
    bare language only in that language's usual script: ``sr-Latn`` or, where the table has
    no ``zh-Hant``, ``zh-TW`` would be answered in Cyrillic or simplified characters."""
    full = tag.to_tag()
    out = [full, _ALIASES.get(full, full)]
    if tag.language:
        script = _script(tag)
        if script:
            out.append(f"{tag.language}-{script}")
        if not target or script is None or script == _usual_script(tag.language):
            out.append(tag.language)
    return out


class LanguageRegistry:
    """The languages and pairs one deployment offers."""

    def __init__(
        self,
        codes: Iterable[str],
        allowed_pairs: Iterable[str] | None = None,
    ) -> None:
        self.languages = {c: ALL_LANGUAGES[c] for c in codes}
        self.pairs = None if allowed_pairs is None else self._parse_pairs(allowed_pairs)

    def _parse_pairs(self, pairs: Iterable[str]) -> frozenset[tuple[str, str]]:
        parsed = set()
        for pair in pairs:
            src, sep, tgt = pair.partition(":")
            if not sep:
                raise ValueError(f"language pair '{pair}' must be written 'src:tgt'")
            parsed.add((self.resolve(src).code, self.resolve_target(tgt).code))
        return frozenset(parsed)

    def resolve(self, raw: str) -> Language:
        """Maps a client's code to an offered language; 400-class errors otherwise."""
        return self._resolve(raw, parse_tag(raw), target=False)

    def resolve_target(self, raw: str) -> Language:
        """``resolve`` for a language to translate into: a script the deployment does not
        offer for it (``sr-Latn``, ``zh-TW`` without ``zh-Hant``) is unsupported, not
        answered in the language's usual script. (A source's script is what the text has:
        its base language reads it.)"""
        if raw.strip().lower() == "auto":
            raise UnsupportedLanguage("'auto' detects a source; give the target language's code.")
        return self._resolve(raw, parse_tag(raw), target=True)

    def _resolve(self, raw: str, tag: langcodes.Language, target: bool) -> Language:
        for code in _candidates(tag, target):
            alias = _ALIASES.get(code, code)
            if alias in self.languages:
                return self.languages[alias]
        message = f"Language '{raw}' is not supported by this deployment."
        if target and tag.language and _ALIASES.get(tag.language, tag.language) in self.languages:
            message += (
                f" It is written in the {_script(tag)} script; '{tag.language}' is offered in"
                f" the {_usual_script(tag.language)} script only."
            )
        raise UnsupportedLanguage(message + " See GET /languages.")

    def resolve_pair(self, source: str, target: str) -> tuple[Language, Language]:
        src, tgt = self.resolve(source), self.resolve(target)
        if src.code == tgt.code:
            raise UnsupportedLanguagePair(
                f"Source and target are the same language ('{src.code}')."
            )
        if self.pairs is not None and (src.code, tgt.code) not in self.pairs:
            raise UnsupportedLanguagePair(
                f"Translation from '{src.code}' to '{tgt.code}' is not offered. See GET /languages."
            )
        return src, tgt

    def targets_for(self, code: str) -> list[str]:
        if self.pairs is None:
            return [c for c in self.languages if c != code]
        return sorted(t for s, t in self.pairs if s == code)
