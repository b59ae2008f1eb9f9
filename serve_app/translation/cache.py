"""The exact-match translation cache: repeated strings cost no GPU time.

UI labels, subtitles and chat phrases repeat; their translations are kept in memory, keyed on
everything that changes the output (model, revision, prompt family, languages, options,
sampling, text) through a SHA-256 digest, so source texts are not kept. The cache is an LRU
bounded by entries and by bytes; a lock makes it safe from any thread as well as from the
replica's event loop. Hits, misses and evictions are counted.
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


class TranslationCache:
    """LRU of translations bounded by ``max_entries`` and ``max_bytes``."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._data: OrderedDict[str, CachedTranslation] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0

    def get(self, key: str) -> CachedTranslation | None:
        with self._lock:
            value = self._data.get(key)
            if value is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: str, value: CachedTranslation) -> None:
        if value.size > self.max_bytes:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old.size
            self._data[key] = value
            self._bytes += value.size
            while len(self._data) > self.max_entries or self._bytes > self.max_bytes:
                _, evicted = self._data.popitem(last=False)
                self._bytes -= evicted.size
                self.evictions += 1

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                self.hits,
                self.misses,
                self.evictions,
                len(self._data),
                self._bytes,
                self.max_entries,
                self.max_bytes,
            )
