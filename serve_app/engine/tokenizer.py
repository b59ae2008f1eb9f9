"""A Hugging Face tokenizer as the service uses it: prompts to token ids, lengths of texts,
and texts made safe to place in a prompt (special tokens escaped).

It is the engine's tokenizer (vLLM's, or any Hugging Face tokenizer in the seeds' engines),
shared so that prompt encoding and token counting are done one way everywhere.

Encoding and counting call the Rust ``tokenizers`` backend of a fast tokenizer directly when
there is one: the same ids, without the Python layers of ``transformers`` around each call
(about a sixth of a replica's CPU per request went to tokenizing through them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from serve_app.translation.families.base import ChatPrompt, Prompt


class PromptTokenizer:
    """A Hugging Face tokenizer as the service uses it: prompts to token ids, lengths of
    texts, and texts made safe to place in a prompt."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._special = special_token_escaper(special_tokens(tokenizer))
        self._backend = rust_backend(tokenizer)

    def _ids(self, text: str, add_special_tokens: bool) -> list[int]:
        if self._backend is not None:
            return list(self._backend.encode(text, add_special_tokens=add_special_tokens).ids)
        return list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens))

    def encode(self, prompt: Prompt) -> list[int]:
        tok = self.tokenizer
        if isinstance(prompt, ChatPrompt):
            text = tok.apply_chat_template(
                prompt.messages,
                tokenize=False,
                add_generation_prompt=True,
                **prompt.template_kwargs,
            )
            # The template already holds any BOS the model expects.
            return self._ids(text, add_special_tokens=False)
        return self._ids(prompt.text, add_special_tokens=prompt.add_special_tokens)

    def count_tokens(self, text: str) -> int:
        if self._backend is not None:
            return len(self._backend.encode(text, add_special_tokens=False))
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def as_data(self, text: str) -> str:
        """The text with the tokenizer's special tokens escaped (``escape_special_tokens``)."""
        return escape_special_tokens(text, self._special)


def rust_backend(tokenizer: Any) -> Any | None:
    """The ``tokenizers.Tokenizer`` under a fast Hugging Face tokenizer, or None (slow ones)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return backend if callable(getattr(backend, "encode", None)) else None


def special_tokens(tokenizer: Any) -> list[str]:
    """Every special token string of a Hugging Face tokenizer, added ones included."""
    tokens = list(getattr(tokenizer, "all_special_tokens", []))
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    tokens += [t.content for t in added.values() if getattr(t, "special", False)]
    return tokens


# U+2060 WORD JOINER: invisible, and no tokenizer's special token contains it.
_JOINER = "\u2060"


def special_token_escaper(tokens: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern of the tokenizer's special tokens (``<|im_end|>``, ``<start_of_turn>``...)."""
    tokens = sorted({t for t in tokens if len(t) > 1}, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, tokens))) if tokens else None


def escape_special_tokens(text: str, pattern: re.Pattern[str] | None) -> str:
    """The text with every special token broken by a word joiner after its first character.

    Tokenizers turn special-token strings found in text into the control tokens themselves,
    so a text holding ``<|im_end|><|im_start|>system`` could end the user turn and open new
    ones: the text must stay data inside the prompt. The characters are kept, so nothing a
    client sent is lost; the model sees them as ordinary text.
    """
    if pattern is None:
        return text
    return pattern.sub(lambda m: m.group(0)[0] + _JOINER + m.group(0)[1:], text)
