"""Alert markers: the first line of a block quote that GitHub renders as a note, tip or
warning (``> [!NOTE]``, ``[!TIP]``, ``[!IMPORTANT]``, ``[!WARNING]``, ``[!CAUTION]``), and
Obsidian as a callout (``> [!info] Title``, any type, ``+`` or ``-`` to fold it).

CommonMark knows none: the marker was text of the quote's first paragraph, sent to the model
as words (``[!NOTE]`` as ``[!HINWEIS]``, ``[!warning]`` as ``[!Warnung]``), and the
translated page showed a plain quote starting with that text. The marker is kept as it is,
a placeholder; an Obsidian callout's title after it is translated.
"""

from __future__ import annotations

import re

from markdown_it.token import Token

_MARKER = re.compile(r"\[![A-Za-z][\w-]*\][+-]?")


def alert_marker(children: list[Token], source: str) -> str | None:
    """The marker that a block quote's first paragraph (its inline ``children``, its
    ``source`` text) starts with, spelled as in the source (an escaped ``\\[!NOTE]`` is
    text: no alert), or None."""
    first = children[0] if children else None
    found = _MARKER.match(first.content) if first is not None and first.type == "text" else None
    if found is None or not source.startswith(found.group(0)):
        return None
    return found.group(0)
