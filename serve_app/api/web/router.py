"""The web page at ``/``: a plain HTML/CSS/JS page shipped inside the package (no CDN, no
build step) and ``GET /ui/config``, which tells it what this server can do.

The page's files hold no secrets, so they are served without a key (``security.OPEN_PATHS``);
everything the page fetches (config, languages, translations) goes through the API as any
client's request would, key included. Files are read once, when the app is built, and served
from memory with an ETag (a reload costs a 304) and a strict Content-Security-Policy: the page
can load nothing from another origin.
"""

from __future__ import annotations

import hashlib
import types
import typing
from dataclasses import dataclass
from importlib import resources

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from serve_app.api.web.schemas import UiConfig
from serve_app.core.schemas import TranslateRequest
from serve_app.documents import FORMATS
from serve_app.translation.service import TranslationService

STATIC_PREFIX = "/ui/static/"
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Revalidated on every load (ETag): a new version shows at once, an unchanged one costs 304.
    "Cache-Control": "no-cache",
}


@dataclass(frozen=True)
class StaticFile:
    body: bytes
    media_type: str
    etag: str

    def response(self, request: Request) -> Response:
        headers = {**_HEADERS, "ETag": self.etag}
        if _matches(request.headers.get("if-none-match", ""), self.etag):
            return Response(status_code=304, headers=headers)
        return Response(self.body, media_type=self.media_type, headers=headers)


def _matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110's If-None-Match: ``*`` or a list of tags, compared weakly (``W/"x"`` is
    ``"x"``). ``*`` was a 200 with the whole file."""
    tags = [tag.strip() for tag in if_none_match.split(",")]
    return any(tag == "*" or tag.removeprefix("W/") == etag for tag in tags)


def load_static() -> dict[str, StaticFile]:
    """The page's files by name, read from the package (``static/``)."""
    folder = resources.files("serve_app.api.web") / "static"
    files = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1]
        if entry.is_file() and suffix in _TYPES:
            body = entry.read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            files[entry.name] = StaticFile(body, _TYPES[suffix], etag)
    return files


def request_formats() -> list[str]:
    """The values the native request's ``format`` field takes; empty when it has none."""
    field = TranslateRequest.model_fields.get("format")
    return _literal_values(field.annotation) if field is not None else []


def _literal_values(annotation: object) -> list[str]:
    if typing.get_origin(annotation) is typing.Literal:
        return [str(v) for v in typing.get_args(annotation)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [v for arg in typing.get_args(annotation) for v in _literal_values(arg)]
    return []


def _extensions() -> list[str]:
    return sorted({ext for fmt in FORMATS.values() for ext in fmt.extensions})


def ui_config(service: TranslationService, request: Request) -> UiConfig:
    config = service.config
    paths = {route.path for route in request.app.routes if isinstance(route, APIRoute)}
    return UiConfig(
        model=config.served_model_name,
        family=config.prompt.family,
        options=sorted(service.family.supports),
        formats=request_formats(),
        max_text_chars=config.limits.max_text_chars,
        max_body_bytes=config.security.max_body_bytes,
        usage="/usage" in paths,
        documents="/documents" in paths,
        document_extensions=_extensions() if "/documents" in paths else [],
        glossaries="/glossaries" in paths and "glossary" in service.family.supports,
        version=request.app.version,
    )


def web_router(service: TranslationService) -> APIRouter:
    """``/`` (the page), ``/ui/static/NAME`` (its files) and ``/ui/config``."""
    router = APIRouter()
    files = load_static()

    @router.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def page(request: Request) -> Response:
        return files["index.html"].response(request)

    @router.api_route(STATIC_PREFIX + "{name}", methods=["GET", "HEAD"], include_in_schema=False)
    async def static(name: str, request: Request) -> Response:
        file = files.get(name)
        if file is None or name == "index.html":
            raise HTTPException(404)
        return file.response(request)

    @router.get("/ui/config", response_model=UiConfig)
    async def config(request: Request) -> UiConfig:
        """What the web page needs: model, limits, and the options this server supports."""
        return ui_config(service, request)

    return router
