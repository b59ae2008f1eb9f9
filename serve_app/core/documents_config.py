"""Document translation's settings (``AppConfig.documents``): upload limits, and how the
replicas' workers take document segments without slowing live traffic."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from serve_app.documents.base import DocumentLimits


class DocumentsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="Serve /documents, /v2/document, /translate_file.")
    max_bytes: int = Field(
        10 * 1024 * 1024, ge=1024, description="Largest uploaded file, in bytes (413 beyond)."
    )
    max_segments: int = Field(
        20_000, ge=1, description="Most paragraphs, cells or cues in one document (413)."
    )
    max_chars: int = Field(
        1_000_000, ge=1, description="Most characters of text in one document (413)."
    )
    max_segment_chars: int = Field(
        20_000, ge=1, description="Longest paragraph, cell or cue, in characters (413)."
    )
    max_unpacked_bytes: int = Field(
        200 * 1024 * 1024,
        ge=1024,
        description="Largest unpacked size of an Office file (a ZIP package), checked before "
        "it is parsed.",
    )
    max_package_elements: int = Field(
        1_000_000,
        ge=1000,
        description="Most XML elements in an Office file's parts (and cells of its merged, "
        "hyperlinked or commented ranges), counted in a streaming pass before a library "
        "builds an object for each (413 beyond).",
    )
    reading_threads: int = Field(
        1,
        ge=1,
        description="Uploads one replica reads (parses) at once, in threads beside its event "
        "loop; reading a file of max_bytes can take a core for a minute (a Markdown file of "
        "10 MB of paragraphs: ~90 s), so more would take the replica's CPU from live traffic.",
    )
    reading_queue: int = Field(
        8,
        ge=0,
        description="Uploads that may wait for a reading thread; one more is refused at once "
        "with 503 and Retry-After (assembling a translated file waits, never refused).",
    )
    worker_concurrency: int = Field(
        4,
        ge=0,
        description="Document segments one replica translates at once (0: this replica "
        "takes no document work).",
    )
    idle_in_flight: int = Field(
        8,
        ge=1,
        description="A replica claims document segments only while it holds fewer live "
        "engine requests than this: live traffic first, documents fill idle capacity.",
    )
    engine_priority: int = Field(
        1,
        ge=0,
        description="vLLM request priority of document segments (live requests have 0; "
        "lower is served first): with engine.scheduling_policy 'priority', a live request "
        "waiting for the engine goes ahead of every waiting document segment.",
    )
    lease_s: float = Field(
        120,
        gt=0,
        description="Seconds a worker holds a claimed segment; a dead worker's segments are "
        "claimed again after this.",
    )
    poll_interval_s: float = Field(
        0.5, gt=0, description="Seconds an idle worker waits before looking for work again."
    )
    wait_timeout_s: float = Field(
        300,
        gt=0,
        description="Seconds LibreTranslate's /translate_file (which answers once the file "
        "is translated) waits before answering 504.",
    )

    def limits(self, max_engine_requests: int) -> DocumentLimits:
        """The upload limits; ``max_engine_requests`` (``limits.max_engine_requests``) bounds
        what one segment may need, as every request of the replica is bounded."""
        from serve_app.documents.base import DocumentLimits  # the parsers stay unimported

        return DocumentLimits(
            max_bytes=self.max_bytes,
            max_segments=self.max_segments,
            max_chars=self.max_chars,
            max_segment_chars=self.max_segment_chars,
            max_unpacked_bytes=self.max_unpacked_bytes,
            max_package_elements=self.max_package_elements,
            max_segment_requests=max_engine_requests,
        )
