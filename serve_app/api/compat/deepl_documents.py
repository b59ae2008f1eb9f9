"""DeepL's document translation, as deepl-python's ``translate_document`` drives it.

``POST /v2/document`` (multipart: ``file``, ``target_lang``, optional ``source_lang``,
``formality``, ``output_format``, ``glossary_id``: a stored glossary, v2 or v3, which needs
``source_lang``, as on ``/v2/translate``) answers ``{"document_id", "document_key"}``;
``POST /v2/document/{id}`` with ``document_key`` (JSON or form) answers ``{"document_id",
"status", "seconds_remaining", "billed_characters", "error_message"}`` (statuses queued,
translating, done, error); ``POST /v2/document/{id}/result`` with ``document_key`` answers
the file, or 503 while it is not ready (the client's DocumentNotReadyException).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response

from serve_app.api.compat.common import Params, get_and_post, one, read_params
from serve_app.api.compat.deepl_glossaries import checked_id
from serve_app.api.compat.deepl_options import refuse_unsupported
from serve_app.api.documents import (
    field,
    file_response,
    owner,
    public_state,
    read_upload,
    submit,
    with_glossary,
)
from serve_app.core.errors import InvalidRequest, UnsupportedOption
from serve_app.documents.jobs import Upload, seconds_remaining
from serve_app.documents.replica import ReplicaDocuments
from serve_app.store import DocumentJob


def _status(job: DocumentJob) -> dict[str, Any]:
    body: dict[str, Any] = {"document_id": job.id, "status": public_state(job)}
    if body["status"] == "translating":
        body["seconds_remaining"] = seconds_remaining(job)
    if job.state == "done":
        body["billed_characters"] = job.characters_total
    if job.state == "error":
        body["error_message"] = job.error or "The translation failed."
    return body


async def _key(request: Request) -> str:
    key = one(await read_params(request), "document_key")
    if not isinstance(key, str) or not key:
        raise InvalidRequest("Parameter 'document_key' not specified.")
    return key


def deepl_document_routes(
    router: APIRouter,
    documents: ReplicaDocuments,
    formality: Callable[[Any], str],
    require_auth: Callable[[Request, Params], None],
) -> None:
    """Adds the document routes to DeepL's ``/v2`` router. ``formality(value)`` maps
    DeepL's formality; ``require_auth(request, params)`` is DeepL's auth check."""
    max_bytes = documents.config.max_bytes

    @router.post("/document")
    async def upload(request: Request) -> dict[str, str]:
        """DeepL ``POST /v2/document``: upload a document to translate."""
        require_auth(request, {})
        file, data, form = await read_upload(request, max_bytes)
        target = field(form, "target_lang")
        if not target:
            raise InvalidRequest("Parameter 'target_lang' not specified.")
        glossary_id = field(form, "glossary_id")
        refuse_unsupported(lambda name: any(form.getlist(name)))  # glossary_ids, style_id...
        if glossary_id:
            glossary_id = checked_id(glossary_id)
            if not field(form, "source_lang"):
                raise InvalidRequest("Parameter 'source_lang' is required when using a glossary.")
        name = field(form, "filename") or file.filename or ""
        wanted = field(form, "output_format")
        if wanted and name.rsplit(".", 1)[-1].lower() != wanted.lower().lstrip("."):
            raise UnsupportedOption("output_format must be the input file's own format.")
        up = Upload(name, data, target, field(form, "source_lang"), None,
                    formality(field(form, "formality") or "default"))  # fmt: skip
        up = await with_glossary(request, documents, up, glossary_id)
        submitted = await submit(request, documents, up)
        return {"document_id": submitted.job.id, "document_key": submitted.key}

    @get_and_post(router, "/document/{document_id}", "deepl_document_status")
    async def status(document_id: str, request: Request) -> dict[str, Any]:
        """DeepL ``POST /v2/document/{document_id}``: the translation's status."""
        require_auth(request, {})
        key = await _key(request)
        return _status(await documents.jobs.status(owner(request), document_id, key))

    @get_and_post(router, "/document/{document_id}/result", "deepl_document_result")
    async def result(document_id: str, request: Request) -> Response:
        """DeepL ``POST /v2/document/{document_id}/result``: the translated file."""
        require_auth(request, {})
        key = await _key(request)
        return file_response(*await documents.jobs.result(owner(request), document_id, key))
