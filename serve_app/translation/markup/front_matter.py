"""Front matter: the metadata block that static-site generators (Jekyll, Hugo, Docusaurus,
MkDocs, Astro...) read at the top of a Markdown file, YAML between ``---`` lines (closed by
``---`` or ``...``) or TOML between ``+++`` lines.

CommonMark knows none, and markdown-it read the block as a thematic break and a setext
heading: ``title: My post``, ``draft: false`` and every other line of it were one segment
to translate, keys included (a model writes ``Titel:``, ``Entwurf: falsch``), and the site
that reads the file no longer builds. The Markdown reader parses the document with the
block's lines emptied (``blank_front_matter``: line ends kept, so the tokens' line numbers
still index the source) and copies the block from the source as it is, as it copies code.
"""

from __future__ import annotations

import re

# The line that opens a block (spaces and tabs may follow), and what closes it: a line end,
# then a closing line. One regex search finds it, in C (a 10 MB block of 2 million lines: a
# fifth of a second; a loop over its lines took 2 s).
_OPENERS = {"---": "(?:---|\\.\\.\\.)", "+++": "\\+\\+\\+"}
_CLOSING = {
    opener: re.compile(rf"(?:\r\n?|\n){closer}[ \t]*(?:\r\n?|\n|\Z)")
    for opener, closer in _OPENERS.items()
}
_FIRST_LINE = re.compile(r"([^\r\n]*)(\r\n?|\n)")
_LINE_END = re.compile(r"\r\n?|\n")


def front_matter_end(source: str) -> int:
    """Where the front matter at the start of ``source`` ends (after its closing line's
    line end), or 0 when it has none: its first line (after a byte order mark) opens one
    and a later line closes it."""
    first = _FIRST_LINE.match(source, 1 if source.startswith("\ufeff") else 0)
    if first is None:
        return 0
    closing = _CLOSING.get(first.group(1).rstrip(" \t"))
    found = None if closing is None else closing.search(source, first.start(2))
    return 0 if found is None else found.end()


def blank_front_matter(source: str) -> str:
    """``source`` with its front matter's lines empty (their line ends kept; the byte order
    mark before it dropped), for the parser; ``source`` itself when it has none."""
    end = front_matter_end(source)
    if not end:
        return source
    return "".join(_LINE_END.findall(source, 0, end)) + source[end:]
