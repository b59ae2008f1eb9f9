"""Request and response models of the HTTP API.

Requests validate their own shape (types, empty text, unknown fields) so malformed input stops
at the door with a 422; what needs the model or the configuration (languages, token counts)
is checked by the translation service before anything reaches the engine.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.config import JsonDict

from serve_app.core.characters import BLANK_TEXT, bad_character, invisible

# A stored glossary's id, as every route takes it (a UUID is 36).
MAX_GLOSSARY_ID_CHARS = 100

_EXAMPLE: JsonDict = {"text": "Hello, world!", "source_lang": "en", "target_lang": "de"}

Formality = Literal["default", "formal", "informal"]
Format = Literal["text", "html", "xml", "markdown"]
_TagNames = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=100)]], Field(max_length=100)
]


class TagOptions(BaseModel):
    """How markup is read (``html`` and ``xml``), with DeepL's tag-handling semantics."""

    model_config = ConfigDict(extra="forbid")

    ignore_tags: _TagNames = Field(
        default_factory=list, description="Elements whose content is not translated."
    )
    non_splitting_tags: _TagNames = Field(
        default_factory=list, description="Elements that never start a new segment (inline)."
    )
    splitting_tags: _TagNames = Field(
        default_factory=list, description="Elements that always start a new segment (blocks)."
    )
    outline_detection: bool = Field(
        True,
        description="XML: an element whose parent holds no text of its own is structure and "
        "starts a segment; false: only splitting_tags do.",
    )


class GlossaryEntry(BaseModel):
    """A term and the translation it must get."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(..., min_length=1, max_length=200, description="Term in the source text.")
    target: str = Field(..., min_length=1, max_length=200, description="Its required translation.")

    @field_validator("source", "target")
    @classmethod
    def _one_visible_line(cls, value: str) -> str:
        """The stored glossaries' rule (``store/validation.py``): the terminology prompt
        writes one term a line, so a newline in a term wrote lines of the client's own
        there (instructions, fake terms), and a NUL reached the prompt."""
        if bad := bad_character(value):
            raise ValueError(f"must not contain the control character {bad}")
        if invisible(value):
            raise ValueError("must not be blank")
        return value


class TextItem(BaseModel):
    """One text, its language pair and options. Content errors of a batch item (blank text,
    languages, options) are reported for that item; the others are still translated."""

    # Numbers are finite: "NaN" (a string pydantic reads as a float) was "Input should be
    # greater than 0", and "Infinity" a valid timeout_s.
    model_config = ConfigDict(
        extra="forbid", allow_inf_nan=False, json_schema_extra={"examples": [_EXAMPLE]}
    )

    text: str = Field(..., description="Text to translate (not empty, not only whitespace).")
    source_lang: str | None = Field(
        "auto",
        max_length=35,
        description="BCP-47 code of the text's language (en, zh, pt-BR...); 'auto' or "
        "omitted: detected, and reported in detected_source_lang.",
    )
    target_lang: str = Field(
        ..., max_length=35, description="BCP-47 code to translate into: de, zh-Hant..."
    )
    glossary: list[GlossaryEntry] = Field(
        default_factory=list,
        max_length=100,
        description="Terms and their required translations (model families that support it).",
    )
    glossary_id: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_GLOSSARY_ID_CHARS,
        description="A stored glossary (POST /glossaries) of the caller's key: its entries "
        "for this language pair are applied as the inline glossary's are. Needs an explicit "
        "source_lang.",
    )
    context: str | None = Field(
        None,
        max_length=5000,
        description="Surrounding text that helps the translation; not translated itself.",
    )
    formality: Formality = Field(
        "default", description="Register: default, formal or informal (families that support it)."
    )
    cache: bool = Field(True, description="false: bypass the translation cache.")
    format: Format = Field(
        "text",
        description="text, html, xml or markdown: tags, attributes, entities, code and URLs "
        "come back unchanged, the words are translated (docs/markup.md). In every format, "
        "variables ({name}, %s, ICU plurals) and URLs are kept.",
    )
    tag_options: TagOptions | None = Field(
        None, description="html and xml: ignore_tags, splitting tags, outline detection."
    )


class TranslateRequest(TextItem):
    timeout_s: float | None = Field(
        None, gt=0, description="Deadline in seconds (default and maximum: server config)."
    )

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if invisible(value):
            raise ValueError(BLANK_TEXT)
        return value


class Usage(BaseModel):
    input_tokens: int = Field(..., description="Prompt tokens the engine processed.")
    output_tokens: int = Field(..., description="Tokens the engine generated.")


class MarkupInfo(BaseModel):
    segments: int = Field(..., description="Segments (blocks of text) the document was read into.")
    fallback_segments: int = Field(
        ...,
        description="Segments whose translation lost or mangled placeholders, translated "
        "instead run by run between the original tags (every tag kept, word order across "
        "tags the source's).",
    )
    structural_segments: int = Field(
        0,
        description="Segments with tags translated run by run between the original tags "
        "at once, without a placeholder attempt: the model recently lost placeholders for "
        "this target language (config markup.method auto), or markup.method is structural.",
    )


class TranslateResponse(BaseModel):
    translation: str
    source_lang: str = Field(..., description="The source language used (canonical code).")
    target_lang: str = Field(..., description="The target language used (canonical code).")
    model: str
    usage: Usage
    detected_source_lang: str | None = Field(
        None, description="The detected language, when source_lang was 'auto' or omitted."
    )
    detection_confidence: float | None = Field(
        None, description="Confidence of the detection, 0 to 1."
    )
    cached: bool = Field(False, description="Served from the translation cache (no GPU).")
    segments: int = Field(1, description="Pieces a long text was split into.")
    truncated: bool = Field(
        False,
        description="A sentence's translation hit the output token limit and may be "
        "incomplete (pieces that hit it are first re-split at sentence ends).",
    )
    markup: MarkupInfo | None = Field(
        None, description="Present when the text was read as markup or had variables kept."
    )


class ErrorDetail(BaseModel):
    code: str
    message: str


class ItemError(BaseModel):
    """A batch item that could not be translated; the others still are."""

    index: int
    error: ErrorDetail


class BatchTranslateRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={"examples": [{"items": [_EXAMPLE, {**_EXAMPLE, "target_lang": "fr"}]}]},
    )

    # fail_fast (as every list of objects a request takes): the first invalid item is the
    # error, not each of 300,000 (their errors took seconds to build on the event loop).
    items: list[TextItem] = Field(
        ...,
        min_length=1,
        fail_fast=True,
        description="Texts to translate; answered in the same order.",
    )
    timeout_s: float | None = Field(None, gt=0, description="Deadline for the whole batch.")


class BatchTranslateResponse(BaseModel):
    results: list[TranslateResponse | ItemError] = Field(
        ..., description="One per item, in order: a translation or the item's error."
    )
    failed: int = Field(0, description="Items answered with an error.")
    usage: Usage = Field(..., description="Totals over the batch.")


class LanguageInfo(BaseModel):
    code: str
    name: str
    targets: list[str] = Field(..., description="Codes this language can be translated into.")


class LanguagesResponse(BaseModel):
    model: str
    languages: list[LanguageInfo]


class CacheStatsResponse(BaseModel):
    enabled: bool
    hits: int = Field(..., description="Lookups answered from the cache (no engine work).")
    misses: int
    evictions: int = Field(..., description="Entries dropped to stay within the bounds.")
    entries: int
    bytes: int = Field(..., description="Memory the entries take (approximately).")
    max_entries: int
    max_bytes: int


class HealthResponse(BaseModel):
    status: str


class ReadinessResponse(HealthResponse):
    in_flight: int = Field(..., description="Engine requests this replica has admitted.")
    engine_requests: int = Field(..., description="Requests inside the engine (run + wait).")


class KeyUsageResponse(BaseModel):
    """The caller's usage from the store: its key's (``scope`` ``key``), or, without keys, all
    callers' together (``anonymous``); without a store, what this replica translated since it
    started (``replica``)."""

    scope: Literal["key", "anonymous", "replica"]
    month: str | None = Field(None, description="The calendar month counted (UTC, YYYY-MM).")
    characters: int = Field(..., description="Characters translated this month.")
    character_limit: int | None = Field(None, description="Characters a month; null: no limit.")
    requests_this_minute: int = 0
    requests_per_minute: int | None = Field(None, description="null: no limit.")
