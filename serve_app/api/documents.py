"""Native document translation: ``/documents``.

``POST /documents`` (multipart: ``file``, ``target_lang``, optional ``source_lang``,
``formality``, ``format``, ``glossary_id``) stores a job and answers its id, its
``document_key`` and its status; ``GET /documents/{id}`` is the status with progress and
``seconds_remaining``; ``GET /documents/{id}/result`` downloads the translated file (409
until it is done); ``DELETE /documents/{id}`` deletes it (jobs also expire after the store's
TTL); ``GET /documents`` lists the caller's jobs. Jobs belong to the caller's API key.

``with_glossary`` is what every upload route (native, DeepL, LibreTranslate) calls for a
``glossary_id``: the caller's stored glossary is resolved at upload as the translate routes
resolve it, and its entries that occur in the document are kept with the job.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Request, Response
from pydantic import BaseModel, Field
from starlette.datastructures import FormData, UploadFile

from serve_app.api.bodies import request_form
from serve_app.api.glossaries import stored_glossary
from serve_app.api.keys import charged
from serve_app.core.errors import DocumentTooLarge, InvalidRequest
from serve_app.core.schemas import MAX_GLOSSARY_ID_CHARS
from serve_app.documents import FORMATS
from serve_app.documents.jobs import (
    GLOSSARY_ID,
    Submitted,
    Upload,
    file_name,
    seconds_remaining,
)
from serve_app.documents.replica import ReplicaDocuments
from serve_app.store import DocumentJob, owner_of

Status = Literal["queued", "translating", "done", "error"]


class DocumentStatus(BaseModel):
    id: str
    name: str
    format: str = Field(..., description="The format the file was read as: docx, srt...")
    status: Status
    source_lang: str | None
    target_lang: str
    segments_total: int
    segments_done: int
    characters_total: int
    characters_done: int
    progress: float = Field(..., description="Share of the characters translated, 0 to 1.")
    seconds_remaining: int | None = Field(
        None, description="Estimate from the speed so far; None before the first segment."
    )
    created_at: float
    expires_at: float = Field(..., description="When the job and its files are deleted.")
    glossary_id: str | None = Field(None, description="The stored glossary it applies.")
    error: str | None = None


class DocumentCreated(DocumentStatus):
    document_key: str = Field(
        ..., description="The job's key (DeepL's document_key); shown only once."
    )


def public_state(job: DocumentJob) -> Status:
    """Clients see a job being assembled as still translating."""
    return "translating" if job.state == "translated" else job.state


def status_of(job: DocumentJob) -> DocumentStatus:
    total = max(job.characters_total, 1)
    return DocumentStatus(
        id=job.id, name=job.name, format=job.format, status=public_state(job),
        source_lang=job.source_lang, target_lang=job.target_lang,
        segments_total=job.segments_total, segments_done=job.segments_done,
        characters_total=job.characters_total, characters_done=job.characters_done,
        progress=1.0 if job.state == "done" else round(job.characters_done / total, 4),
        seconds_remaining=seconds_remaining(job), created_at=job.created_at,
        expires_at=job.expires_at, glossary_id=job.options.get(GLOSSARY_ID),
        error=job.error,
    )  # fmt: skip


def owner(request: Request) -> str:
    return owner_of(getattr(request.state, "key_id", None))


async def read_upload(request: Request, max_bytes: int) -> tuple[UploadFile, bytes, FormData]:
    """The multipart form's ``file`` and its bytes (413 beyond ``max_bytes``), and the
    form's other fields (text decoded strictly: ``api/bodies.py``)."""
    form = await request_form(request, max_files=1, max_fields=50)
    file = form.get("file")
    if not isinstance(file, UploadFile):
        await form.close()
        raise InvalidRequest("Send the document as the 'file' field of a multipart/form-data body.")
    try:
        data = await file.read(max_bytes + 1)
    finally:
        await form.close()
    if len(data) > max_bytes:
        raise DocumentTooLarge(f"The document is larger than {max_bytes} bytes.")
    return file, data, form


def field(form: FormData, name: str) -> str | None:
    """A text field of the form (None when absent or empty); a 400 for a file in its place
    or for a field given twice with different values."""
    values = form.getlist(name)
    if any(not isinstance(v, str) for v in values):
        raise InvalidRequest(f"Invalid request: '{name}' must be a text field.")
    if any(v != values[0] for v in values[1:]):
        raise InvalidRequest(f"Invalid request: '{name}' was given more than once.")
    value = values[0] if values else None
    assert value is None or isinstance(value, str)
    return value or None


async def submit(request: Request, documents: ReplicaDocuments, upload: Upload) -> Submitted:
    """``upload`` stored as the caller's job, its characters charged to the caller's key
    as a translation's are (a quota it does not fit refuses it: DeepL's 456, the native and
    LibreTranslate 429), as DeepL counts a document's characters in its usage."""
    return await documents.submit(owner(request), upload, partial(charged, request))


async def with_glossary(
    request: Request, documents: ReplicaDocuments, upload: Upload, glossary_id: str | None
) -> Upload:
    """``upload`` with the caller's stored glossary ``glossary_id`` (if any) resolved now:
    404 for an unknown id or another key's, 400 without an explicit source language or for
    a language pair the glossary lacks, before anything is stored."""
    if not glossary_id:
        return upload
    if len(glossary_id) > MAX_GLOSSARY_ID_CHARS:
        raise InvalidRequest(
            f"Invalid request: glossary_id is at most {MAX_GLOSSARY_ID_CHARS} characters."
        )
    entries = await stored_glossary(
        request, documents.service, glossary_id, upload.source_lang, upload.target_lang
    )
    return replace(upload, glossary_id=glossary_id, glossary=entries)


def file_response(job: DocumentJob, data: bytes) -> Response:
    """The translated file as a download under the uploaded file's name (without the format
    characters ``file_name`` drops, from a job stored before it dropped them too)."""
    fmt = FORMATS.get(job.format)
    name = file_name(job.name) or f"document.{job.format}"
    ascii_name = name.encode("ascii", "replace").decode().replace('"', "'")
    disposition = f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name)}"
    return Response(
        content=data,
        media_type=fmt.media_type if fmt else "application/octet-stream",
        headers={"Content-Disposition": disposition},
    )


_ERROR = {"description": 'Error: {"error": {"code": ..., "message": ...}}'}
_ERRORS: dict[int | str, dict[str, Any]] = {c: _ERROR for c in (400, 401, 404, 409, 413, 422)}


def documents_router(app: FastAPI, documents: ReplicaDocuments) -> None:
    router = APIRouter(prefix="/documents", tags=["Documents"], responses=_ERRORS)
    max_bytes = documents.config.max_bytes

    @router.post("", response_model=DocumentCreated, status_code=201)
    async def upload(request: Request) -> DocumentCreated:
        """Uploads a document to translate (multipart: ``file``, ``target_lang``, optional
        ``source_lang``, ``formality``, ``format``, ``glossary_id``: a stored glossary of
        the caller's, which needs ``source_lang``)."""
        file, data, form = await read_upload(request, max_bytes)
        target = field(form, "target_lang")
        if not target:
            raise InvalidRequest("Invalid request: 'target_lang' is required.")
        formality = field(form, "formality") or "default"
        if formality not in ("default", "formal", "informal"):
            raise InvalidRequest("Invalid request: formality is default, formal or informal.")
        up = Upload(file.filename or "", data, target, field(form, "source_lang"),
                    field(form, "format"), formality)  # fmt: skip
        up = await with_glossary(request, documents, up, field(form, "glossary_id"))
        submitted = await submit(request, documents, up)
        return DocumentCreated(**status_of(submitted.job).model_dump(), document_key=submitted.key)

    @router.get("", response_model=list[DocumentStatus])
    async def list_documents(request: Request) -> list[DocumentStatus]:
        """The caller's documents that have not expired."""
        return [status_of(j) for j in await documents.jobs.store.list_documents(owner(request))]

    @router.get("/{document_id}", response_model=DocumentStatus)
    async def status(document_id: str, request: Request) -> DocumentStatus:
        """The document's status and progress."""
        return status_of(await documents.jobs.status(owner(request), document_id))

    @router.get("/{document_id}/result", responses={200: {"description": "The file."}})
    async def result(document_id: str, request: Request) -> Response:
        """The translated file (409 while it is being translated)."""
        return file_response(*await documents.jobs.result(owner(request), document_id))

    @router.delete("/{document_id}", status_code=204)
    async def delete(document_id: str, request: Request) -> Response:
        """Deletes the document and its files."""
        await documents.jobs.delete(owner(request), document_id)
        return Response(status_code=204)

    app.include_router(router)
