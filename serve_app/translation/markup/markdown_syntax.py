"""The Markdown the reader knows beyond CommonMark, and what each construct keeps.

Documentation sites write more than CommonMark, and each of these was sent to the model as
words (found 2026-12-06): a model rewrote ``$E = mc^2$`` and ``[^1]``, translated ``:::note``
and ``[x]``, and broke every page that a site generator reads afterwards. Each is parsed by
``mdit-py-plugins`` (the markdown-it-py project's own plugins) where it has one, set up here:

- Containers and admonitions (``container``): ``:::note`` / ``::: warning Title`` (VitePress,
  Docusaurus, markdown-it-container, MyST ``:::{note}``) up to a closing ``:::``. The fence
  lines are copied, their body is translated as blocks, and a title after the name is
  translated (``container_title``).
- MkDocs admonitions (``admon``): ``!!! note "Title"``, collapsible ``??? tip`` and
  ``???+ tip``, with an indented body. The marker line is copied, a quoted title is
  translated, the body is translated as blocks (found 2026-12-07: the marker line and the
  body reached the model as one paragraph, ``note`` with it, and a translated type name
  is one MkDocs does not know). An unquoted title is the type's name, shown capitalized by
  MkDocs: copied.
- Math (``dollarmath``): ``$$ ... $$`` display blocks are copied like code; ``$...$`` and
  ``$$...$$`` inline are a placeholder (``$$x$$`` in a sentence showed its outer dollars
  to the model until 2026-12-07). Pandoc's rules, so prices stay prose: no space inside
  the dollars, no digit right after the closing one (``$5 and $10`` is text), no blank line
  inside a block (a stray ``$$`` cannot swallow the rest of the page).
- Footnotes (``footnote``): a reference ``[^1]`` is a placeholder (defined or not); a
  definition ``[^1]: text`` keeps its label and its text is translated. Definitions stay where
  they are written (``move_to_end`` off: the reader copies the source in order), and no
  inline ``^[...]`` footnotes (Pandoc's, rare; their brackets were text before too).
- Task-list boxes: ``- [ ]``, ``- [x]`` (``task_box``; GitHub's rule, as the ``tasklists``
  plugin reads it, which needs the whole token stream: the reader parses inlines one by one).
- Liquid and Jinja tags, ``{% ... %}`` and ``{{ ... }}``: placeholders in any format
  (``protect.py``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from mdit_py_plugins.admon import admon_plugin
from mdit_py_plugins.container import container_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.footnote.index import footnote_ref

# A container's name: a word (``note``, ``warning``, ``details``), MyST's ``{note}``.
_NAME = re.compile(r"[ \t]*(\{[A-Za-z][\w-]*\}|[A-Za-z][\w-]*)")
_TASK_BOX = re.compile(r"\[[ xX]\](?=[ \t])")
# A footnote label longer than this is text: the plugin's rule scanned from each ``[^`` to
# the next ``]`` or space, quadratic on a line of ``[^[^[^...``.
MAX_LABEL = 100
CONTAINER = "container_admonition_open"
ADMONITION = "admonition_open"
ADMONITION_TITLE = "admonition_title_open"


def _is_container(params: str, *_: object) -> bool:
    return _NAME.match(params) is not None


def _bounded_footnote_ref(state: StateInline, silent: bool) -> bool:
    """The plugin's ``[^label]`` rule, looking at most ``MAX_LABEL`` characters ahead."""
    limit = state.posMax
    state.posMax = min(limit, state.pos + MAX_LABEL + 3)
    try:
        return footnote_ref(state, silent, always_match=True)
    finally:
        state.posMax = limit


def _double_dollar(state: StateInline, silent: bool) -> bool:
    """``$$...$$`` inside a sentence, by Pandoc's rules for ``$``: no space inside the
    dollars, no digit (or third dollar) right after them, and the first ``$$`` after the
    opener closes it or nothing does (each opener looks no further than the next ``$$``, so
    a line of them is read in linear time). The plugin's own ``double_inline`` skips its
    space and digit checks for doubles: ``earn $$ fast and $$ more`` hid its words."""
    src, start, stop = state.src, state.pos, state.posMax
    if not src.startswith("$$", start) or start + 2 >= stop or src[start + 2] in " \t\n$":
        return False
    end = src.find("$$", start + 2, stop)
    if end < 0 or src[end - 1] in " \t\n\\":
        return False
    if end + 2 < stop and (src[end + 2].isdigit() or src[end + 2] == "$"):
        return False
    if not silent:
        tok = state.push("math_inline_double", "math", 0)
        tok.content, tok.markup = src[start + 2 : end], "$$"
    state.pos = end + 2
    return True


def parser() -> MarkdownIt:
    """CommonMark with GFM tables and strikethrough, and the constructs above."""
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    dollarmath_plugin(md, allow_space=False, allow_digits=False, allow_blank_lines=False)
    md.inline.ruler.before("math_inline", "math_inline_double", _double_dollar)
    footnote_plugin(md, inline=False, move_to_end=False, always_match_refs=True)
    md.inline.ruler.at("footnote_ref", _bounded_footnote_ref)
    container_plugin(md, "admonition", validate=_is_container)
    admon_plugin(md)
    return md


def titled(tok: Token) -> bool:
    """Whether the MkDocs admonition that ``tok`` opens writes its title (in quotes): else
    its title token holds the type's name, capitalized, which is not translated."""
    return '"' in tok.info


def task_box(children: list[Token], source: str) -> str | None:
    """The box (``[ ]``, ``[x]``) that a list item's first paragraph (its inline
    ``children``, its ``source`` text) starts with, or None (an escaped ``\\[ ]`` is text)."""
    first = children[0] if children else None
    found = _TASK_BOX.match(first.content) if first is not None and first.type == "text" else None
    if found is None or not source.startswith(found.group(0)):
        return None
    return found.group(0)


class Title(NamedTuple):
    """Where a container's title is in its fence line (offsets in the source)."""

    start: int
    end: int


def container_title(tok: Token, source: str, line_start: int, line_end: int) -> Title | None:
    """The title of the container that ``tok`` opens, its fence line being
    ``source[line_start:line_end]``: the text after the name (``::: warning Read this``), or
    inside Docusaurus's brackets (``:::note[Read this]``); None when there is none."""
    fence = source.find(tok.markup, line_start, line_end)
    name = _NAME.match(source, fence + len(tok.markup), line_end) if fence >= 0 else None
    if name is None:
        return None
    start, end = name.end(), line_end
    rest = source[start:end]
    if rest.startswith("[") and rest.rstrip().endswith("]"):
        start, end = start + 1, start + len(rest.rstrip()) - 1
    text = source[start:end]
    core = text.strip()
    if not core:
        return None
    start += len(text) - len(text.lstrip())
    return Title(start, start + len(core))
