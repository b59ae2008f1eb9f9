"""What ``GET /ui/config`` tells the web page: the model, its limits and its capabilities.

The page shows a control only when the server says it works: glossary, context and formality
when the prompt family supports them, the ``format`` picker when the native API takes a
``format``, the remaining quota when a ``/usage`` route exists, the Files tab when
``/documents`` exists, the stored-glossary picker when ``/glossaries`` exists and the family
takes a glossary.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class UiConfig(BaseModel):
    model: str = Field(..., description="The model's name, as translations report it.")
    family: str = Field(..., description="The configured prompt family.")
    options: list[str] = Field(
        ..., description="Request options the family supports: glossary, context, formality."
    )
    formats: list[str] = Field(
        ..., description="Values of the native API's `format` field; empty: plain text only."
    )
    max_text_chars: int = Field(..., description="Longest text accepted, in characters.")
    max_body_bytes: int = Field(..., description="Largest request body accepted, in bytes.")
    usage: bool = Field(..., description="GET /usage answers the caller's remaining quota.")
    documents: bool = Field(False, description="POST /documents translates files (Files tab).")
    document_extensions: list[str] = Field(
        default_factory=list, description="File name extensions documents may have: .docx..."
    )
    glossaries: bool = Field(
        False, description="Stored glossaries (/glossaries) work with this model."
    )
    version: str = Field(..., description="The API's version.")
