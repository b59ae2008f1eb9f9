"""The exact-match translation cache: repeated strings cost no GPU time.

UI labels, subtitles and chat phrases repeat; their translations are kept in memory, keyed on
everything that changes the output (model, revision, prompt family, languages, options,
sampling, text) and the API key that asked, through a SHA-256 digest, so source texts are not
kept. The cache is an LRU bounded by entries and by bytes; a lock makes it safe from any
thread as well as from the replica's event loop. Hits, misses, evictions, entries and bytes
are counted per API key (``owner``), so ``GET /cache`` shows a key its own use only.

Only complete translations are kept (``storable``): never one cut at its token limit, nor an
empty one, nor one with an empty piece (a degenerate decoding): serving those again would
repeat a failure to every later caller as if it were an answer.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from serve_app.core.config import AppConfig, SamplingConfig
from serve_app.core.schemas import MarkupInfo

# Bookkeeping per entry beyond the text itself (key, object headers), for the byte bound.
_ENTRY_OVERHEAD = 200


@dataclass(frozen=True)
class CachedTranslation:
    translation: str
    segments: int
    truncated: bool
    markup: MarkupInfo | None = None  # documents read as markup

    @property
    def size(self) -> int:
        return len(self.translation.encode()) + _ENTRY_OVERHEAD

    @property
    def storable(self) -> bool:
        """Complete: not truncated, not empty (a degenerate piece makes the whole one so)."""
        return not self.truncated and bool(self.translation.strip())


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    evictions: int
    entries: int
    bytes: int
    max_entries: int
    max_bytes: int


def cache_key(*parts: Any) -> str:
    """A digest of everything that determines a translation (JSON-serializable parts)."""
    blob = json.dumps(parts, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def request_key(
    config: AppConfig,
    sampling: SamplingConfig,
    source: str,
    target: str,
    options: Any,
    markup: Any,
    text: str,
    owner: str,
) -> str:
    """The key of a translation request: everything that changes its output, and the API key
    that asked (``owner``: one key's translations are never another's cache hits)."""
    return cache_key(
        config.served_model_name,
        config.engine.model,
        config.engine.revision,
        config.prompt.model_dump(mode="json"),
        sampling.model_dump(mode="json"),
        config.limits.model_dump(mode="json", include={"max_input_tokens", "max_output_tokens"}),
        [source, target, options.glossary, options.context, options.formality],
        markup,
        text,
        owner,
    )


@dataclass
class _Counts:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    entries: int = 0
    bytes: int = 0


class TranslationCache:
    """LRU of translations bounded by ``max_entries`` and ``max_bytes``; counted per owner."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._data: OrderedDict[str, tuple[str, CachedTranslation]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._counts: dict[str, _Counts] = {}
        self.hits = self.misses = self.evictions = 0

    def _of(self, owner: str) -> _Counts:
        return self._counts.setdefault(owner, _Counts())

    def get(self, key: str, owner: str = "") -> CachedTranslation | None:
        with self._lock:
            found = self._data.get(key)
            if found is None or found[0] != owner:
                self.misses += 1
                self._of(owner).misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            self._of(owner).hits += 1
            return found[1]

    def put(self, key: str, value: CachedTranslation, owner: str = "") -> None:
        if value.size > self.max_bytes or not value.storable:
            return
        with self._lock:
            if key in self._data:
                self._drop(key)
            self._data[key] = (owner, value)
            self._bytes += value.size
            counts = self._of(owner)
            counts.entries += 1
            counts.bytes += value.size
            while len(self._data) > self.max_entries or self._bytes > self.max_bytes:
                evicted = self._drop(next(iter(self._data)))
                self.evictions += 1
                self._of(evicted).evictions += 1

    def _drop(self, key: str) -> str:
        owner, value = self._data.pop(key)
        self._bytes -= value.size
        counts = self._of(owner)
        counts.entries -= 1
        counts.bytes -= value.size
        return owner

    def stats(self, owner: str | None = None) -> CacheStats:
        """The whole cache's counts, or ``owner``'s only (its entries, bytes, lookups)."""
        with self._lock:
            if owner is None:
                c = _Counts(self.hits, self.misses, self.evictions, len(self._data), self._bytes)
            else:
                c = self._counts.get(owner, _Counts())
            return CacheStats(
                c.hits, c.misses, c.evictions, c.entries, c.bytes, self.max_entries, self.max_bytes
            )
