"""The store's interface: the state the whole fleet shares and that outlives any replica.

Replicas on several nodes keep stored glossaries, API keys with their usage counters, and
document translation jobs (split into segments that workers claim under leases) in one
store. Two backends implement this ``Store``: SQLite on the head node's disk, reached
through one small Serve deployment (``store.deployment``), and PostgreSQL, which every
replica reaches directly. Both pass the same test suite (tests/unit/store/).

Every method is a coroutine and every value crossing it is a frozen dataclass of plain
types (picklable: the SQLite store's methods are called through a Ray handle). Errors are
the service's own (``GlossaryNotFound``, ``QuotaExceeded``, ...), so a route can let them
through to the one error mapper. Owners: every glossary and document belongs to an owner
(the key id of the request, see ``owner_of``), and another owner's id is "not found".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from serve_app.core.store_config import StoreLimits

# --- glossaries ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GlossaryDictionary:
    """The entries of one language pair (``source_lang`` -> ``target_lang``), in order."""

    source_lang: str
    target_lang: str
    entries: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class DictionaryInfo:
    source_lang: str
    target_lang: str
    entry_count: int


@dataclass(frozen=True)
class Glossary:
    """A stored glossary: its language pairs (DeepL v2 glossaries have one; an edit may
    remove every one). ``revision`` rises with every edit: what was read of an older one
    (a replica's term index) is stale."""

    id: str
    name: str
    owner: str
    created_at: float
    dictionaries: tuple[DictionaryInfo, ...]
    revision: int = 0

    @property
    def entry_count(self) -> int:
        return sum(d.entry_count for d in self.dictionaries)


# --- API keys and usage -------------------------------------------------------------------


@dataclass(frozen=True)
class ApiKey:
    """A stored key. Only the SHA-256 digest of the secret is stored, never the secret;
    a limit of None means unlimited."""

    id: str
    name: str
    created_at: float
    revoked_at: float | None
    chars_per_month: int | None
    requests_per_minute: int | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True)
class Usage:
    """A key's counters now: characters this calendar month (UTC, ``month`` is ``YYYY-MM``)
    and requests in this minute's window, with the key's limits (None: unlimited)."""

    key_id: str
    month: str
    characters: int
    character_limit: int | None
    minute_requests: int
    requests_per_minute: int | None


# --- documents ----------------------------------------------------------------------------

DocumentState = Literal["queued", "translating", "translated", "done", "error"]


@dataclass(frozen=True)
class NewSegment:
    """A piece of a document to translate; ``context`` (neighbouring text) is optional."""

    text: str
    context: str | None = None


@dataclass(frozen=True)
class DocumentJob:
    """A document translation job. ``state``: queued (no segment claimed yet),
    translating, translated (every segment done, the output not yet assembled), done
    (``finish_document`` stored the output) or error. ``options`` is the caller's JSON."""

    id: str
    owner: str
    name: str
    format: str
    source_lang: str | None
    target_lang: str
    options: Mapping[str, Any]
    state: DocumentState
    segments_total: int
    segments_done: int
    characters_total: int
    characters_done: int
    source_bytes: int
    created_at: float
    started_at: float | None
    updated_at: float
    expires_at: float
    error: str | None = None


@dataclass(frozen=True)
class SegmentClaim:
    """A segment a worker holds until ``lease_expires_at``; after that another worker may
    claim it again. ``attempt`` counts claims (1 for the first)."""

    job_id: str
    index: int
    text: str
    context: str | None
    source_lang: str | None
    target_lang: str
    options: Mapping[str, Any] = field(default_factory=dict)
    attempt: int = 1
    lease_expires_at: float = 0.0


@dataclass(frozen=True)
class DocumentBacklog:
    """What the fleet has left to translate: open jobs (queued or translating, not expired)
    and their segments and characters not yet done."""

    jobs: int
    segments: int
    characters: int


@dataclass(frozen=True)
class CleanupReport:
    documents: int
    usage_windows: int


# --- the interface ------------------------------------------------------------------------


class Store(ABC):
    """Shared state of the fleet. Implementations: ``SqliteStore``, ``PostgresStore``, and
    ``RemoteStore`` (a handle to the one ``StoreDeployment`` that owns a SQLite store)."""

    # The limits its writes are held to (config ``store.limits``): callers refuse what
    # passes a cheap one (a glossary's dictionary count) before costly work on the input.
    limits: StoreLimits

    # lifecycle

    @abstractmethod
    async def close(self) -> None:
        """Releases connections; the store is unusable afterwards."""

    @abstractmethod
    async def ping(self) -> None:
        """Raises ``StoreUnavailable`` unless the store answers."""

    # glossaries

    @abstractmethod
    async def create_glossary(
        self, owner: str, name: str, dictionaries: Sequence[GlossaryDictionary]
    ) -> Glossary:
        """Stores a new glossary. ``InvalidGlossary`` (400) for empty, over-long or
        duplicate terms, control characters, a pair given twice or no entries;
        ``GlossaryTooLarge`` (413) beyond ``max_glossary_entries``; ``LimitReached`` (403)
        when the owner holds ``max_glossaries_per_owner`` already."""

    @abstractmethod
    async def list_glossaries(self, owner: str) -> list[Glossary]:
        """The owner's glossaries, oldest first."""

    @abstractmethod
    async def get_glossary(self, owner: str, glossary_id: str) -> Glossary:
        """``GlossaryNotFound`` (404) if absent or another owner's."""

    @abstractmethod
    async def glossary_entries(
        self, owner: str, glossary_id: str, source_lang: str, target_lang: str
    ) -> tuple[tuple[str, str], ...]:
        """The entries of one pair, in their stored order; ``GlossaryNotFound`` if the
        glossary or the pair is absent. Language codes compare case-insensitively."""

    @abstractmethod
    async def update_glossary(
        self,
        owner: str,
        glossary_id: str,
        name: str | None,
        dictionaries: Sequence[GlossaryDictionary],
        merge: bool,
    ) -> Glossary:
        """Renames the glossary (unless ``name`` is None) and writes each dictionary: with
        ``merge``, a source term already in the pair gets the new target and new terms are
        added after the others; without, the pair's entries are replaced. A pair the
        glossary lacks is added. The checks of ``create_glossary`` hold for the glossary as
        it is after the edit; ``GlossaryNotFound`` if absent or another owner's."""

    @abstractmethod
    async def delete_glossary_dictionary(
        self, owner: str, glossary_id: str, source_lang: str, target_lang: str
    ) -> Glossary:
        """Removes one language pair (the glossary stays, possibly with none);
        ``GlossaryNotFound`` if the glossary or the pair is absent."""

    @abstractmethod
    async def delete_glossary(self, owner: str, glossary_id: str) -> None:
        """``GlossaryNotFound`` if absent or another owner's."""

    # API keys and quotas

    @abstractmethod
    async def create_key(
        self,
        name: str,
        digest: bytes,
        chars_per_month: int | None = None,
        requests_per_minute: int | None = None,
    ) -> ApiKey:
        """Stores a key by the SHA-256 ``digest`` of its secret; ``NameTaken`` (409) if an
        active key has this name."""

    @abstractmethod
    async def find_key(self, digest: bytes) -> ApiKey | None:
        """The active key with this digest, or None (unknown or revoked)."""

    @abstractmethod
    async def list_keys(self) -> list[ApiKey]:
        """Every key, revoked ones too, oldest first."""

    @abstractmethod
    async def revoke_key(self, name_or_id: str) -> ApiKey:
        """Revokes the active key of that name (or id); ``KeyNotFound`` (404) if none."""

    @abstractmethod
    async def charge(self, key_id: str, characters: int, requests: int = 1) -> Usage:
        """Counts a request atomically, cluster-wide: adds ``requests`` to this minute's
        window and ``characters`` to this month's, or neither. ``RateLimited`` (429, with
        ``retry_after_s``) when the minute's requests would pass the key's limit,
        ``QuotaExceeded`` when the month's characters would; ``Unauthorized`` for a revoked
        key. A ``key_id`` with no stored key (keys from the environment, anonymous use) is
        counted without limits. Returns the usage after counting."""

    @abstractmethod
    async def refund(self, key_id: str, characters: int, month: str) -> None:
        """Gives back characters charged in ``month`` for work that failed."""

    @abstractmethod
    async def usage(self, key_id: str) -> Usage:
        """The key's counters now (zeros for a key never charged)."""

    # documents

    @abstractmethod
    async def create_document(
        self,
        owner: str,
        name: str,
        format: str,
        source_lang: str | None,
        target_lang: str,
        options: Mapping[str, Any],
        source: bytes,
        segments: Sequence[NewSegment],
        ttl_s: float | None = None,
    ) -> DocumentJob:
        """Stores the uploaded ``source`` and its segments as one queued job (all or
        nothing). ``DocumentTooLarge`` (413) over ``max_document_bytes``,
        ``max_document_segments`` or ``max_segment_chars``; ``InvalidDocument`` (400) for
        no segments; ``LimitReached`` (403) when the owner has ``max_documents_per_owner``
        unexpired jobs. Expires ``ttl_s`` (default ``document_ttl_s``) from now."""

    @abstractmethod
    async def get_document(self, owner: str | None, job_id: str) -> DocumentJob:
        """``DocumentNotFound`` (404) if absent, expired or another owner's (``owner``
        None: any owner, for workers)."""

    @abstractmethod
    async def list_documents(self, owner: str) -> list[DocumentJob]:
        """The owner's unexpired jobs, oldest first."""

    @abstractmethod
    async def document_source(self, owner: str | None, job_id: str) -> bytes:
        """The uploaded file (to assemble the translated one from)."""

    @abstractmethod
    async def claim_segments(
        self, worker: str, limit: int, lease_s: float, job_id: str | None = None
    ) -> list[SegmentClaim]:
        """Leases up to ``limit`` segments to ``worker`` for ``lease_s`` seconds: pending
        ones and those whose lease expired, oldest job first, in document order; only of
        ``job_id`` if given. Jobs in error or expired are skipped."""

    @abstractmethod
    async def complete_segment(
        self, job_id: str, index: int, worker: str, translation: str
    ) -> DocumentJob:
        """Stores a segment's translation (a segment done already keeps its first one, so a
        late worker whose lease expired changes nothing). When the last segment is done the
        job turns ``translated``: the caller that sees this assembles the output."""

    @abstractmethod
    async def fail_segment(
        self, job_id: str, index: int, worker: str, error: str, retry: bool = True
    ) -> DocumentJob:
        """Releases a segment after a failure: pending again while ``retry`` and fewer than
        ``max_segment_attempts`` claims; otherwise the job turns ``error`` with ``error``."""

    @abstractmethod
    async def segment_translations(self, job_id: str) -> list[str | None]:
        """Every segment's translation in document order (None where not done yet)."""

    @abstractmethod
    async def finish_document(self, job_id: str, result: bytes) -> DocumentJob:
        """Stores the assembled output (first call wins) and turns the job ``done``."""

    @abstractmethod
    async def fail_document(self, job_id: str, error: str) -> DocumentJob:
        """Turns the job ``error`` (a malformed file found late, an assembly failure)."""

    @abstractmethod
    async def document_result(self, owner: str | None, job_id: str) -> bytes:
        """The translated file; ``DocumentNotReady`` (409) unless the job is done."""

    @abstractmethod
    async def delete_document(self, owner: str, job_id: str) -> None:
        """Deletes the job, its segments and files; ``DocumentNotFound`` if absent."""

    @abstractmethod
    async def document_backlog(self) -> DocumentBacklog:
        """The open jobs' remaining work, fleet-wide (the documents' progress metric)."""

    # housekeeping

    @abstractmethod
    async def cleanup(self) -> CleanupReport:
        """Deletes expired documents (with their segments and files) and usage windows of
        past minutes. Safe to call from every replica at any time."""


def owner_of(key_id: str | None) -> str:
    """The owner of what a request creates: its key's id, or ``""`` without keys."""
    return key_id or ""
