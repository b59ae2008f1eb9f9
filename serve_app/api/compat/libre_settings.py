"""LibreTranslate's ``GET /frontend/settings``, in its shape: the character limit, whether
API keys are on and required, file translation and its extensions, and the default source
(``auto``) and target languages. LibreTranslate's own web page and some of its clients read it
before anything else."""

from __future__ import annotations

from typing import Any

from serve_app.api.security import load_api_keys
from serve_app.documents import FORMATS
from serve_app.documents.replica import ReplicaDocuments
from serve_app.store.protocol import Store
from serve_app.translation.service import TranslationService

# LibreTranslate's default --frontend-timeout (milliseconds of typing before it translates).
FRONTEND_TIMEOUT_MS = 500


def keys_required(service: TranslationService, store: Store | None) -> bool:
    """Whether requests need an API key: keys in the environment or key file, or stored
    keys switched on with a store."""
    security = service.config.security
    return bool(load_api_keys(security)) or (store is not None and security.store_keys)


def frontend_settings(
    service: TranslationService, documents: ReplicaDocuments | None, store: Store | None
) -> dict[str, Any]:
    languages = service.languages.languages
    target = "en" if "en" in languages else next(iter(languages))
    extensions = sorted({ext for fmt in FORMATS.values() for ext in fmt.extensions})
    keys = keys_required(service, store)
    return {
        "charLimit": service.limits.max_text_chars,
        "frontendTimeout": FRONTEND_TIMEOUT_MS,
        "apiKeys": keys,
        "keyRequired": keys,
        "suggestions": False,
        "filesTranslation": documents is not None,
        "supportedFilesFormat": extensions if documents is not None else [],
        "language": {
            "source": {"code": "auto", "name": "Auto Detect"},
            "target": {"code": target, "name": languages[target].name},
        },
    }
