"""Request and response models of the HTTP API.

Requests validate their own shape (types, empty text, unknown fields) so malformed input stops
at the door with a 422; what needs the model or the configuration (languages, token counts)
is checked by the translation service before anything reaches the engine.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.config import JsonDict

_EXAMPLE: JsonDict = {"text": "Hello, world!", "source_lang": "en", "target_lang": "de"}


class TextItem(BaseModel):
    """One text and its language pair."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [_EXAMPLE]})

    text: str = Field(..., description="Text to translate (not empty, not only whitespace).")
    source_lang: str = Field(
        ..., max_length=35, description="BCP-47 code of the text's language: en, zh, pt-BR..."
    )
    target_lang: str = Field(
        ..., max_length=35, description="BCP-47 code to translate into: de, zh-Hant..."
    )

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("text must not be empty or whitespace only")
        return value


class TranslateRequest(TextItem):
    timeout_s: float | None = Field(
        None, gt=0, description="Deadline in seconds (default and maximum: server config)."
    )


class Usage(BaseModel):
    input_tokens: int = Field(..., description="Prompt tokens the engine processed.")
    output_tokens: int = Field(..., description="Tokens the engine generated.")


class TranslateResponse(BaseModel):
    translation: str
    source_lang: str = Field(..., description="The source language used (canonical code).")
    target_lang: str = Field(..., description="The target language used (canonical code).")
    model: str
    usage: Usage


class BatchTranslateRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"items": [_EXAMPLE, {**_EXAMPLE, "target_lang": "fr"}]}]},
    )

    items: list[TextItem] = Field(
        ..., min_length=1, description="Texts to translate; answered in the same order."
    )
    timeout_s: float | None = Field(None, gt=0, description="Deadline for the whole batch.")


class BatchTranslateResponse(BaseModel):
    results: list[TranslateResponse]
    usage: Usage = Field(..., description="Totals over the batch.")


class LanguageInfo(BaseModel):
    code: str
    name: str
    targets: list[str] = Field(..., description="Codes this language can be translated into.")


class LanguagesResponse(BaseModel):
    model: str
    languages: list[LanguageInfo]


class HealthResponse(BaseModel):
    status: str


class ReadinessResponse(HealthResponse):
    in_flight: int = Field(..., description="Engine requests this replica has admitted.")
    engine_requests: int = Field(..., description="Requests inside the engine (run + wait).")
