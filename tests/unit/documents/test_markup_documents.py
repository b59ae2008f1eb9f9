"""HTML and Markdown documents go through the markup-preserving translation: each segment is
sent to the replica's service in its ``format``, so the model sees placeholders and a model
that loses them costs nothing (the markup flow's run-by-run fallback keeps every tag). The
replica, its service and the fake engine are real; the store is SQLite."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable

import pytest

from serve_app.core.config import AppConfig
from serve_app.core.documents_config import DocumentsConfig
from serve_app.documents import FORMATS, DocumentLimits, extract
from serve_app.documents.jobs import Upload
from serve_app.documents.replica import ReplicaDocuments
from serve_app.store.sqlite import open_sqlite
from serve_app.translation.service import TranslationService
from tests.docsamples import CHECKS, SAMPLES
from tests.fakes import FakeEngine

_TAG = re.compile(r"</?\s*[a-z]+\d+\s*/?>", re.IGNORECASE)


def _text(prompt: str) -> str:
    """The text of the fake engine's prompt (after the instructions)."""
    return prompt.rsplit("\n\n", 1)[-1]


def keeps_placeholders(prompt: str) -> str:
    return _text(prompt).upper()


def drops_placeholders(prompt: str) -> str:
    return _TAG.sub("", _text(prompt)).upper()


@pytest.fixture
async def replica(tmp_path) -> AsyncIterator[ReplicaDocuments]:  # type: ignore[no-untyped-def]
    engine = FakeEngine()
    service = TranslationService(AppConfig.model_validate({"prompt": {"family": "chat"}}), engine)
    await service.start()
    store = await open_sqlite(str(tmp_path / "store.db"))
    documents = ReplicaDocuments(service, store, DocumentsConfig(worker_concurrency=8), "r1")
    yield documents
    await documents.stop()
    await store.close()


async def _translate(
    documents: ReplicaDocuments, name: str, reply: Callable[[str], str], data: bytes | None = None
) -> bytes:
    documents.service.engine.reply = reply
    data = SAMPLES[name]() if data is None else data
    submitted = await documents.submit("o", Upload(f"a.{name}", data, "de", "en"))
    for _ in range(100):
        if not await documents.worker.step() and not documents.worker.running:
            break
        await asyncio.gather(*list(documents.worker.running))
    job, out = await documents.jobs.result("o", submitted.job.id)
    assert job.state == "done"
    return out


def upper(a: str, b: str) -> bool:
    return b == a.upper()


@pytest.mark.parametrize("reply", [keeps_placeholders, drops_placeholders])
@pytest.mark.parametrize("name", ["html", "md"])
async def test_markup_documents_keep_their_structure_whatever_the_model_does(
    replica: ReplicaDocuments, name: str, reply: Callable[[str], str]
) -> None:
    out = await _translate(replica, name, reply)
    CHECKS[name](SAMPLES[name](), out, upper)
    text = out.decode()
    if name == "html":
        assert "<b>BOLD WORLD</b>" in text
        assert '<a href="https://example.com/x?a=1&amp;b=2">A LINK</a>' in text
        assert "<p>RUN <code>make test</code> NOW.<br>NEXT LINE</p>" in text
        assert "<title>A PAGE</title>" in text
    else:
        assert "> A QUOTED\n> REMARK." in text
        assert "| ONE  | TWO   |" in text


async def test_segments_reach_the_engine_in_the_formatted_prompt(
    replica: ReplicaDocuments,
) -> None:
    """The inline tags of a segment reach the model as placeholders, never raw HTML."""
    engine = replica.service.engine
    await _translate(replica, "html", keeps_placeholders)
    prompts = ["".join(map(chr, r.prompt_token_ids)) for r in engine.requests]
    assert any("<x1>bold world</x1>" in p for p in prompts)
    assert not any("<b>" in p or "href=" in p for p in prompts)


def test_markdown_inline_syntax_is_in_the_segment_it_belongs_to() -> None:
    data = (
        b"> Quoted *emphasis* and `code`\n> on two lines.\n\n1. Item with [a link](https://x.org)\n"
    )
    segments = extract(FORMATS["md"], data, DocumentLimits())
    assert [s.text for s in segments] == [
        "Quoted *emphasis* and `code`\non two lines.",
        "Item with [a link](https://x.org)",
    ]
    rebuilt = FORMATS["md"].rebuild(data, ["Zitat *Betonung* und `code`\nauf zwei Zeilen.", "X"])
    assert rebuilt == b"> Zitat *Betonung* und `code`\n> auf zwei Zeilen.\n\n1. X\n"


def test_a_markdown_files_front_matter_is_kept_as_it_is() -> None:
    """A Jekyll or Hugo post's metadata (found 2026-12-06): its lines were one segment, keys
    included, and the site read the translated file's ``Titel:`` and ``Entwurf: falsch``."""
    front = b"---\r\nlayout: post\r\ntitle: Release notes\r\ndraft: false\r\n---\r\n"
    data = front + b"\r\nWhat is *new*.\r\n"
    segments = extract(FORMATS["md"], data, DocumentLimits())
    assert [s.text for s in segments] == ["What is *new*."]
    assert FORMATS["md"].rebuild(data, ["Was *neu* ist."]) == front + b"\r\nWas *neu* ist.\r\n"


# Line ends markdown-it leaves out of its tokens (a soft break's trailing space, the next
# line's indentation) and CRLF or CR line ends: each paragraph is translated, and the file
# keeps its line ends (mixed ones too: each segment is translated on its own) and block
# quote prefixes.
LINE_ENDS = [
    b"Hello there \nworld again.\n\n> Quoted line \n>   and more.\n",
    b"Hello there\r\nworld again.\r\n\r\n> Quoted line  \r\n> and more.\r\n",
    b"- Hello there\t\n  world again.\r- Quoted line\r  and more.\r",
]


@pytest.mark.parametrize("reply", [keeps_placeholders, drops_placeholders])
@pytest.mark.parametrize("data", LINE_ENDS)
async def test_markdown_line_ends_are_translated_and_kept(
    replica: ReplicaDocuments, data: bytes, reply: Callable[[str], str]
) -> None:
    out = await _translate(replica, "md", reply, data)
    assert out.decode() == data.decode().upper()
