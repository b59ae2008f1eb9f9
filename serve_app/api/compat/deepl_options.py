"""DeepL's ``split_sentences``, ``preserve_formatting``, ``model_type`` and
``tag_handling_version``: validated as
DeepL validates them (a bad value is a 400), and honoured where they mean something for a
model that translates whole texts.

- ``split_sentences`` (``0``, ``1``, ``nonewlines``): DeepL splits a text into sentences and
  translates them one by one unless told ``0``. The model here translates a text as a whole
  (long texts are split only at the input limit, at sentence ends), which is what ``0`` asks
  for and what ``1``/``nonewlines`` need no splitting for: accepted, no change.
- ``preserve_formatting`` (``0``/``1``): DeepL then does not correct the case at the start of
  a text or the punctuation at its end. Honoured: a final full stop the model added to a text
  that had none is removed, and a capital it gave a text that started in lower case is
  lowered again.
- ``model_type`` (``quality_optimized``, ``prefer_quality_optimized``,
  ``latency_optimized``): there is one model; each translation says so in
  ``model_type_used`` (``quality_optimized``), as DeepL answers when it is asked.
- ``tag_handling_version`` (``v1``, ``v2``): DeepL's two tag handling algorithms; there is one
  here. Each translation echoes the version asked, as DeepL's do; with ``v2`` and
  ``tag_handling=xml`` a text that is not well-formed XML is DeepL's 400 (``v2`` parses XML
  strictly: ``api/compat/markup.check_well_formed``). Any other value was accepted before
  2026-12-07.

Parameters that name what this server does not hold (``glossary_ids``, a style rule's
``style_id``, a ``translation_memory_id``) or ask for what it cannot follow
(``custom_instructions``) are refused (``refuse_unsupported``): ignored, the translation came
back as if they had been applied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from serve_app.api.compat.common import Params, one
from serve_app.core.errors import InvalidRequest, UnsupportedOption

_SPLIT = ("0", "1", "nonewlines")
_MODEL_TYPES = ("quality_optimized", "prefer_quality_optimized", "latency_optimized")
_TAG_HANDLING_VERSIONS = ("v1", "v2")
_FLAGS = {"0": False, "1": True, "false": False, "true": True}
# Sentence-final punctuation of the scripts the models write.
_FINAL = ".!?。！？…"
# What deepl-python 1.32 sends when asked (``style_rule``, ``translation_memory``,
# ``custom_instructions``, ``glossary_ids``), and why it is refused.
_NO_MEMORIES = "this server has no translation memories"
_UNSUPPORTED = {
    "glossary_ids": "glossary_ids is not supported here: use glossary_id.",
    "style_id": "style_id is not supported here: this server has no style rules.",
    "translation_memory_id": f"translation_memory_id is not supported here: {_NO_MEMORIES}.",
    "translation_memory_threshold": f"translation_memory_threshold is not supported here: "
    f"{_NO_MEMORIES}.",
    "custom_instructions": "custom_instructions is not supported here: the model follows "
    "no instructions besides its translation prompt.",
}


@dataclass(frozen=True)
class DeepLOptions:
    preserve_formatting: bool = False
    model_type: str | None = None
    tag_handling_version: str | None = None

    def apply(self, source: str, translation: str) -> str:
        return preserve(source, translation) if self.preserve_formatting else translation

    def annotate(self, entry: dict[str, Any]) -> dict[str, Any]:
        """A translation entry with ``model_type_used`` when ``model_type`` was given, and
        ``tag_handling_version`` when it was."""
        if self.model_type:
            entry |= {"model_type_used": "quality_optimized"}
        if self.tag_handling_version:
            entry |= {"tag_handling_version": self.tag_handling_version}
        return entry


def deepl_options(params: Params) -> DeepLOptions:
    """The four options of a DeepL request; InvalidRequest for a value DeepL refuses."""
    split = one(params, "split_sentences")
    if split is not None and str(split).lower() not in _SPLIT:
        raise InvalidRequest(f"Invalid split_sentences '{split}': use 0, 1 or nonewlines.")
    flag = one(params, "preserve_formatting")
    key = str(flag).lower() if flag is not None else "0"
    if key not in _FLAGS:
        raise InvalidRequest(f"Invalid preserve_formatting '{flag}': use 0 or 1.")
    model_type = one(params, "model_type")
    if model_type is not None and model_type not in _MODEL_TYPES:
        raise InvalidRequest(f"Invalid model_type '{model_type}': use {', '.join(_MODEL_TYPES)}.")
    version = one(params, "tag_handling_version") or None
    if version is not None and version not in _TAG_HANDLING_VERSIONS:
        raise InvalidRequest(f"Invalid tag_handling_version '{version}': use v1 or v2.")
    return DeepLOptions(_FLAGS[key], model_type, version)


def refuse_unsupported(given: Callable[[str], bool]) -> None:
    """UnsupportedOption (400) for the first of ``_UNSUPPORTED`` that ``given(name)`` says
    the request holds (with a value: ``[]``, ``""`` and ``null`` ask for nothing)."""
    for name, message in _UNSUPPORTED.items():
        if given(name):
            raise UnsupportedOption(message)


def given_in(params: Params) -> Callable[[str], bool]:
    """Whether ``params`` hold a value for a name (for ``refuse_unsupported``)."""
    return lambda name: any(v not in (None, "") for v in params.get(name) or ())


def preserve(source: str, translation: str) -> str:
    """``translation`` with the source's final punctuation and initial case kept where the
    model corrected them."""
    out = translation
    src, body = source.rstrip(), out.rstrip()
    if src and body and src[-1] not in _FINAL and body[-1] in _FINAL and body[-1:] != "…":
        out = body[:-1] + out[len(body) :]
    first = next((c for c in source if not c.isspace()), "")
    at = next((i for i, c in enumerate(out) if not c.isspace()), None)
    if first.islower() and at is not None and out[at].isupper():
        out = out[:at] + out[at].lower() + out[at + 1 :]
    return out
