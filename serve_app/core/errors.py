"""The service's error taxonomy: every error a client can cause or see, with a stable code.

Client errors (``ClientError``: the request is wrong) and server errors (``ServerError``: try
again later) are told apart by type. The types know nothing of HTTP: ``api/errors.py`` is the
one place that maps them to statuses and response bodies, in each API's own shape.
"""

from __future__ import annotations

from typing import ClassVar


class ServiceError(Exception):
    """Base of every error the service answers with a status of its own."""

    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, *, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s


class ClientError(ServiceError):
    """The request cannot be served as sent; sending it again will not help."""

    code = "client_error"


class ServerError(ServiceError):
    """The service cannot serve the request now (overload, engine trouble, deadline); a retry
    may succeed, on this replica or another."""

    code = "server_error"


class InvalidRequest(ClientError):
    code = "invalid_request"


class InvalidLanguageCode(ClientError):
    code = "invalid_language_code"


class UnsupportedLanguage(ClientError):
    code = "unsupported_language"


class UnsupportedLanguagePair(ClientError):
    code = "unsupported_language_pair"


class UnsupportedOption(ClientError):
    """A request option (glossary, context, formality) the configured model cannot follow."""

    code = "unsupported_option"


class LanguageDetectionFailed(ClientError):
    code = "language_detection_failed"


class TextTooLong(ClientError):
    code = "text_too_long"


class BatchTooLarge(ClientError):
    code = "batch_too_large"


class BodyTooLarge(ClientError):
    code = "body_too_large"


class UnsupportedContentEncoding(InvalidRequest):
    """A request body compressed (``Content-Encoding: gzip``, ``br``...): bodies are read
    as sent, never decompressed."""

    code = "unsupported_content_encoding"


class RequestTimeout(ClientError):
    """The request's body did not arrive within its deadline (``security.body_timeout_s``):
    a client sending it too slowly, or stalled."""

    code = "request_timeout"


class Unauthorized(ClientError):
    code = "unauthorized"


class MissingKey(Unauthorized):
    """No API key, or one the service does not know. The answer completes the message with
    how the called API takes keys (``api/errors.py``: DeepL's ``DeepL-Auth-Key`` scheme,
    LibreTranslate's ``api_key`` parameter, a bearer token elsewhere)."""

    def __init__(self, message: str = "Missing or invalid API key") -> None:
        super().__init__(message)


class Forbidden(ClientError):
    code = "forbidden"


class Overloaded(ServerError):
    code = "overloaded"


class EngineUnavailable(ServerError):
    """The engine is starting, stopping or dead; another replica may serve the retry."""

    code = "engine_unavailable"


class DeadlineExceeded(ServerError):
    code = "deadline_exceeded"


# The store's errors (glossaries, API keys and quotas, document jobs): see serve_app/store/.


class NotFound(ClientError):
    code = "not_found"


class GlossaryNotFound(NotFound):
    code = "glossary_not_found"


class ModelNotFound(NotFound):
    """A model name this service does not serve (the OpenAI API's ``model``)."""

    code = "model_not_found"


class DocumentNotFound(NotFound):
    code = "document_not_found"


class KeyNotFound(NotFound):
    code = "key_not_found"


class InvalidGlossary(ClientError):
    """Entries that cannot be stored: empty or over-long terms, duplicates, bad language pairs."""

    code = "invalid_glossary"


class GlossaryTooLarge(ClientError):
    code = "glossary_too_large"


class InvalidDocument(ClientError):
    code = "invalid_document"


class DocumentTooLarge(ClientError):
    code = "document_too_large"


class DocumentNotReady(ClientError):
    """The document's translation is still running: nothing to download yet."""

    code = "document_not_ready"


class DocumentFailed(ClientError):
    """The document's translation failed: there will never be a file to download (not a
    "not ready", which clients retry)."""

    code = "document_failed"


class LimitReached(ClientError):
    """An owner holds as many glossaries or documents as it may: delete some first."""

    code = "limit_reached"


class NameTaken(ClientError):
    code = "name_taken"


class QuotaExceeded(ClientError):
    """The key's characters for this month are used up (DeepL answers 456);
    ``retry_after_s``: until the month ends."""

    code = "quota_exceeded"


class RateLimited(ClientError):
    """The key's requests per minute are used up; ``retry_after_s`` says when to retry."""

    code = "rate_limited"


class StoreUnavailable(ServerError):
    code = "store_unavailable"


# Documents (serve_app/documents).


class UnsupportedDocumentFormat(ClientError):
    code = "unsupported_document_format"


class MalformedDocument(ClientError):
    """The file could not be read as the format its name says; the message says why."""

    code = "malformed_document"


class EngineStartupError(RuntimeError):
    """The engine could not start (model missing, timeout): the replica fails to start."""


class KeysMissing(RuntimeError):
    """A configured source of API keys (``security.api_keys_env``, ``api_keys_file``) yields
    no key on this node: the replica refuses to start, rather than serve with keys off."""
