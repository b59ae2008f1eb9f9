"""Markup parameters of the compatibility APIs, as the native item's ``format`` and
``tag_options``: LibreTranslate's ``format`` (``text``, ``html``) and DeepL's
``tag_handling`` (``html``, ``xml``) with ``ignore_tags``, ``non_splitting_tags``,
``splitting_tags`` (JSON lists or comma-separated strings, as DeepL takes them) and
``outline_detection`` (``0``/``1`` or a boolean)."""

from __future__ import annotations

from typing import Any

from serve_app.api.compat.common import Params, one
from serve_app.core.errors import InvalidRequest

_TAG_LISTS = ("ignore_tags", "non_splitting_tags", "splitting_tags")
_BOOLS = {"1": True, "true": True, "0": False, "false": False}


def libre_format(params: Params) -> str:
    fmt = str(one(params, "format", "text") or "text").lower()
    if fmt not in ("text", "html"):
        raise InvalidRequest(f"Invalid request: format must be 'text' or 'html', not '{fmt}'.")
    return fmt


def deepl_markup(params: Params) -> dict[str, Any]:
    """``format`` and ``tag_options`` for the items of a DeepL request."""
    handling = one(params, "tag_handling")
    if handling in (None, ""):
        return {}
    if handling not in ("html", "xml"):
        raise InvalidRequest(f"Invalid tag_handling '{handling}': use 'html' or 'xml'.")
    options: dict[str, Any] = {name: _tags(params.get(name, [])) for name in _TAG_LISTS}
    outline = one(params, "outline_detection")
    if outline is not None:
        options["outline_detection"] = _bool("outline_detection", outline)
    return {"format": handling, "tag_options": options}


def _tags(values: list[Any]) -> list[str]:
    tags: list[str] = []
    for value in values:
        if not isinstance(value, str):
            raise InvalidRequest("Tag lists hold tag names (strings).")
        tags.extend(t.strip() for t in value.split(",") if t.strip())
    return tags


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    key = str(value).strip().lower()
    if key not in _BOOLS:
        raise InvalidRequest(f"Invalid {name} '{value}': use 0 or 1.")
    return _BOOLS[key]
