"""What the layers need to know about the request being served, without passing it down.

``current_key``: the id of the API key that sent it (``""`` when keys are off), set by the
API's key middleware. The translation cache is scoped by it, so one key's translations are
never served (nor their existence revealed by a cache hit) to another.
"""

from __future__ import annotations

from contextvars import ContextVar

current_key: ContextVar[str] = ContextVar("serve_app_current_key", default="")
