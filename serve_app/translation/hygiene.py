"""Output hygiene: strip what models add around a translation.

LLMs wrap translations in things nobody asked for: thinking blocks (Qwen3 and other chat
models, even with thinking off they may emit an empty ``<think></think>``), preambles ("Here is
the translation:", "以下是翻译："), quotes around the whole answer, and leftovers of the
prompt format (Seed-X's ``<de>`` target tag and the chain of thought it may append after
``[COT]``, Gemma's turn markers). Each rule applies only when the source text does not itself
start or end that way, so a text that really begins with "Translation:" or sits in quotes
keeps them. Each prompt family lists the rules its models
need (``PromptFamily.rules``); ``COMMON`` are the ones every family uses.

``StreamCleaner`` applies the same rules to a translation while it streams: it passes on only
text that cleaning the whole output will keep, so the deltas add up to the cleaned result.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import regex

from serve_app.core.characters import ESCAPE_JOINER

Rule = Callable[[str, str], str]

_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)
_UNCLOSED_THINK = re.compile(r"^\s*<think>.*", re.DOTALL)
_STRAY_THINK_END = re.compile(r"^\s*</think>\s*")
# The `regex` module (same syntax as `re`) can also tell whether a text could still grow
# into a match (``partial=True``): what the streaming cleaner needs.
_PREAMBLES = (
    regex.compile(
        r"^(?:(?:sure|certainly|of course|okay|ok)[!,.]?\s+)?"
        r"here(?:'s| is| are)\s+(?:the|your|my|a)\s+(?:[\w-]+\s+){0,3}translations?"
        r"(?:\s+(?:of|in|into|to|from)\s+[^:\n]{0,60})?\s*[:：]\s*",
        regex.IGNORECASE,
    ),
    regex.compile(
        r"^(?:translation|translated text|traducción|traduction|übersetzung|tradução)"
        r"(?:\s*\([^)\n]{0,30}\))?\s*[:：]\s*",
        regex.IGNORECASE,
    ),
    regex.compile(r"^(?:以下是|下面是|这是)[^\n：:]{0,30}(?:翻译|译文)[^\n：:]{0,10}[：:]\s*"),
    regex.compile(r"^(?:翻译|译文)(?:结果)?[：:]\s*"),
)
_QUOTES = (
    ('"', '"'),
    ("“", "”"),
    ("„", "“"),
    ("'", "'"),
    ("‘", "’"),
    ("«", "»"),
    ("「", "」"),
    ("『", "』"),
)
# A language tag opening or closing the answer ("<de>", "<pt-BR>"). Two patterns, the spaces
# before a closing tag stripped apart: "\s*<tag>\s*$" searched for was quadratic on a run of
# spaces (a second for 20,000 of them, in a client's text or the model's answer).
_LEADING_TAG = re.compile(r"\s*<[a-z]{2,3}(?:-[A-Za-z]{2,4})?>\s*")
_TRAILING_TAG = re.compile(r"<[a-z]{2,3}(?:-[A-Za-z]{2,4})?>\s*$")
_GEMMA_TURNS = re.compile(r"<(?:start|end)_of_turn>(?:model|user)?\s*")
# Seed-X-PPO may follow its translation with a chain of thought opened by "[COT]".
COT_MARK = "[COT]"


def strip_thinking(output: str, source: str) -> str:
    if "<think>" in source:
        return output
    output = _STRAY_THINK_END.sub("", _THINK.sub("", output))
    # A thinking block that never closed holds no translation.
    return _UNCLOSED_THINK.sub("", output)


def strip_preamble(output: str, source: str) -> str:
    for pattern in _PREAMBLES:
        match = pattern.match(output)
        if match and not pattern.match(source) and output[match.end() :].strip():
            return output[match.end() :]
    return output


def strip_quotes(output: str, source: str) -> str:
    text, src = output.strip(), source.strip()
    for open_, close in _QUOTES:
        wrapped = len(text) > 2 and text.startswith(open_) and text.endswith(close)
        inner = text[len(open_) : -len(close)]
        if wrapped and not src.startswith(open_) and open_ not in inner and close not in inner:
            return inner
    return output


def has_language_tag(text: str) -> bool:
    return bool(_LEADING_TAG.match(text) or _TRAILING_TAG.search(text))


def strip_language_tag(output: str, source: str) -> str:
    if has_language_tag(source):
        return output
    if m := _LEADING_TAG.match(output):
        output = output[m.end() :]
    if m := _TRAILING_TAG.search(output):
        output = output[: m.start()].rstrip()
    return output


def strip_gemma_turns(output: str, source: str) -> str:
    return output if "_of_turn>" in source else _GEMMA_TURNS.sub("", output)


def strip_chain_of_thought(output: str, source: str) -> str:
    """Everything from Seed-X's ``[COT]`` on (the stop sequence should have ended the
    output there; this catches an engine that did not stop)."""
    if COT_MARK in source:
        return output
    return output.partition(COT_MARK)[0]


COMMON: tuple[Rule, ...] = (strip_thinking, strip_preamble, strip_quotes)
# Characters a stream holds back by default: none. The only wrapper ``COMMON`` strips at the
# end is a closing quote, and only from an answer that opened with a quote, which the stream
# holds until text follows its first closing quote (then no rule can strip the pair:
# ``StreamCleaner._quote_pending``); holding more would delay every stream's first text by a
# token. Families with trailing wrappers set their own.
DEFAULT_HOLD = 0


def drop_escape_joiners(output: str, source: str) -> str:
    """The answer without the word joiners the prompt's escaping put into control-token
    strings of the text (``<|im_start|>`` is sent as ``<`` U+2060 ``|im_start|>``): a model
    copies them, and the client got back an invisible character it never sent. Kept when
    the source has one of its own."""
    return output if ESCAPE_JOINER in source else output.replace(ESCAPE_JOINER, "")


def clean(output: str, source: str, rules: tuple[Rule, ...] = COMMON) -> str:
    """The translation without the escaping's joiners and the wrapping the ``rules``
    strip, stripped."""
    text = drop_escape_joiners(output, source).strip()
    for rule in rules:
        text = rule(text, source).strip()
    return text


class StreamCleaner:
    """``clean`` for an output that arrives in pieces: ``feed`` each delta and pass on what
    it returns, then what ``finish`` returns. The start is held while it could still become
    something the rules strip (a preamble, a thinking block, a tag, an opening quote, which
    only the end can show to be a wrapper), and the last ``hold`` characters always are
    (for a family whose rules strip a trailing tag or marker). What was passed on is never
    taken back: if the rules ever drop text already sent, nothing more is sent and the final
    answer (the ``done`` event) is the one to use."""

    def __init__(
        self, source: str, rules: tuple[Rule, ...] = COMMON, hold: int = DEFAULT_HOLD
    ) -> None:
        # ``hold``: longer than the trailing wrappers the rules strip (a target tag
        # "<pt-BR>", a turn marker "<end_of_turn>").
        self.source, self.rules, self.hold = source, rules, hold
        self.raw = self.sent = ""
        self.diverged = False
        self._result: tuple[int, str] | None = None  # (len(raw) it was cleaned at, cleaned)

    def feed(self, delta: str) -> str:
        self.raw += delta
        text = clean(self.raw, self.source, self.rules)
        if not self.sent and self._unsettled(text):
            return ""
        return self._advance(text[: max(0, len(text) - self.hold)])

    def finish(self) -> str:
        return self._advance(self.result())

    def result(self) -> str:
        """``clean`` of the whole output fed so far: the piece's answer once it has ended."""
        if self._result is None or self._result[0] != len(self.raw):
            self._result = (len(self.raw), clean(self.raw, self.source, self.rules))
        return self._result[1]

    def _advance(self, text: str) -> str:
        if self.diverged or self.sent.startswith(text):  # (a rule shortened the held tail)
            return ""
        if not text.startswith(self.sent):
            self.diverged = True
            return ""
        out, self.sent = text[len(self.sent) :], text
        return out

    def _unsettled(self, text: str) -> bool:
        src = self.source.strip()
        if any(p.match(text, partial=True) and not p.match(src) for p in _PREAMBLES):
            return True
        if text.startswith("<") and ">" not in text[:32]:
            return True  # perhaps a thinking block or a tag, not yet closed
        return self._quote_pending(text, src) or self._quote_pending(self.raw.strip(), src)

    @staticmethod
    def _quote_pending(text: str, src: str) -> bool:
        """``text`` opens with a quote (the source does not) and nothing but space has come
        after its first closing quote: only the end shows whether the pair wraps the whole
        answer (``"Hallo"``, stripped) or not (``"Hallo", sagte er``, kept). Checked on the
        cleaned text and on the raw one, which ``clean`` may have just stripped of a pair."""
        for open_, close in _QUOTES:
            if text.startswith(open_) and not src.startswith(open_):
                end = text.find(close, len(open_))
                return end < 0 or not text[end + len(close) :].strip()
        return False
