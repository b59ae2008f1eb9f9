"""Seed-X (ByteDance-Seed/Seed-X-PPO-7B, -Instruct-7B): a raw prompt, no chat template.

The prompt is the one of the model card and of the repository's README (Seed-X-7B), byte for
byte: ``"Translate the following English sentence into Chinese:\\nMay the force be with you
<zh>"``. The card says the target's language tag at the end "is necessary" (the PPO stage was
trained with it), that the model has no chat template (``apply_chat_template`` must not be
used), and decodes with ``temperature=0`` (its recommended beam search, ``beam_width=4``, is
not offered by vLLM's ``AsyncLLM.generate``; greedy is its documented alternative). The
tokenizer adds ``<s>``.

Seed-X-PPO may append a chain of thought after ``[COT]`` even when none was asked for
(Seed-X-7B issue #9, where the maintainers advise ``[COT]`` as a stop sequence): it is this
family's stop sequence, and a hygiene rule strips ``[COT]...`` should it still appear. Outputs
may also carry the tag back (stripped). The card documents no terminology or context prompt
(issue #2: "This version of the model does not support the RAG function"), so the family
takes no options.
"""

from __future__ import annotations

from typing import ClassVar

from serve_app.translation import hygiene
from serve_app.translation.families.base import (
    NO_OPTIONS,
    Prompt,
    PromptFamily,
    PromptOptions,
    RawPrompt,
)
from serve_app.translation.languages import Language

# The card's 28 languages.
_SEED_X_LANGUAGES = (
    "ar", "cs", "da", "de", "en", "es", "fi", "fr", "hr", "hu", "id", "it", "ja", "ko", "ms",
    "nb", "nl", "no", "pl", "pt", "ro", "ru", "sv", "th", "tr", "uk", "vi", "zh",
)  # fmt: skip


class SeedXPrompts(PromptFamily):
    name: ClassVar[str] = "seed_x"
    languages: ClassVar[tuple[str, ...]] = _SEED_X_LANGUAGES
    rules: ClassVar[tuple[hygiene.Rule, ...]] = (
        hygiene.strip_chain_of_thought,
        hygiene.strip_language_tag,
        *hygiene.COMMON,
    )
    stream_hold: ClassVar[int] = 12  # a target tag "<pt-BR>", or "[COT]" arriving
    stop: ClassVar[tuple[str, ...]] = (hygiene.COT_MARK,)

    def control_strings(self) -> tuple[str, ...]:
        """The target-language tags (``<zh>``: a text holding ``<de>`` could redirect the
        translation) and ``[COT]``."""
        return (*self.stop, *(f"<{code}>" for code in self.languages))

    def build(
        self, source: Language, target: Language, text: str, options: PromptOptions = NO_OPTIONS
    ) -> Prompt:
        return RawPrompt(
            f"Translate the following {source.name} sentence into {target.name}:\n"
            f"{text} <{target.code}>"
        )
