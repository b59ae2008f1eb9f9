"""A Hugging Face tokenizer as the service uses it: prompts to token ids, lengths of texts,
and texts made safe to place in a prompt (control tokens escaped).

Control tokens are not only those marked ``special``: tokenizers add tokens that steer the
model without the mark (Qwen3's ``<think>`` and ``</think>``, Qwen's ``<tool_call>`` and
``<tool_response>``, the ``<|fim_prefix|>`` family). A client's text holding them would open
a thinking block or a tool call inside the prompt. ``steering_tokens`` finds them: added
tokens the chat template itself writes, and those of the ``<|...|>`` or ``[UPPER]`` control
forms. Added tokens that are ordinary text (Gemma's HTML tags, whitespace runs) are left
alone. Strings a prompt family gives a meaning of its own (Seed-X's target-language tags)
are the family's to escape (``PromptFamily.control_strings``).

It is the engine's tokenizer (vLLM's, or any Hugging Face tokenizer in the seeds' engines),
shared so that prompt encoding and token counting are done one way everywhere.

Encoding and counting call the Rust ``tokenizers`` backend of a fast tokenizer directly when
there is one: the same ids, without the Python layers of ``transformers`` around each call
(about a sixth of a replica's CPU per request went to tokenizing through them). They call its
``encode_batch`` (with one text), never ``encode``: ``encode`` holds the GIL for the whole
call (about 0.1 s for the longest text allowed, more on a busy machine), so a planning thread
tokenizing stalled the replica's event loop and every request on it, ``/healthz`` included;
``encode_batch`` releases the GIL while it encodes and gives the same encoding
(docs/reliability.md, "Planning and the GIL").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from serve_app.core.characters import ESCAPE_JOINER
from serve_app.translation.families.base import ChatPrompt, Prompt


class PromptTokenizer:
    """A Hugging Face tokenizer as the service uses it: prompts to token ids, lengths of
    texts, and texts made safe to place in a prompt."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._special = special_token_escaper(
            special_tokens(tokenizer) + steering_tokens(tokenizer)
        )
        self._backend = rust_backend(tokenizer)

    def _ids(self, text: str, add_special_tokens: bool) -> list[int]:
        if self._backend is not None:
            return list(_encoded(self._backend, text, add_special_tokens).ids)
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
            return len(_encoded(self._backend, text, add_special_tokens=False))
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def vocab_size(self) -> int:
        """The tokenizer's ids, added tokens included (a model's embedding may hold more)."""
        return len(self.tokenizer)

    def as_data(self, text: str) -> str:
        """The text with the tokenizer's special tokens escaped (``escape_special_tokens``)."""
        return escape_special_tokens(text, self._special)


def rust_backend(tokenizer: Any) -> Any | None:
    """The ``tokenizers.Tokenizer`` under a fast Hugging Face tokenizer, or None (slow ones)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return backend if callable(getattr(backend, "encode", None)) else None


def _encoded(backend: Any, text: str, add_special_tokens: bool) -> Any:
    """``backend.encode(text)``, through ``encode_batch``: the GIL is released while it
    encodes (``encode`` holds it throughout)."""
    return backend.encode_batch([text], add_special_tokens=add_special_tokens)[0]


def special_tokens(tokenizer: Any) -> list[str]:
    """Every special token string of a Hugging Face tokenizer, added ones included."""
    tokens = list(getattr(tokenizer, "all_special_tokens", []))
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    tokens += [t.content for t in added.values() if getattr(t, "special", False)]
    return tokens


# Added tokens of these forms are control tokens whatever their ``special`` mark says.
_CONTROL_FORM = re.compile(r"<\|[^|]*\|>|\[/?[A-Z][A-Z_]*\]")


def steering_tokens(tokenizer: Any) -> list[str]:
    """Added tokens not marked special that steer the model all the same: those its chat
    template writes (``<think>``, ``<tool_call>``...) and those of a control form
    (``<|fim_prefix|>``, ``[INST]``)."""
    template = getattr(tokenizer, "chat_template", None) or ""
    if isinstance(template, dict):  # named templates (tool use...)
        template = "\n".join(map(str, template.values()))
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    found = []
    for token in added.values():
        content = str(getattr(token, "content", ""))
        if getattr(token, "special", False) or len(content) < 2:
            continue
        if _CONTROL_FORM.fullmatch(content) or content in str(template):
            found.append(content)
    return found


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
    return pattern.sub(lambda m: m.group(0)[0] + ESCAPE_JOINER + m.group(0)[1:], text)
