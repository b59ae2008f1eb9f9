"""Paragraphs made of formatted runs (Word, PowerPoint) as segments, and back.

A paragraph is a sequence of runs, each with its formatting. Adjacent runs formatted alike
form a group; a paragraph with one group is plain text, one with several is a tagged segment
whose ``gN`` is group N. Writing a translation back puts group N's text into the group's
first run and empties the others, so every run keeps its own formatting (bold, italic,
links, fonts) and the paragraph keeps its runs in their order.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from serve_app.documents import inline
from serve_app.documents.base import (
    DocumentFormat,
    Segment,
    check_count,
    keep_space,
    with_neighbours,
)

R = TypeVar("R")
PutText = Callable[[R, str], None]


@dataclass
class Stretch(Generic[R]):
    """Runs of one paragraph translated together, grouped by formatting."""

    groups: list[list[R]]

    def texts(self, get: Callable[[R], str]) -> list[str]:
        return ["".join(get(r) for r in group) for group in self.groups]


def stretch(runs: Sequence[R], key: Callable[[R], Hashable], get: Callable[[R], str]) -> Stretch[R]:
    """Groups adjacent runs with the same key; runs without text join no group."""
    groups: list[list[R]] = []
    last: Hashable = object()
    for run in runs:
        if not get(run):
            continue
        k = key(run)
        if groups and k == last:
            groups[-1].append(run)
        else:
            groups.append([run])
        last = k
    return Stretch(groups)


def segment(s: Stretch[R], get: Callable[[R], str], context: str) -> Segment | None:
    """The stretch's segment; None if it holds no translatable text."""
    texts = s.texts(get)
    if not "".join(texts).strip():
        return None
    if len(texts) == 1:
        return Segment(texts[0], context)
    nodes: list[inline.Node] = [inline.Tag("g", i + 1, [t]) for i, t in enumerate(texts)]
    return Segment(inline.render(nodes), context, tagged=True)


def segments(
    stretches: Sequence[Stretch[R]], get: Callable[[R], str]
) -> tuple[list[Stretch[R]], list[Segment]]:
    """The stretches that hold text and their segments, each with its neighbours as context."""
    found = [(s, segment(s, get, "")) for s in stretches]
    kept = [(s, seg) for s, seg in found if seg is not None]
    contexts = with_neighbours(["".join(s.texts(get)).strip() for s, _ in kept])
    return [s for s, _ in kept], [
        Segment(seg.text, ctx, seg.tagged) for (_, seg), ctx in zip(kept, contexts, strict=True)
    ]


def apply(s: Stretch[R], translation: str, get: Callable[[R], str], put: PutText[R]) -> None:
    """Writes ``translation`` (of ``segment(s)``) into the stretch's runs."""
    sources = s.texts(get)
    outs = [translation] if len(sources) == 1 else _group_outputs(translation, sources)
    for group, source, out in zip(s.groups, sources, outs, strict=True):
        put(group[0], keep_space(source, out) if source.strip() else source)
        for run in group[1:]:
            put(run, "")


def _group_outputs(translation: str, sources: list[str]) -> list[str]:
    nodes: list[inline.Node] = [inline.Tag("g", i + 1, [t]) for i, t in enumerate(sources)]
    parsed = inline.matches(translation, nodes)
    if parsed is None:  # not a checked translation: keep the structure, text in the first
        try:
            text = inline.plain(inline.parse(translation))
        except ValueError:
            text = translation
        return [text] + [""] * (len(sources) - 1)
    return inline.group_texts(parsed, len(sources))


class Package(Protocol):
    """An opened Office file: its stretches of runs, their segments, and how to save it."""

    stretches: list[Stretch[Any]]
    segments: list[Segment]

    def save(self) -> bytes: ...


class RunsFormat(DocumentFormat):
    """An Office Open XML format whose paragraphs' runs are translated, formatting kept."""

    zipped: ClassVar[bool] = True
    xml_text: ClassVar[bool] = True

    @abstractmethod
    def open(self, data: bytes) -> Package:
        """The file, parsed (``reading`` turns its library's errors into 400s)."""

    @staticmethod
    @abstractmethod
    def get(r: Any) -> str:
        """A run's text."""

    @staticmethod
    @abstractmethod
    def put(r: Any, text: str) -> None:
        """Replaces a run's text."""

    def extract(self, data: bytes) -> list[Segment]:
        return self.open(data).segments

    def rebuild(self, data: bytes, translations: Sequence[str]) -> bytes:
        package = self.open(data)
        check_count(translations, len(package.segments))
        for s, translation in zip(package.stretches, translations, strict=True):
            apply(s, translation, self.get, self.put)
        return package.save()
