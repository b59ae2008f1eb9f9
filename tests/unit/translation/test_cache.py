"""The translation cache: exact keys, LRU bounds by entries and bytes, thread safety."""

from __future__ import annotations

import threading

from serve_app.translation.cache import CachedTranslation, TranslationCache, cache_key


def entry(text: str = "x") -> CachedTranslation:
    return CachedTranslation(text, 1, False)


def test_keys_differ_on_every_part() -> None:
    base = ("model", "rev", "en", "de", {"formality": "default"}, "Hello")
    keys = {cache_key(*base)}
    for i in range(len(base)):
        changed = list(base)
        changed[i] = {"formality": "formal"} if isinstance(base[i], dict) else f"{base[i]}!"
        keys.add(cache_key(*changed))
    assert len(keys) == len(base) + 1
    assert cache_key(*base) == cache_key(*base)


def test_hits_misses_and_lru_eviction_by_entries() -> None:
    cache = TranslationCache(max_entries=2, max_bytes=10**6)
    assert cache.get("a") is None
    cache.put("a", entry("A"))
    cache.put("b", entry("B"))
    assert cache.get("a") == entry("A")  # a is now the most recent
    cache.put("c", entry("C"))  # evicts b
    assert cache.get("b") is None
    assert cache.get("c") == entry("C")
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.evictions, stats.entries) == (2, 2, 1, 2)


def test_bytes_bound() -> None:
    big = entry("x" * 1000)
    cache = TranslationCache(max_entries=100, max_bytes=3 * big.size)
    for i in range(10):
        cache.put(str(i), big)
    stats = cache.stats()
    assert stats.entries == 3
    assert stats.bytes <= stats.max_bytes
    cache.put("huge", entry("y" * 10_000))  # larger than the whole cache: not kept
    assert cache.get("huge") is None


def test_replacing_a_key_keeps_the_byte_count_exact() -> None:
    cache = TranslationCache(max_entries=10, max_bytes=10**6)
    cache.put("k", entry("short"))
    cache.put("k", entry("a much longer translation"))
    assert cache.stats().bytes == entry("a much longer translation").size


def test_safe_under_concurrent_threads() -> None:
    cache = TranslationCache(max_entries=50, max_bytes=10**6)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for i in range(2000):
                key = str((seed * 7 + i) % 120)
                if cache.get(key) is None:
                    cache.put(key, entry(key))
        except BaseException as exc:  # pragma: no cover - the assertion reports it
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    stats = cache.stats()
    assert stats.entries <= 50
    assert stats.hits + stats.misses == 8 * 2000
    assert stats.bytes == sum(entry(k).size for k in list(cache._data))
