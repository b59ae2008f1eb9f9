"""What the layers need to know about the request being served, without passing it down.

``current_key``: the id of the API key that sent it (``""`` when keys are off), set by the
API's key middleware. The translation cache is scoped by it, so one key's translations are
never served (nor their existence revealed by a cache hit) to another.

``engine_priority``: the vLLM request priority of the engine requests made for it (lower is
served first; live requests are 0). Document segments are translated under a larger one
(``documents.engine_priority``), so an engine scheduling by priority serves live requests
first and documents fill the rest.

``same_language_kept``: a text already in its target language (given, or detected) is answered
as it is, not refused (the native API's 400 ``unsupported_language_pair``). Set by the DeepL
and LibreTranslate routes: DeepL answers such a text unchanged with its detected language,
and LibreTranslate (Argos Translate's identity translation) returns it too, so a batch holding
one text in the target language was refused whole here.
"""

from __future__ import annotations

from contextvars import ContextVar

current_key: ContextVar[str] = ContextVar("serve_app_current_key", default="")
engine_priority: ContextVar[int] = ContextVar("serve_app_engine_priority", default=0)
same_language_kept: ContextVar[bool] = ContextVar("serve_app_same_language_kept", default=False)
