"""Checks every backend applies before it writes, so both refuse the same input alike.

What PostgreSQL cannot store (NUL characters, lone surrogates) is refused here with a clear
400 instead of surfacing as a driver error (a 500) on one backend only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from serve_app.core.aio import sized
from serve_app.core.characters import bad_character, invisible
from serve_app.core.errors import (
    DocumentTooLarge,
    GlossaryTooLarge,
    InvalidDocument,
    InvalidGlossary,
    InvalidRequest,
)
from serve_app.core.store_config import StoreLimits
from serve_app.store.protocol import GlossaryDictionary, NewSegment

MAX_LANG_CHARS = 35  # BCP 47 tags are far shorter; the bound keeps junk out
MAX_OPTIONS_BYTES = 64 * 1024
# Above this many characters of terms, a glossary's checks leave the event loop (a
# thread): a 20 M character glossary takes about 0.2 s to check.
THREAD_ABOVE_CHARS = 100_000


def check_name(name: str, limits: StoreLimits, what: str) -> str:
    name = name.strip()
    if len(name) > limits.max_name_chars:
        raise InvalidRequest(f"The {what} name is longer than {limits.max_name_chars} characters.")
    if invisible(name):  # empty, or only zero-width and format characters
        raise InvalidRequest(f"The {what} name must not be empty.")
    if bad := bad_character(name):
        raise InvalidRequest(f"The {what} name contains the control character {bad}.")
    return name


def may_name_a_row(row_id: str) -> bool:
    """Whether ``row_id`` can be an id this store made (hex and UUIDs): one that holds a
    control character or a lone surrogate (``/documents/%00``, a ``glossary_id`` of
    ``"\\u0000"``) names no row, and is answered as not found on both backends;
    PostgreSQL's driver refused to compare it (a 500)."""
    return bad_character(row_id) is None


def check_lang(code: str, what: str) -> str:
    code = code.strip().lower()
    if not code or len(code) > MAX_LANG_CHARS or bad_character(code) or " " in code:
        raise InvalidGlossary(f"Invalid {what} language code {code[:MAX_LANG_CHARS]!r}.")
    return code


def _check_term(term: str, where: str, limits: StoreLimits) -> str:
    term = term.strip()
    if len(term) > limits.max_term_chars:
        raise InvalidGlossary(
            f"{where} is {len(term)} characters long; at most {limits.max_term_chars} are allowed."
        )
    if invisible(term):  # empty, or only zero-width and format characters
        raise InvalidGlossary(f"{where} is empty.")
    if bad := bad_character(term):
        raise InvalidGlossary(f"{where} contains the control character {bad}.")
    return term


def check_dictionary(d: GlossaryDictionary, limits: StoreLimits) -> GlossaryDictionary:
    """The dictionary with codes lower-cased and terms stripped; duplicate source terms,
    empty, over-long or control-character terms are refused."""
    source_lang, target_lang = (
        check_lang(d.source_lang, "source"),
        check_lang(d.target_lang, "target"),
    )
    if source_lang == target_lang:
        raise InvalidGlossary(f"Source and target language are both {source_lang!r}.")
    pair = f"{source_lang}->{target_lang}"
    if not d.entries:
        raise InvalidGlossary(f"The {pair} dictionary has no entries.")
    entries, seen = [], set()
    for n, (source, target) in enumerate(d.entries, 1):
        source = _check_term(source, f"Entry {n} of {pair}: the source term", limits)
        target = _check_term(target, f"Entry {n} of {pair}: the target term", limits)
        if source in seen:
            raise InvalidGlossary(f"Entry {n} of {pair}: the source term {source!r} is repeated.")
        seen.add(source)
        entries.append((source, target))
    return GlossaryDictionary(source_lang, target_lang, tuple(entries))


def check_dictionary_count(count: int, limits: StoreLimits) -> None:
    """``GlossaryTooLarge`` (413) for one glossary of more dictionaries than
    ``max_glossary_dictionaries``. Callers check it before reading the dictionaries: 3,000
    of them were parsed and their codes resolved, only to be refused here."""
    if count > limits.max_glossary_dictionaries:
        raise GlossaryTooLarge(
            f"The glossary has {count} dictionaries (language pairs); at most "
            f"{limits.max_glossary_dictionaries} are allowed."
        )


def check_dictionaries(
    dictionaries: Sequence[GlossaryDictionary], limits: StoreLimits
) -> list[GlossaryDictionary]:
    if not dictionaries:
        raise InvalidGlossary("A glossary needs at least one dictionary of entries.")
    check_dictionary_count(len(dictionaries), limits)
    total = sum(len(d.entries) for d in dictionaries)
    if total > limits.max_glossary_entries:
        raise GlossaryTooLarge(
            f"The glossary has {total} entries; at most {limits.max_glossary_entries} are allowed."
        )
    checked = [check_dictionary(d, limits) for d in dictionaries]
    pairs = [(d.source_lang, d.target_lang) for d in checked]
    if len(set(pairs)) != len(pairs):
        raise InvalidGlossary("A language pair is given more than once.")
    return checked


async def check_dictionaries_async(
    dictionaries: Sequence[GlossaryDictionary], limits: StoreLimits
) -> list[GlossaryDictionary]:
    """``check_dictionaries``, in a worker thread when the terms are long enough to hold
    the event loop (the checks are proportional to the glossary's characters)."""
    chars = _term_chars(dictionaries)
    return await sized(chars, THREAD_ABOVE_CHARS, check_dictionaries, dictionaries, limits)


def _term_chars(dictionaries: Sequence[GlossaryDictionary]) -> int:
    return sum(len(s) + len(t) for d in dictionaries for s, t in d.entries)


def _check_text(text: str, where: str) -> None:
    if "\x00" in text:
        raise InvalidDocument(f"{where} contains a NUL character.")
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        raise InvalidDocument(f"{where} contains a lone surrogate (not valid Unicode).")


def check_segments(segments: Sequence[NewSegment], limits: StoreLimits) -> None:
    if len(segments) > limits.max_document_segments:
        raise DocumentTooLarge(
            f"The document has {len(segments)} segments; at most "
            f"{limits.max_document_segments} are allowed."
        )
    for n, segment in enumerate(segments):
        if len(segment.text) > limits.max_segment_chars:
            raise DocumentTooLarge(
                f"Segment {n} is {len(segment.text)} characters long; at most "
                f"{limits.max_segment_chars} are allowed."
            )
        _check_text(segment.text, f"Segment {n}")
        if segment.context is not None:
            _check_text(segment.context, f"The context of segment {n}")


def check_file_size(data: bytes, limits: StoreLimits, what: str) -> None:
    if len(data) > limits.max_document_bytes:
        raise DocumentTooLarge(
            f"The {what} is {len(data)} bytes; at most {limits.max_document_bytes} are allowed."
        )


def encode_options(options: Mapping[str, Any]) -> str:
    try:
        text = json.dumps(dict(options), ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"Document options are not plain JSON: {exc}") from exc
    if len(text) > MAX_OPTIONS_BYTES:
        raise InvalidRequest(f"Document options are larger than {MAX_OPTIONS_BYTES} bytes.")
    return text


def clean_translation(text: str) -> str:
    """A model's output as PostgreSQL and SQLite both store it: NULs dropped, lone
    surrogates replaced (a detokenizer should produce neither)."""
    text = text.replace("\x00", "")
    return text.encode("utf-8", "replace").decode("utf-8")
