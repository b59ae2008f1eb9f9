"""OpenAI's error shape, ``{"error": {"message", "type", "param", "code"}}``, with the
statuses its clients act on (``openai`` raises ``BadRequestError`` on 400,
``AuthenticationError`` on 401, ``NotFoundError`` on 404, ``RateLimitError`` on 429 and
retries 429 and 5xx itself)."""

from __future__ import annotations

from typing import Any

from serve_app.core.errors import QuotaExceeded, RateLimited, TextTooLong, Unauthorized

# A 429 for a used-up quota, in OpenAI's words, which clients tell from a rate limit (code
# ``rate_limit_exceeded``) by.
INSUFFICIENT_QUOTA = "insufficient_quota"

_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


def openai_error(status: int, code: str, message: str) -> tuple[int, dict[str, Any]]:
    if status == 422:  # OpenAI answers every bad parameter with a 400
        status = 400
    if code == TextTooLong.code:  # OpenAI's code for a prompt beyond the context
        status, code = 400, "context_length_exceeded"
    if code == Unauthorized.code:
        code = "invalid_api_key"
    if code == RateLimited.code:
        code = "rate_limit_exceeded"
    kind = "server_error" if status >= 500 else _TYPES.get(status, "invalid_request_error")
    if code == QuotaExceeded.code:  # OpenAI's type and code for a used-up quota
        kind = code = INSUFFICIENT_QUOTA
    return status, {"error": {"message": message, "type": kind, "param": None, "code": code}}
