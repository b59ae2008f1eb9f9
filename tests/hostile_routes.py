"""The routes ``tests/hostile.py`` fuzzes, each with a valid request to break: the native
API's, the compatibility APIs' (DeepL, LibreTranslate, OpenAI) and those over the store
(glossaries, documents): every route of the app but FastAPI's own pages (``/openapi.json``,
``/docs``, ``/redoc``). Kept apart from the strategies, so that a new route is one line in
one of these lists.

The store's routes name a glossary or a document by ids no store made (``ABSENT_IDS``): as
they are, their handlers answer 404 before any of their own code runs. A harness that
created a real glossary and document job swaps these ids for theirs in a share of the cases
(``tests/hostile.py``, ``Case.real``, ``with_ids``), so that the code behind the 404 is
fuzzed too."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEEPL_AUTH = {"Authorization": "DeepL-Auth-Key fuzz"}
LIBRE = "/libretranslate"
ITEM = {"text": "Hello world", "source_lang": "en", "target_lang": "de"}


@dataclass(frozen=True)
class Route:
    """A route and a valid request for it: ``fields`` (JSON or form) and how it is sent."""

    method: str
    path: str
    api: str  # native, deepl, libre or openai: the error shape
    fields: dict[str, Any]
    kinds: tuple[str, ...] = ("json",)  # json, form, multipart, query
    headers: dict[str, str] = field(default_factory=dict)

    def names_an_id(self) -> bool:
        """Whether its path or fields name a glossary, a document or a document key (of
        ``ABSENT_IDS``), which a harness may swap for a real one's."""
        where = self.path + repr(self.fields)
        return any(absent in where for absent in ABSENT_IDS)


NATIVE_ROUTES = (
    Route("POST", "/translate", "native", ITEM),
    Route("POST", "/translate/stream", "native", ITEM),
    Route("POST", "/translate/batch", "native", {"items": [ITEM, {**ITEM, "text": "Bye"}]}),
    Route("GET", "/languages", "native", {}, ("query",)),
    Route("GET", "/healthz", "native", {}, ("query",)),
    Route("GET", "/readyz", "native", {}, ("query",)),
    Route("GET", "/usage", "native", {}, ("query",)),
    Route("GET", "/cache", "native", {}, ("query",)),
    Route("GET", "/ui/config", "native", {}, ("query",)),
    Route("GET", "/", "native", {}, ("query",)),
    Route("GET", "/ui/static/app.js", "native", {}, ("query",)),
    Route("GET", "/ui/static/missing.js", "native", {}, ("query",)),
)
COMPAT_ROUTES = (
    Route(
        "POST",
        "/v2/translate",
        "deepl",
        {"text": ["Hello world"], "target_lang": "DE", "source_lang": "EN", "formality": "less"},
        ("json", "form", "multipart"),
        DEEPL_AUTH,
    ),
    Route("POST", "/v2/languages", "deepl", {"type": "target"}, ("json", "form"), DEEPL_AUTH),
    Route("GET", "/v2/languages", "deepl", {"type": "source"}, ("query",), DEEPL_AUTH),
    Route("POST", "/v2/usage", "deepl", {}, ("json", "form"), DEEPL_AUTH),
    Route("GET", "/v2/usage", "deepl", {}, ("query",), DEEPL_AUTH),
    Route(
        "POST",
        LIBRE + "/translate",
        "libre",
        {"q": "Hello world", "source": "en", "target": "de", "format": "text", "alternatives": 0},
        ("json", "form", "multipart"),
    ),
    Route("POST", LIBRE + "/detect", "libre", {"q": "Hello world"}, ("json", "form")),
    Route("GET", LIBRE + "/languages", "libre", {}, ("query",)),
    Route("POST", LIBRE + "/languages", "libre", {}, ("json", "form")),
    Route("GET", LIBRE + "/frontend/settings", "libre", {}, ("query",)),
    Route(
        "POST",
        "/v1/chat/completions",
        "openai",
        {"model": "tiny", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8},
    ),
    Route("GET", "/v1/models", "openai", {}, ("query",)),
    Route("GET", "/v1/models/tiny", "openai", {}, ("query",)),
    Route(
        "POST",
        "/v1/responses",
        "openai",
        {"model": "tiny", "input": "Hello", "instructions": "Into German.", "max_output_tokens": 8},
    ),
)
DICTIONARY = {"source_lang": "en", "target_lang": "de", "entries": "cart\tWarenkorb"}
PAIR = {"source_lang": "en", "target_lang": "de"}
# No such glossary or document (or key): their routes answer 404 (or the request's own 4xx),
# unless a harness swaps them for a real glossary's and document's (``ABSENT_IDS``). Only
# letters and digits: they read the same in a path, a query, a form and JSON.
GLOSSARY = "0123456789abcdef"
DOCUMENT = "fedcba9876543210"
DOCUMENT_KEY = "fuzzdocumentkey0"
ABSENT_IDS = (GLOSSARY, DOCUMENT, DOCUMENT_KEY)
KEY = {"document_key": DOCUMENT_KEY}
# Routes over the store: documents and glossaries.
STORE_ROUTES = (
    Route("POST", "/glossaries", "native", {"name": "g", "dictionaries": [DICTIONARY]}),
    Route("GET", "/glossaries", "native", {}, ("query",)),
    Route(
        "POST",
        "/v2/glossaries",
        "deepl",
        {"name": "g", "entries_format": "tsv", **DICTIONARY},
        ("json", "form"),
        DEEPL_AUTH,
    ),
    Route(
        "POST",
        "/v3/glossaries",
        "deepl",
        {"name": "g", "dictionaries": [DICTIONARY]},
        ("json",),
        DEEPL_AUTH,
    ),
    Route("GET", "/glossaries/" + GLOSSARY, "native", {}, ("query",)),
    Route("GET", "/glossaries/" + GLOSSARY + "/entries", "native", PAIR, ("query",)),
    Route(
        "PATCH", "/glossaries/" + GLOSSARY, "native", {"name": "g2", "dictionaries": [DICTIONARY]}
    ),
    Route("DELETE", "/glossaries/" + GLOSSARY + "/dictionaries", "native", PAIR, ("query",)),
    Route("DELETE", "/glossaries/" + GLOSSARY, "native", {}, ("query",)),
    Route("GET", "/v2/glossaries", "deepl", {}, ("query",), DEEPL_AUTH),
    Route("GET", "/v2/glossaries/" + GLOSSARY, "deepl", {}, ("query",), DEEPL_AUTH),
    Route("GET", "/v2/glossaries/" + GLOSSARY + "/entries", "deepl", {}, ("query",), DEEPL_AUTH),
    Route("DELETE", "/v2/glossaries/" + GLOSSARY, "deepl", {}, ("query",), DEEPL_AUTH),
    Route("GET", "/v3/glossaries", "deepl", {}, ("query",), DEEPL_AUTH),
    Route("GET", "/v3/glossaries/" + GLOSSARY, "deepl", {}, ("query",), DEEPL_AUTH),
    Route("GET", "/v3/glossaries/" + GLOSSARY + "/entries", "deepl", PAIR, ("query",), DEEPL_AUTH),
    Route(
        "PATCH",
        "/v3/glossaries/" + GLOSSARY,
        "deepl",
        {"name": "g2", "dictionaries": [DICTIONARY]},
        ("json",),
        DEEPL_AUTH,
    ),
    Route(
        "PUT",
        "/v3/glossaries/" + GLOSSARY + "/dictionaries",
        "deepl",
        {"entries_format": "tsv", **DICTIONARY},
        ("json", "form"),
        DEEPL_AUTH,
    ),
    Route(
        "DELETE",
        "/v3/glossaries/" + GLOSSARY + "/dictionaries",
        "deepl",
        PAIR,
        ("query",),
        DEEPL_AUTH,
    ),
    Route("DELETE", "/v3/glossaries/" + GLOSSARY, "deepl", {}, ("query",), DEEPL_AUTH),
    Route("GET", "/v2/glossary-language-pairs", "deepl", {}, ("query",), DEEPL_AUTH),
    Route("POST", "/v2/glossary-language-pairs", "deepl", {}, ("json", "form"), DEEPL_AUTH),
    Route("POST", "/documents", "native", {"target_lang": "de"}, ("upload",)),
    Route("GET", "/documents", "native", {}, ("query",)),
    Route("GET", "/documents/" + DOCUMENT, "native", {}, ("query",)),
    Route("GET", "/documents/" + DOCUMENT + "/result", "native", {}, ("query",)),
    Route("DELETE", "/documents/" + DOCUMENT, "native", {}, ("query",)),
    Route("POST", "/v2/document", "deepl", {"target_lang": "DE"}, ("upload",), DEEPL_AUTH),
    Route("POST", "/v2/document/" + DOCUMENT, "deepl", KEY, ("json", "form"), DEEPL_AUTH),
    Route("GET", "/v2/document/" + DOCUMENT, "deepl", KEY, ("query",), DEEPL_AUTH),
    Route(
        "POST", "/v2/document/" + DOCUMENT + "/result", "deepl", KEY, ("json", "form"), DEEPL_AUTH
    ),
    Route("GET", "/v2/document/" + DOCUMENT + "/result", "deepl", KEY, ("query",), DEEPL_AUTH),
    Route("POST", LIBRE + "/translate_file", "libre", {"target": "de"}, ("upload",)),
    Route("GET", LIBRE + "/download_file/" + DOCUMENT + ".txt", "libre", {}, ("query",)),
)
ROUTES = NATIVE_ROUTES + COMPAT_ROUTES
