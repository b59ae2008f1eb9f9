"""Shared state of the fleet: stored glossaries, API keys with quotas, document jobs.

``Store`` (protocol.py) is the interface; ``open_store`` (factory.py) opens the configured
backend. See docs/keys.md and docs/glossaries.md.
"""

from serve_app.core.store_config import StoreConfig, StoreLimits
from serve_app.store.protocol import (
    ApiKey,
    CleanupReport,
    DictionaryInfo,
    DocumentBacklog,
    DocumentJob,
    DocumentState,
    Glossary,
    GlossaryDictionary,
    NewSegment,
    SegmentClaim,
    Store,
    Usage,
    owner_of,
)

__all__ = [
    "ApiKey",
    "CleanupReport",
    "DictionaryInfo",
    "DocumentBacklog",
    "DocumentJob",
    "DocumentState",
    "Glossary",
    "GlossaryDictionary",
    "NewSegment",
    "SegmentClaim",
    "Store",
    "StoreConfig",
    "StoreLimits",
    "Usage",
    "owner_of",
]
