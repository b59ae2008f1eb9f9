"""Language codes: parsing BCP-47 tags, the names prompts use, and which pairs are allowed.

Clients send ISO 639-1 / BCP-47 codes in any case or separator (``zh_TW``, ``PT-br``).
``langcodes`` standardizes them; a tag the table lacks falls back to its script variant
(``zh-TW`` -> ``zh-Hant``) and then to its base language (``en-US`` -> ``en``).
"""

from __future__ import annotations

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


def parse_tag(raw: str) -> langcodes.Language:
    """Standardizes a client's language tag; raises InvalidLanguageCode if malformed."""
    text = raw.strip().replace("_", "-")
    if not text or len(text) > _MAX_TAG_LENGTH:
        raise InvalidLanguageCode(f"'{raw[:_MAX_TAG_LENGTH]}' is not a language code.")
    try:
        return langcodes.Language.get(langcodes.standardize_tag(text, macro=True))
    except (ValueError, langcodes.tag_parser.LanguageTagError) as exc:
        raise InvalidLanguageCode(f"'{raw}' is not a valid BCP-47 language code.") from exc


def _candidates(tag: langcodes.Language) -> list[str]:
    full = tag.to_tag()
    out = [full, _ALIASES.get(full, full)]
    if tag.language:
        script = tag.script or tag.maximize().script
        if script:
            out.append(f"{tag.language}-{script}")
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
            parsed.add((self.resolve(src).code, self.resolve(tgt).code))
        return frozenset(parsed)

    def resolve(self, raw: str) -> Language:
        """Maps a client's code to an offered language; 400-class errors otherwise."""
        for code in _candidates(parse_tag(raw)):
            alias = _ALIASES.get(code, code)
            if alias in self.languages:
                return self.languages[alias]
        raise UnsupportedLanguage(
            f"Language '{raw}' is not supported by this deployment. See GET /languages."
        )

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
