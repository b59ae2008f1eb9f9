"""TranslateGemma (google/translategemma-4b-it, -12b-it, -27b-it): the model's own template.

The model card: TranslateGemma "is designed to work with a specific chat template", used
through the tokenizer's ``apply_chat_template``; its user turn is "highly opinionated": the
content is a list with exactly one entry, ``{"type": "text", "source_lang_code": ...,
"target_lang_code": ..., "text": ...}``, and the template writes the translator instruction
itself, naming the languages from their codes. So this family sends that structure as a
``ChatPrompt`` and no instruction of its own (the tokenizer renders it, ``<bos>`` and Gemma's
turns included). The text is the client's text with special tokens escaped like any other
family's, so it cannot close the turn.

Languages: the card's 55 (the WMT24++ set the model is evaluated on) and English. Codes go to
the template as ISO 639-1, with the region where WMT24++ tells variants apart (``pt-BR``,
``pt-PT``, ``zh-TW``), the form of the card's own example (``"de-DE"``); Filipino (WMT24++
``fil_PH``) is sent as ISO 639-1 ``tl``. The card's example decodes greedily
(``do_sample=False``), the family's default; it takes no options (the template has no place
for glossary or context).
"""

from __future__ import annotations

from typing import ClassVar

from serve_app.translation import hygiene
from serve_app.translation.families.base import (
    NO_OPTIONS,
    ChatPrompt,
    Prompt,
    PromptFamily,
    PromptOptions,
)
from serve_app.translation.languages import Language

# The card's languages: the 55 WMT24++ locales (from English), as this service's codes.
_TRANSLATEGEMMA_LANGUAGES = (
    "en", "ar", "bg", "bn", "ca", "cs", "da", "de", "el", "es", "et", "fa", "fi", "fr", "gu",
    "he", "hi", "hr", "hu", "id", "is", "it", "ja", "kn", "ko", "lt", "lv", "ml", "mr", "nl",
    "no", "pa", "pl", "pt", "pt-BR", "ro", "ru", "sk", "sl", "sr", "sv", "sw", "ta", "te", "th",
    "tl", "tr", "uk", "ur", "vi", "zh", "zh-Hant", "zu",
)  # fmt: skip
# This service's code -> the code the template is given, where they differ.
_MODEL_CODES = {"pt": "pt-PT", "zh-Hant": "zh-TW"}


def model_code(language: Language) -> str:
    """The language code TranslateGemma's template is given for ``language``."""
    return _MODEL_CODES.get(language.code, language.code)


class TranslateGemmaPrompts(PromptFamily):
    name: ClassVar[str] = "translategemma"
    languages: ClassVar[tuple[str, ...]] = _TRANSLATEGEMMA_LANGUAGES
    rules: ClassVar[tuple[hygiene.Rule, ...]] = (hygiene.strip_gemma_turns, *hygiene.COMMON)
    stream_hold: ClassVar[int] = 16  # a turn marker: "<end_of_turn>"

    def build(
        self, source: Language, target: Language, text: str, options: PromptOptions = NO_OPTIONS
    ) -> Prompt:
        entry = {
            "type": "text",
            "source_lang_code": model_code(source),
            "target_lang_code": model_code(target),
            "text": text,
        }
        return ChatPrompt([{"role": "user", "content": [entry]}])
