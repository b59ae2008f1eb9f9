"""Which entries of a glossary a text needs: one rule for the translate routes (a request's
text) and document jobs (a document's segments), so a term applies the same way in both.

A term applies where its source occurs in the text, case-insensitively; the prompt
families filter each piece of a long text again (``PromptOptions.for_text``).
"""

from __future__ import annotations

Entries = tuple[tuple[str, str], ...]


def terms_for(text: str, entries: Entries) -> Entries:
    """The entries whose source term occurs in ``text`` (case-insensitively)."""
    lowered = text.casefold()
    return tuple((s, t) for s, t in entries if s.casefold() in lowered)
