"""Markup parameters of the compatibility APIs, as the native item's ``format`` and
``tag_options``: LibreTranslate's ``format`` (``text``, ``html``) and DeepL's
``tag_handling`` (``html``, ``xml``) with ``ignore_tags``, ``non_splitting_tags``,
``splitting_tags`` (JSON lists or comma-separated strings, as DeepL takes them) and
``outline_detection`` (``0``/``1`` or a boolean). With ``tag_handling_version=v2`` DeepL
parses XML strictly and refuses a text that is not well-formed (``check_well_formed``)."""

from __future__ import annotations

import pyexpat
from typing import Any

from serve_app.api.compat.common import Params, one
from serve_app.core.errors import InvalidRequest

_TAG_LISTS = ("ignore_tags", "non_splitting_tags", "splitting_tags")
_BOOLS = {"1": True, "true": True, "0": False, "false": False}
# DeepL's words for a text tag handling v2 cannot parse as XML.
NOT_WELL_FORMED = "Tag handling parsing failed, please check input."


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


def check_well_formed(texts: list[str]) -> None:
    """InvalidRequest (DeepL's ``NOT_WELL_FORMED``) unless every text is well-formed XML
    content: elements balanced, XML's five entities and character references only, no
    DTD (where entity bombs live). A text may start with an XML declaration. Expat reads
    each once, linearly: call it off the event loop."""
    for text in texts:
        body = text
        if body.startswith("<?xml"):
            end = body.find("?>")
            body = body[end + 2 :] if end >= 0 else body
        parser = pyexpat.ParserCreate()
        parser.StartDoctypeDeclHandler = _refuse_dtd
        try:
            parser.Parse(f"<r>{body}</r>", True)
        except (pyexpat.ExpatError, _DTD) as exc:
            raise InvalidRequest(NOT_WELL_FORMED) from exc


class _DTD(Exception):
    """A document type declaration: XML content holds none."""


def _refuse_dtd(*_: object) -> None:
    raise _DTD
