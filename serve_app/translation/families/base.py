"""What every prompt family is: the prompts a model wants, its options, its output hygiene.

A family turns (source, target, text) into a ``ChatPrompt`` (rendered through the model's own
chat template) or a ``RawPrompt`` (sent as is), states the languages it knows, the sampling
its model card recommends, the request options its model is documented to follow
(``supports``: glossary, context, formality; the service answers 400 for others) and the
hygiene rules that strip what its models add around a translation. Each family is one
subclass of ``PromptFamily`` in a module of its own, registered in ``__init__.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from serve_app.core.config import PromptConfig, SamplingConfig
from serve_app.translation import hygiene
from serve_app.translation.languages import Language
from serve_app.translation.markup.segment import DEFAULT_STYLE, Style


@dataclass(frozen=True)
class ChatPrompt:
    messages: list[dict[str, Any]]
    template_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RawPrompt:
    text: str
    add_special_tokens: bool = True


Prompt = ChatPrompt | RawPrompt


@dataclass(frozen=True)
class PromptOptions:
    """What a request adds to the plain translation instruction."""

    glossary: tuple[tuple[str, str], ...] = ()
    context: str | None = None
    formality: str = "default"  # default | formal | informal
    # The text holds placeholders (``translation/markup``) the model must keep: the family's
    # formatted-translation prompt, where its model card documents one.
    markup: bool = False

    def requested(self) -> set[str]:
        asked = {"glossary": bool(self.glossary), "context": bool(self.context)}
        asked["formality"] = self.formality != "default"
        return {name for name, on in asked.items() if on}

    def for_text(self, text: str) -> PromptOptions:
        """Only the glossary entries whose source term occurs in ``text`` (a piece of a long
        document need not carry the others)."""
        lowered = text.casefold()
        terms = tuple((s, t) for s, t in self.glossary if s.casefold() in lowered)
        return replace(self, glossary=terms)


NO_OPTIONS = PromptOptions()


class PromptFamily(ABC):
    """One model family's way of being asked; built from the config by ``from_config``."""

    name: ClassVar[str]
    languages: ClassVar[tuple[str, ...]]
    sampling: ClassVar[SamplingConfig] = SamplingConfig(temperature=0.0)
    supports: frozenset[str] = frozenset()
    # Output hygiene (``hygiene.py``): rules applied in order, and how many characters a
    # stream holds back (longer than any trailing wrapper the rules strip).
    rules: ClassVar[tuple[hygiene.Rule, ...]] = hygiene.COMMON
    stream_hold: ClassVar[int] = hygiene.DEFAULT_HOLD
    # Strings that end a translation (passed to the engine as stop sequences).
    stop: ClassVar[tuple[str, ...]] = ()
    # How placeholders are written for this family's models (``translation/markup``).
    placeholders: ClassVar[Style] = DEFAULT_STYLE

    @classmethod
    def from_config(cls, config: PromptConfig) -> PromptFamily:
        """The family as configured (families with no settings of their own ignore it)."""
        return cls()

    @abstractmethod
    def build(
        self, source: Language, target: Language, text: str, options: PromptOptions = NO_OPTIONS
    ) -> Prompt:
        """The prompt that asks the model to translate ``text``."""

    def stop_sequences(self, source: str) -> tuple[str, ...]:
        """``stop`` for a text: a stop string the text itself holds would cut its
        faithful translation short, so it is left out for that text (and the hygiene rule
        that strips it keeps it too)."""
        return tuple(s for s in self.stop if s not in source)

    def control_strings(self) -> tuple[str, ...]:
        """Strings this family's prompt gives a meaning of its own (besides the tokenizer's
        control tokens): a client's text holding one is escaped, so it stays data."""
        return ()

    def clean(self, output: str, source: str) -> str:
        """The model's output without the wrapping this family's models add."""
        return hygiene.clean(output, source, self.rules)

    def markup_answer(self, output: str) -> str:
        """A cleaned answer to a formatted-translation prompt without its wrapping, if the
        prompt asks for one."""
        return output

    def stream_cleaner(self, source: str) -> hygiene.StreamCleaner:
        """``clean`` for an output that arrives in pieces."""
        return hygiene.StreamCleaner(source, self.rules, self.stream_hold)


def effective_sampling(family: PromptFamily, override: SamplingConfig) -> SamplingConfig:
    """The family's recommended sampling with the configured values laid over it."""
    merged = family.sampling.model_dump() | override.model_dump(exclude_none=True)
    return SamplingConfig(**merged)
