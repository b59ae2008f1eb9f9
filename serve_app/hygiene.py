"""Output hygiene: strip what models add around a translation.

LLMs wrap translations in things nobody asked for: thinking blocks (Qwen3 and other chat
models, even with thinking off they may emit an empty ``<think></think>``), preambles ("Here is
the translation:", "以下是翻译："), quotes around the whole answer, and leftovers of the
prompt format (Seed-X's ``<de>`` target tag, Gemma's turn markers). Each rule applies only
when the source text does not itself start or end that way, so a text that really begins with
"Translation:" or sits in quotes keeps them. Rules per prompt family are in ``RULES``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Rule = Callable[[str, str], str]

_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)
_UNCLOSED_THINK = re.compile(r"^\s*<think>.*", re.DOTALL)
_STRAY_THINK_END = re.compile(r"^\s*</think>\s*")
_PREAMBLES = (
    re.compile(
        r"^(?:(?:sure|certainly|of course|okay|ok)[!,.]?\s+)?"
        r"here(?:'s| is| are)\s+(?:the|your|my|a)\s+(?:[\w-]+\s+){0,3}translations?"
        r"(?:\s+(?:of|in|into|to|from)\s+[^:\n]{0,60})?\s*[:：]\s*",
        re.IGNORECASE,
    ),
    re.compile(
        r"^(?:translation|translated text|traducción|traduction|übersetzung|tradução)"
        r"(?:\s*\([^)\n]{0,30}\))?\s*[:：]\s*",
        re.IGNORECASE,
    ),
    re.compile(r"^(?:以下是|下面是|这是)[^\n：:]{0,30}(?:翻译|译文)[^\n：:]{0,10}[：:]\s*"),
    re.compile(r"^(?:翻译|译文)(?:结果)?[：:]\s*"),
)
_QUOTES = (
    ('"', '"'),
    ("“", "”"),
    ("„", "“"),
    ("'", "'"),
    ("‘", "’"),
    ("«", "»"),
    ("「", "」"),
    ("『", "』"),
)
_LANGUAGE_TAG = re.compile(
    r"^\s*<[a-z]{2,3}(?:-[A-Za-z]{2,4})?>\s*|\s*<[a-z]{2,3}(?:-[A-Za-z]{2,4})?>\s*$"
)
_GEMMA_TURNS = re.compile(r"<(?:start|end)_of_turn>(?:model|user)?\s*")


def strip_thinking(output: str, source: str) -> str:
    if "<think>" in source:
        return output
    output = _STRAY_THINK_END.sub("", _THINK.sub("", output))
    # A thinking block that never closed holds no translation.
    return _UNCLOSED_THINK.sub("", output)


def strip_preamble(output: str, source: str) -> str:
    for pattern in _PREAMBLES:
        match = pattern.match(output)
        if match and not pattern.match(source) and output[match.end() :].strip():
            return output[match.end() :]
    return output


def strip_quotes(output: str, source: str) -> str:
    text, src = output.strip(), source.strip()
    for open_, close in _QUOTES:
        wrapped = len(text) > 2 and text.startswith(open_) and text.endswith(close)
        inner = text[len(open_) : -len(close)]
        if wrapped and not src.startswith(open_) and open_ not in inner and close not in inner:
            return inner
    return output


def strip_language_tag(output: str, source: str) -> str:
    return output if _LANGUAGE_TAG.search(source) else _LANGUAGE_TAG.sub("", output)


def strip_gemma_turns(output: str, source: str) -> str:
    return output if "_of_turn>" in source else _GEMMA_TURNS.sub("", output)


_COMMON: tuple[Rule, ...] = (strip_thinking, strip_preamble, strip_quotes)
RULES: dict[str, tuple[Rule, ...]] = {
    "chat": _COMMON,
    "hy_mt": _COMMON,
    "hunyuan_mt": _COMMON,
    "seed_x": (strip_language_tag, *_COMMON),
    "translategemma": (strip_gemma_turns, *_COMMON),
}


def clean(output: str, source: str, family: str) -> str:
    """The translation without the wrapping ``family``'s models tend to add, stripped."""
    text = output.strip()
    for rule in RULES.get(family, _COMMON):
        text = rule(text, source).strip()
    return text
