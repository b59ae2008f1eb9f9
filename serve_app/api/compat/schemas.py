"""The request bodies of the compatibility APIs, as OpenAPI schemas: the routes read their
parameters themselves (``common.read_params``: JSON, form or query string, the way those
APIs' clients send them), so these models only describe them, in ``/docs`` and to the
schema-driven fuzzing (tests/unit/api/test_fuzzed_requests.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class DeepLTranslateBody(BaseModel):
    """DeepL ``POST /v2/translate``."""

    text: list[str] | str = Field(..., description="The texts to translate (one or many).")
    target_lang: str = Field(..., description="EN-US, PT-BR, ZH-HANS, DE...")
    source_lang: str | None = Field(None, description="Omitted: detected.")
    formality: Literal["default", "more", "less", "prefer_more", "prefer_less"] = "default"
    context: str | None = Field(None, description="Surrounding text; not translated.")
    tag_handling: Literal["html", "xml"] | None = None
    tag_handling_version: Literal["v1", "v2"] | None = Field(
        None, description="Echoed in each translation; v2 with xml: malformed XML is a 400."
    )
    ignore_tags: list[str] | str | None = None
    non_splitting_tags: list[str] | str | None = None
    splitting_tags: list[str] | str | None = None
    outline_detection: bool | Literal["0", "1"] | None = None
    glossary_id: str | None = Field(
        None, description="A glossary of POST /v2/glossaries; needs source_lang."
    )


class LibreTranslateBody(BaseModel):
    """LibreTranslate ``POST /translate``."""

    q: list[str] | str = Field(..., description="The text, or a list of texts.")
    source: str = Field("auto", description="A language code, or auto.")
    target: str
    format: Literal["text", "html"] = "text"
    alternatives: int = Field(0, ge=0, le=3, description="Alternative translations.")
    api_key: str | None = None


class LibreDetectBody(BaseModel):
    """LibreTranslate ``POST /detect``: one text, or a list whose languages are pooled."""

    q: str | list[str]
    api_key: str | None = None


def request_body(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` for a route that takes ``model`` as JSON or as a form."""
    schema = model.model_json_schema()
    content = {
        "application/json": {"schema": schema},
        "application/x-www-form-urlencoded": {"schema": schema},
    }
    return {"requestBody": {"required": True, "content": content}}
