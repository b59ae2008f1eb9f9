"""LibreTranslate's file translation: ``POST /translate_file`` and ``GET /download_file``.

As in LibreTranslate, ``/translate_file`` (multipart: ``file``, ``source`` (a code or
``auto``), ``target``, ``api_key``; ``glossary_id``, an extension as on ``/translate``: a
stored glossary of the key, which needs an explicit ``source``) answers once the file is
translated, with ``{"translatedFileUrl": ".../download_file/<id>.<name>"}``; the download
answers the file under its original name. The job id in the URL is the download's only
credential, as the random name is in LibreTranslate. A file not done within
``documents.wait_timeout_s`` gets a 504, and its job is deleted, as is the job of a client
that leaves while it waits: the id is given only in the answer, so nobody could fetch the
file, and each retry stacked one more job against the key's documents.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import quote

from fastapi import APIRouter, Request, Response

from serve_app.api.compat.libre_codes import libre_code
from serve_app.api.documents import (
    field,
    file_response,
    read_upload,
    submit,
    with_glossary,
)
from serve_app.core.errors import InvalidRequest
from serve_app.documents.jobs import Upload
from serve_app.documents.replica import ReplicaDocuments
from serve_app.store import DocumentJob

logger = logging.getLogger("ray.serve.translator")


async def _dropped(documents: ReplicaDocuments, job: DocumentJob) -> None:
    """Deletes a job whose id its client will never learn (already gone: nothing to do)."""
    try:
        await documents.jobs.delete(job.owner, job.id)
    except Exception as exc:  # deleted or expired meanwhile, or the store away: it expires
        logger.info("document %s not dropped: %r", job.id, exc)


def libre_document_routes(router: APIRouter, documents: ReplicaDocuments, prefix: str) -> None:
    max_bytes = documents.config.max_bytes

    @router.post("/translate_file")
    async def translate_file(request: Request) -> dict[str, str]:
        """LibreTranslate ``POST /translate_file``: the file translated, as a download URL."""
        file, data, form = await read_upload(request, max_bytes)
        target = libre_code(field(form, "target"))
        if not target:
            raise InvalidRequest("Invalid request: missing target parameter")
        if not file.filename:
            raise InvalidRequest("Invalid request: empty file")
        up = Upload(file.filename, data, target, libre_code(field(form, "source")))
        up = await with_glossary(request, documents, up, field(form, "glossary_id"))
        submitted = await submit(request, documents, up)
        job_id = submitted.job.id
        try:
            await documents.jobs.wait(None, job_id, documents.config.wait_timeout_s)
        except BaseException:  # the 504, or the client gone (cancelled)
            await asyncio.shield(_dropped(documents, submitted.job))
            raise
        await documents.jobs.result(None, job_id)  # a failed job answers its error here
        base = str(request.base_url).rstrip("/")
        url = f"{base}{prefix}/download_file/{job_id}.{quote(submitted.job.name, safe='')}"
        return {"translatedFileUrl": url}

    @router.get("/download_file/{filename}")
    async def download_file(filename: str) -> Response:
        """LibreTranslate ``GET /download_file/<name>``: a translated file."""
        job_id = filename.split(".", 1)[0]
        return file_response(*await documents.jobs.result(None, job_id))
