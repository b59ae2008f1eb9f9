"""The store's settings (``AppConfig.store``): which backend, by URL, and the bounds on what
it keeps (see serve_app/store/ and docs/store.md). The URL picks the backend:
``sqlite:///relative/path.db`` (under ``~/.serve_app/``) or ``sqlite:////absolute/path.db``
(the embedded default, on the head node's disk, served by one ``StoreDeployment``) or
``postgresql://user:password@host:port/db`` (every replica connects itself). A password
in the URL may instead come from the environment variable named by ``password_env``.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator


class StoreLimits(BaseModel):
    """Bounds on what one owner may keep; the store refuses more with a clear 4xx."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_glossaries_per_owner: int = Field(1000, ge=1, description="Glossaries one key holds.")
    max_glossary_entries: int = Field(
        10_000, ge=1, description="Entries of one glossary, all its language pairs together."
    )
    max_glossary_dictionaries: int = Field(
        2000,
        ge=1,
        description="Dictionaries (language pairs) of all one key's glossaries together: "
        "what a glossary list reads and answers.",
    )
    max_term_chars: int = Field(1024, ge=1, description="Longest source or target term.")
    max_name_chars: int = Field(256, ge=1, description="Longest glossary or document name.")
    max_documents_per_owner: int = Field(
        100, ge=1, description="Unexpired document jobs one key holds."
    )
    max_document_bytes: int = Field(
        32 * 1024 * 1024, ge=1024, description="Largest uploaded or translated file, in bytes."
    )
    max_document_segments: int = Field(
        50_000, ge=1, description="Most segments one document is split into."
    )
    max_segment_chars: int = Field(100_000, ge=1, description="Longest segment, in characters.")
    document_ttl_s: float = Field(
        24 * 3600, gt=0, description="Seconds a document job and its files are kept."
    )
    max_segment_attempts: int = Field(
        5, ge=1, description="Claims of one segment before its job fails."
    )


class StoreConfig(BaseModel):
    """Where the shared state lives (see ``serve_app/store/``); frozen, extra keys refused,
    like the rest of ``AppConfig``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(
        "sqlite:///store.db",
        description="sqlite:///path (relative to ~/.serve_app/ on the head node), "
        "sqlite:////absolute/path, or postgresql://user@host:port/db.",
    )
    password_env: str | None = Field(
        None, description="Environment variable holding the PostgreSQL password."
    )
    pool_size: int = Field(4, ge=1, le=100, description="PostgreSQL connections per replica.")
    limits: StoreLimits = Field(default_factory=StoreLimits)

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        scheme = urlsplit(url).scheme
        if scheme not in {"sqlite", "postgresql", "postgres"}:
            raise ValueError("store.url must start with sqlite:// or postgresql://")
        return url

    @property
    def backend(self) -> str:
        return "sqlite" if urlsplit(self.url).scheme == "sqlite" else "postgresql"

    def sqlite_path(self) -> str:
        """The database file of a sqlite URL (``:memory:`` for ``sqlite://``): an absolute
        path as given (``sqlite:////abs``), a relative one under ``~/.serve_app/`` of the
        user running the process (Ray's working directories come and go)."""
        path = self.url[len("sqlite://") :]
        if not path or path == "/:memory:":
            return ":memory:"
        path = path[1:]  # sqlite:///rel -> rel, sqlite:////abs -> /abs
        if os.path.isabs(path):
            return path
        return str(Path.home() / ".serve_app" / path)

    def postgres_dsn(self) -> str:
        """The URL with the password from ``password_env`` filled in, if configured."""
        password = os.environ.get(self.password_env) if self.password_env else None
        if not password:
            return self.url
        parts = urlsplit(self.url)
        user, _, host = parts.netloc.rpartition("@")
        user = user.split(":", 1)[0]
        netloc = f"{user}:{quote(password, safe='')}@{host}"
        return urlunsplit(parts._replace(netloc=netloc))
