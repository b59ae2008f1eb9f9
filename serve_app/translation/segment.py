"""Long texts: splitting into pieces that fit one prompt, and putting translations back.

A text over the token budget is cut at the coarsest boundary that works: blank lines
(paragraphs), then line breaks, then sentence ends (Latin ``. ! ?`` followed by a space; CJK
``。！？；`` with or without one), then spaces between words. Only a run of characters with
no space at all (CJK prose without punctuation, a very long URL) is cut between characters.
The whitespace at each cut is kept aside, never translated, and put back between the
translated pieces, so paragraphs, line breaks and indentation survive. Adjacent units are
merged back greedily up to the budget, so pieces are as few and as large as allowed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

CountTokens = Callable[[str], int]

# A line break: CRLF, a lone CR (old Mac files) or LF.
_BREAK = r"(?:\r\n|\r(?!\n)|\n)"
# A paragraph or line break takes the whole run of whitespace around it: whitespace left at
# a piece's end was lost with the model's answer, stripped (a CRLF cut at its LF lost its
# CR). A match starts only where a run of whitespace starts: searched from every position,
# a leading ``\s*`` rescanned a long run of spaces without a line break once per position
# (quadratic: 14 s, holding the GIL, for "a", 80,000 spaces and "b").
_PARAGRAPH = re.compile(rf"(?<!\s)\s*{_BREAK}[ \t]*{_BREAK}\s*")
_LINE = re.compile(rf"(?<!\s)\s*{_BREAK}\s*")
# The end of a sentence: the punctuation (and closing quotes) stays with the sentence.
_SENTENCE = re.compile(
    r"(?<=[.!?…])[\"'”’)\]]*(\s+)"  # Latin: punctuation, then whitespace
    r"|(?<=[。！？；])[”’」』）]*(\s*)"  # CJK: punctuation, whitespace optional
)
_WORD = re.compile(r"\s+")
# No tokenizer's token spans more characters than this in a run without spaces (a chunk cut
# at this many characters per token of budget may come out a little short, never too long).
MAX_CHARS_PER_TOKEN = 16


@dataclass
class Piece:
    """A part of the text to translate and the whitespace that followed it."""

    text: str
    sep: str = ""


@dataclass(frozen=True)
class Split:
    lead: str
    pieces: list[Piece]
    trail: str

    def join(self, translations: list[str]) -> str:
        """The translated pieces with the original whitespace around and between them."""
        body = "".join(t + p.sep for t, p in zip(translations, self.pieces, strict=True))
        return self.lead + body + self.trail


def _split_at(text: str, pattern: re.Pattern[str]) -> list[Piece]:
    """Units of ``text`` cut at ``pattern``; the matched whitespace becomes the separator.

    For sentence ends only the whitespace is a separator: quotes after the punctuation
    stay with the sentence.
    """
    units: list[Piece] = []
    start = 0
    for match in pattern.finditer(text):
        groups = range(1, (match.lastindex or 0) + 1)
        group = next((i for i in groups if match.group(i) is not None), 0)
        cut, end = (match.start(group), match.end(group)) if group else match.span()
        if cut <= start or end >= len(text):
            continue
        units.append(Piece(text[start:cut], text[cut:end]))
        start = end
    units.append(Piece(text[start:], ""))
    return units


def _split_chars(text: str, budget: int, count: CountTokens) -> list[Piece]:
    """Last resort for a run without spaces: chunks of characters that fit the budget.

    Each chunk is measured within a window (at most ``budget * MAX_CHARS_PER_TOKEN``
    characters, then twice the last chunk's size), never against the rest of the text, so
    the whole run costs linear time: measuring the rest once per chunk was quadratic
    (minutes for the longest text allowed)."""
    pieces: list[Piece] = []
    start, largest = 0, budget * MAX_CHARS_PER_TOKEN
    window = largest
    while start < len(text):
        size = min(len(text) - start, window)
        tokens = count(text[start : start + size])
        while size > 1 and tokens > budget:
            size = max(1, size * budget // max(tokens, 1) - 1)
            tokens = count(text[start : start + size])
        pieces.append(Piece(text[start : start + size]))
        start += size
        window = min(largest, 2 * size + 1)
    return pieces


_LEVELS: tuple[re.Pattern[str], ...] = (_PARAGRAPH, _LINE, _SENTENCE, _WORD)


def _units(text: str, budget: int, count: CountTokens, level: int) -> list[Piece]:
    """``text`` (known to be over the budget) cut at the coarsest level that cuts it, each
    unit cut further while it is over the budget."""
    while level < len(_LEVELS):
        units = _split_at(text, _LEVELS[level])
        if len(units) > 1:
            break
        level += 1  # no boundary of this kind: the text is not measured again
    else:
        return _split_chars(text, budget, count)
    out: list[Piece] = []
    for unit in units:
        fits = count(unit.text) <= budget
        sub = [Piece(unit.text)] if fits else _units(unit.text, budget, count, level + 1)
        sub[-1].sep += unit.sep
        out.extend(sub)
    return out


def _merge(units: list[Piece], budget: int, count: CountTokens) -> list[Piece]:
    """Joins neighbouring units (with the whitespace between them) up to the budget."""
    pieces: list[Piece] = []
    tokens = 0
    for unit in units:
        n = count(unit.text)
        if pieces and tokens + count(pieces[-1].sep) + n <= budget:
            last = pieces[-1]
            tokens += count(last.sep) + n
            last.text += last.sep + unit.text
            last.sep = unit.sep
        else:
            pieces.append(Piece(unit.text, unit.sep))
            tokens = n
    return pieces


def split_text(text: str, budget: int, count: CountTokens) -> Split:
    """Cuts ``text`` into pieces of at most ``budget`` tokens (as ``count`` measures)."""
    core = text.strip()
    lead = text[: len(text) - len(text.lstrip())]
    trail = text[len(lead) + len(core) :]
    if count(core) <= budget:
        return Split(lead, [Piece(core)], trail)
    return Split(lead, _merge(_units(core, budget, count, 0), budget, count), trail)


def split_sentences(text: str, count: CountTokens) -> Split | None:
    """``text`` cut at sentence ends into two halves of about equal tokens, or None if it is
    one sentence: used to retry a piece whose translation ran out of tokens."""
    units = _split_at(text, _SENTENCE)
    if len(units) < 2:
        return None
    half = max(1, (count(text) + 1) // 2)
    pieces = _merge(units, half, count)
    return Split("", pieces, "") if len(pieces) > 1 else None
