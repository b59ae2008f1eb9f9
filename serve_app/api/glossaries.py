"""Stored glossaries on the native API, and ``glossary_id`` on every translate route.

``POST /glossaries`` (JSON: ``name`` and ``dictionaries``, one per language pair, each with
``entries`` as a list of ``{source, target}`` or as TSV/CSV text with ``entries_format``),
``GET /glossaries`` (the caller's), ``GET /glossaries/{id}``, ``GET /glossaries/{id}/entries``
(JSON, or TSV/CSV by ``Accept``), ``PATCH /glossaries/{id}`` (a new name, and dictionaries
merged into the glossary's or replacing its pairs), ``DELETE /glossaries/{id}/dictionaries``
(one pair) and ``DELETE /glossaries/{id}``. Glossaries live in the store
(``docs/glossaries.md``) and belong to the caller's API key: another key's id is 404.

``apply_glossaries`` is what every translate route (native, DeepL, LibreTranslate) calls on
its items: an item with a ``glossary_id`` gets the stored entries of its language pair whose
source term occurs in its text, added to its inline ``glossary``, so they reach the model
through the prompt family's terminology prompt like inline entries do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, FastAPI, Request, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from serve_app.api.glossary_entries import (
    THREAD_ABOVE,
    Entries,
    parse_entries,
    to_csv,
    to_tsv,
    written_async,
)
from serve_app.core.aio import sized
from serve_app.core.errors import InvalidGlossary, InvalidRequest, UnsupportedOption
from serve_app.core.glossary_terms import IndexCache, TermIndex, glossary_for_async, index_async
from serve_app.core.schemas import TextItem
from serve_app.store import Glossary, GlossaryDictionary, Store, owner_of
from serve_app.store.validation import check_dictionary_count
from serve_app.translation.service import TranslationService

Item = TypeVar("Item", bound=TextItem)
# Resolving a dictionary's two language codes costs about as much as parsing this many
# characters of its entries (25 us).
DICTIONARY_COST = 500

# --- models ---------------------------------------------------------------------------------


class StoredEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(..., description="Term in the source text.")
    target: str = Field(..., description="Its required translation.")


class DictionaryIn(BaseModel):
    """The entries of one language pair."""

    model_config = ConfigDict(extra="forbid")

    source_lang: str = Field(..., max_length=35, description="Language of the source terms.")
    target_lang: str = Field(..., max_length=35, description="Language of the target terms.")
    entries: Annotated[list[StoredEntry], Field(fail_fast=True)] | str = Field(
        ..., description="A list of {source, target}, or TSV/CSV text (see entries_format)."
    )
    entries_format: Literal["tsv", "csv"] = Field(
        "tsv", description="How text entries are written: tsv (source<TAB>target) or csv."
    )


class GlossaryCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "product terms",
                    "dictionaries": [
                        {"source_lang": "en", "target_lang": "de", "entries": "cart\tWarenkorb"}
                    ],
                }
            ]
        },
    )

    name: str = Field(..., description="A name of your choice.")
    dictionaries: list[DictionaryIn] = Field(
        ...,
        min_length=1,
        fail_fast=True,
        description="One per language pair (several: multilingual).",
    )


class GlossaryEdit(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "dictionaries": [
                        {"source_lang": "en", "target_lang": "de", "entries": "cart\tEinkaufswagen"}
                    ],
                }
            ]
        },
    )

    name: str | None = Field(None, description="A new name.")
    dictionaries: list[DictionaryIn] = Field(
        [],
        fail_fast=True,
        description="Entries to write, one dictionary per language pair (a pair the glossary "
        "lacks is added).",
    )
    mode: Literal["merge", "replace"] = Field(
        "merge",
        description="merge: a source term already in the pair gets the new target, new terms "
        "are added; replace: the pair keeps only the entries given.",
    )

    @model_validator(mode="after")
    def _changes_something(self) -> GlossaryEdit:
        if self.name is None and not self.dictionaries:
            raise ValueError("give a new name, dictionaries, or both")
        return self


class DictionaryOut(BaseModel):
    source_lang: str
    target_lang: str
    entry_count: int


class GlossaryOut(BaseModel):
    id: str
    name: str
    created_at: float = Field(..., description="Unix time.")
    entry_count: int = Field(..., description="Entries of all its language pairs.")
    dictionaries: list[DictionaryOut]


class GlossaryList(BaseModel):
    glossaries: list[GlossaryOut]


class GlossaryEntries(BaseModel):
    source_lang: str
    target_lang: str
    entries: list[StoredEntry]


def glossary_out(g: Glossary) -> GlossaryOut:
    return GlossaryOut(
        id=g.id,
        name=g.name,
        created_at=g.created_at,
        entry_count=g.entry_count,
        dictionaries=[
            DictionaryOut(source_lang=d.source_lang, target_lang=d.target_lang,
                          entry_count=d.entry_count)
            for d in g.dictionaries
        ],
    )  # fmt: skip


# --- shared by the native and DeepL routes ----------------------------------------------------


def owner(request: Request) -> str:
    return owner_of(getattr(request.state, "key_id", None))


def glossary_store(request: Request, service: TranslationService) -> Store:
    """The store, when stored glossaries work here: a store is configured and the model's
    prompt family takes a glossary."""
    store: Store | None = getattr(request.app.state, "store", None)
    if store is None:
        raise UnsupportedOption("Stored glossaries need the store (config: store).")
    if "glossary" not in service.family.supports:
        raise UnsupportedOption(
            f"The configured model (prompt family '{service.config.prompt.family}') does not "
            "support glossaries."
        )
    return store


def stored_code(service: TranslationService, code: str) -> str:
    """A glossary's language as stored: the offered language's code, lower-case (400 for
    a language the model does not offer)."""
    return service.languages.resolve(code).code.lower()


@dataclass(frozen=True)
class NewDictionary:
    """A language pair of a new glossary as the client sent it: its entries as pairs, or
    as TSV/CSV text still to parse."""

    source_lang: str
    target_lang: str
    entries: Entries | str
    entries_format: str = "tsv"

    def cost(self) -> int:
        """The work of reading it, in characters of entries to parse (its language codes
        cost about ``DICTIONARY_COST``)."""
        return DICTIONARY_COST + (len(self.entries) if isinstance(self.entries, str) else 0)

    def parsed(self) -> Entries:
        if isinstance(self.entries, str):
            return parse_entries(self.entries, self.entries_format)
        return self.entries


def _read_dictionaries(
    service: TranslationService, dictionaries: Sequence[NewDictionary]
) -> list[GlossaryDictionary]:
    """Every dictionary's entries parsed, then its languages resolved to stored codes."""
    entries = [d.parsed() for d in dictionaries]
    return [
        GlossaryDictionary(
            stored_code(service, d.source_lang), stored_code(service, d.target_lang), found
        )
        for d, found in zip(dictionaries, entries, strict=True)
    ]


async def create_glossary(
    request: Request,
    service: TranslationService,
    name: str,
    dictionaries: Sequence[NewDictionary],
) -> Glossary:
    """Stores the glossary. Too many dictionaries are refused before any is read (413);
    they are read in a worker thread when they are many or long: a body of 12,000
    one-entry dictionaries held the event loop 0.45 s."""
    store = glossary_store(request, service)
    checked = await _read_async(store, service, dictionaries)
    return await store.create_glossary(owner(request), name, checked)


async def edit_glossary(
    request: Request,
    service: TranslationService,
    glossary_id: str,
    name: str | None,
    dictionaries: Sequence[NewDictionary],
    merge: bool,
) -> Glossary:
    """Writes an edit (``Store.update_glossary``); its dictionaries are read as a new
    glossary's are."""
    store = glossary_store(request, service)
    checked = await _read_async(store, service, dictionaries)
    return await store.update_glossary(owner(request), glossary_id, name, checked, merge)


async def _read_async(
    store: Store, service: TranslationService, dictionaries: Sequence[NewDictionary]
) -> list[GlossaryDictionary]:
    check_dictionary_count(len(dictionaries), store.limits)
    cost = sum(d.cost() for d in dictionaries)
    return await sized(cost, THREAD_ABOVE, _read_dictionaries, service, dictionaries)


def new_dictionary(d: DictionaryIn) -> NewDictionary:
    if isinstance(d.entries, str):
        return NewDictionary(d.source_lang, d.target_lang, d.entries, d.entries_format)
    entries = tuple((e.source, e.target) for e in d.entries)
    return NewDictionary(d.source_lang, d.target_lang, entries)


def _candidates(code: str) -> tuple[str, ...]:
    """Stored codes a request's language matches: its own, then its base language (a
    glossary for ``zh`` serves ``zh-Hant`` too, as DeepL's do for regional variants)."""
    code = code.lower()
    base = code.split("-")[0]
    return (code,) if base == code else (code, base)


async def pair_entries(
    store: Store, owner_id: str, glossary_id: str, source: str, target: str
) -> Entries:
    """The entries of the glossary's dictionary for ``source -> target`` (canonical codes).
    404 for an unknown glossary, 400 when it has no such pair."""
    glossary = await store.get_glossary(owner_id, glossary_id)
    s, t = _stored_pair(glossary, source, target)
    return await store.glossary_entries(owner_id, glossary_id, s, t)


async def pair_index(
    request: Request, store: Store, glossary_id: str, source: str, target: str
) -> TermIndex:
    """``pair_entries`` as a term index, kept in the replica's ``IndexCache``: the glossary
    is read every time (it may have been deleted, 404 then, or edited), its entries only
    the first time at each revision."""
    owner_id = owner(request)
    glossary = await store.get_glossary(owner_id, glossary_id)
    s, t = _stored_pair(glossary, source, target)
    cache: IndexCache = request.app.state.glossary_indexes
    key = (owner_id, glossary_id, glossary.created_at, glossary.revision, s, t)
    if (index := cache.get(key)) is None:
        index = await index_async(await store.glossary_entries(owner_id, glossary_id, s, t))
        cache.put(key, index)
    return index


def _stored_pair(glossary: Glossary, source: str, target: str) -> tuple[str, str]:
    """The glossary's stored pair that ``source -> target`` reads (400 without one)."""
    pairs = {(d.source_lang, d.target_lang) for d in glossary.dictionaries}
    for s in _candidates(source):
        for t in _candidates(target):
            if (s, t) in pairs:
                return s, t
    have = ", ".join(f"{s}->{t}" for s, t in sorted(pairs))
    raise InvalidGlossary(
        f"Glossary {glossary.id[:100]!r} has no entries for {source}->{target} (it has {have})."
    )


def _glossary_pair(
    service: TranslationService, glossary_id: str, source_lang: str | None, target_lang: str
) -> tuple[str, str, str]:
    """``(glossary_id, source, target)`` with the languages' canonical codes; a 400 when
    the source language is left to detection (a glossary is for one language pair)."""
    raw_source = (source_lang or "auto").strip()
    if raw_source.lower() == "auto":
        raise InvalidRequest("Invalid request: a glossary_id needs an explicit source_lang.")
    source, target = service.languages.resolve_pair(raw_source, target_lang)
    return glossary_id, source.code, target.code


async def stored_glossary(
    request: Request,
    service: TranslationService,
    glossary_id: str,
    source_lang: str | None,
    target_lang: str,
) -> Entries:
    """Every entry of the caller's stored glossary for ``source_lang -> target_lang``, as
    the text routes resolve it (404 for an unknown id or another key's, 400 without an
    explicit source language or for a pair the glossary lacks): what a document upload
    keeps with its job."""
    store = glossary_store(request, service)
    key = _glossary_pair(service, glossary_id, source_lang, target_lang)
    return await pair_entries(store, owner(request), *key)


async def apply_glossaries(
    request: Request, service: TranslationService, items: Sequence[Item]
) -> list[Item]:
    """``items`` with the stored glossary of each that names one added to its inline
    glossary (only the terms its text holds). Each glossary and pair is read once."""
    if not any(item.glossary_id for item in items):
        return list(items)
    store = glossary_store(request, service)
    read: dict[tuple[str, str, str], TermIndex] = {}
    out = []
    for item in items:
        if not item.glossary_id:
            out.append(item)
            continue
        key = _glossary_pair(service, item.glossary_id, item.source_lang, item.target_lang)
        if key not in read:
            read[key] = await pair_index(request, store, *key)
        added = await glossary_for_async(item.text, read[key])
        out.append(item.model_copy(update={"glossary": [*item.glossary, *added]}))
    return out


# --- native routes ----------------------------------------------------------------------------

_ERROR = {"description": 'Error: {"error": {"code": ..., "message": ...}}'}
_ERRORS: dict[int | str, dict[str, Any]] = {c: _ERROR for c in (400, 401, 403, 404, 413, 422)}
_MEDIA = {"text/tab-separated-values": to_tsv, "text/csv": to_csv}


async def _entries_response(request: Request, source: str, target: str, entries: Entries) -> Any:
    accept = request.headers.get("accept", "")
    for media, write in _MEDIA.items():
        if media in accept:
            text = await written_async(write, entries)
            return Response(text, media_type=media + "; charset=utf-8")
    listed = [StoredEntry(source=s, target=t) for s, t in entries]
    return GlossaryEntries(source_lang=source, target_lang=target, entries=listed)


def _requested_pair(
    service: TranslationService, source_lang: str | None, target_lang: str | None
) -> tuple[str, str] | None:
    """The pair an entries request names, as stored codes (resolved as a glossary's are
    when it is created: ``en-US`` is ``en``; 400 for a language the model does not offer),
    None when it names neither language (a blank value counts as none); 400 for only one
    of them: the other is not the glossary's."""
    source, target = (source_lang or "").strip(), (target_lang or "").strip()
    if source and target:
        return stored_code(service, source), stored_code(service, target)
    if source or target:
        given, missing = (
            ("source_lang", "target_lang") if source else ("target_lang", "source_lang")
        )
        raise InvalidGlossary(
            f"Only {given} was given: a glossary's entries are read by language pair, so "
            f"give {missing} too (or neither, for a glossary of one pair)."
        )
    return None


def _only_pair(glossary: Glossary) -> tuple[str, str]:
    """The glossary's one language pair (422 when it has several: the request must name one)."""
    if len(glossary.dictionaries) != 1:
        raise InvalidRequest(
            "Invalid request: this glossary has several language pairs; give "
            "source_lang and target_lang."
        )
    return glossary.dictionaries[0].source_lang, glossary.dictionaries[0].target_lang


def glossaries_router(app: FastAPI, service: TranslationService) -> None:
    """Adds ``/glossaries`` to ``app`` (answers 400 where the store or the model lacks
    glossaries)."""
    router = APIRouter(prefix="/glossaries", tags=["Glossaries"], responses=_ERRORS)

    @router.post("", response_model=GlossaryOut, status_code=201)
    async def create(body: GlossaryCreate, request: Request) -> GlossaryOut:
        """Stores a glossary: one dictionary per language pair."""
        dictionaries = [new_dictionary(d) for d in body.dictionaries]
        return glossary_out(await create_glossary(request, service, body.name, dictionaries))

    @router.get("", response_model=GlossaryList)
    async def list_glossaries(request: Request) -> GlossaryList:
        """The caller's glossaries, oldest first."""
        found = await glossary_store(request, service).list_glossaries(owner(request))
        return GlossaryList(glossaries=[glossary_out(g) for g in found])

    @router.get("/{glossary_id}", response_model=GlossaryOut)
    async def get(glossary_id: str, request: Request) -> GlossaryOut:
        """One glossary's name and language pairs (without entries)."""
        store = glossary_store(request, service)
        return glossary_out(await store.get_glossary(owner(request), glossary_id))

    @router.get(
        "/{glossary_id}/entries",
        response_model=GlossaryEntries,
        responses={200: {"content": {m: {} for m in _MEDIA}}},
    )
    async def entries(
        glossary_id: str,
        request: Request,
        source_lang: str | None = None,
        target_lang: str | None = None,
    ) -> Any:
        """The entries of one language pair (both languages, or neither when the glossary
        has one pair; a pair it lacks is 400 ``invalid_glossary``, as on the translate
        routes): JSON, or TSV / CSV with ``Accept: text/tab-separated-values`` /
        ``text/csv``."""
        store = glossary_store(request, service)
        pair = _requested_pair(service, source_lang, target_lang)
        glossary = await store.get_glossary(owner(request), glossary_id)
        source, target = _stored_pair(glossary, *pair) if pair else _only_pair(glossary)
        found = await store.glossary_entries(owner(request), glossary_id, source, target)
        return await _entries_response(request, source, target, found)

    @router.patch("/{glossary_id}", response_model=GlossaryOut)
    async def edit(glossary_id: str, body: GlossaryEdit, request: Request) -> GlossaryOut:
        """Renames the glossary and/or writes dictionaries into it: merged into a pair's
        entries (``mode: merge``) or replacing them (``replace``); a new pair is added."""
        dictionaries = [new_dictionary(d) for d in body.dictionaries]
        merge = body.mode == "merge"
        edited = await edit_glossary(request, service, glossary_id, body.name, dictionaries, merge)
        return glossary_out(edited)

    @router.delete("/{glossary_id}/dictionaries", response_model=GlossaryOut)
    async def delete_pair(
        glossary_id: str, request: Request, source_lang: str, target_lang: str
    ) -> GlossaryOut:
        """Removes one language pair (resolved as on the entries route; a pair the glossary
        lacks is 400 ``invalid_glossary``). The glossary stays, with the others."""
        store = glossary_store(request, service)
        pair = _requested_pair(service, source_lang, target_lang)
        if pair is None:
            raise InvalidRequest("Invalid request: give the source_lang and target_lang to remove.")
        glossary = await store.get_glossary(owner(request), glossary_id)
        source, target = _stored_pair(glossary, *pair)
        removed = await store.delete_glossary_dictionary(
            owner(request), glossary_id, source, target
        )
        return glossary_out(removed)

    @router.delete("/{glossary_id}", status_code=204)
    async def delete(glossary_id: str, request: Request) -> Response:
        """Deletes the glossary."""
        await glossary_store(request, service).delete_glossary(owner(request), glossary_id)
        return Response(status_code=204)

    app.include_router(router)
