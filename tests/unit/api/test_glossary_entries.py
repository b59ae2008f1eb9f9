"""Glossary entries as clients write them (TSV, CSV) and the terms one text needs."""

from __future__ import annotations

import threading

import pytest

from serve_app.api.glossary_entries import (
    Entries,
    parse_entries,
    terms_for,
    to_csv,
    to_tsv,
    written_async,
)
from serve_app.core.errors import InvalidGlossary

pytestmark = pytest.mark.unit


def test_tsv_skips_blank_lines_and_trims_terms() -> None:
    assert parse_entries(" cart \tWarenkorb\r\n\n  \nbig\tgroß\n", "tsv") == (
        ("cart", "Warenkorb"),
        ("big", "groß"),
    )


@pytest.mark.parametrize(("data", "message"), [("cart", "line 1"), ("a\tb\n\nc\td\te", "line 3")])
def test_tsv_lines_need_exactly_one_tab(data: str, message: str) -> None:
    with pytest.raises(InvalidGlossary, match=message):
        parse_entries(data, "tsv")


def test_csv_reads_quotes_and_deepls_language_columns() -> None:
    data = '"a, b",c\n"say ""hi""",hallo,en,de\n\n'
    assert parse_entries(data, "csv") == (("a, b", "c"), ('say "hi"', "hallo"))


@pytest.mark.parametrize("data", ["a,b,c\n", "a\n", '"a,b\n'])
def test_bad_csv_rows_are_refused(data: str) -> None:
    with pytest.raises(InvalidGlossary):
        parse_entries(data, "csv")


def test_unknown_format_is_refused() -> None:
    with pytest.raises(InvalidGlossary, match="'xml'"):
        parse_entries("a\tb", "xml")


def test_written_entries_read_back() -> None:
    entries = (("a, b", "c"), ('say "hi"', "hallo"), ("x", "y"))
    assert parse_entries(to_csv(entries), "csv") == entries
    assert parse_entries(to_tsv(entries), "tsv") == entries


def test_only_the_terms_in_the_text_are_kept_case_insensitively() -> None:
    entries = (("Cart", "Warenkorb"), ("checkout", "Kasse"), ("STRASSE", "Straße"))
    assert terms_for("Your CART on the straße", entries) == (
        ("Cart", "Warenkorb"),
        ("STRASSE", "Straße"),
    )


@pytest.mark.parametrize(
    ("data", "fmt"), [("\ufeffcart\tWarenkorb\r\n", "tsv"), ("\ufeffcart,Warenkorb\r\n", "csv")]
)
def test_a_leading_byte_order_mark_is_dropped(data: str, fmt: str) -> None:
    """Excel and Notepad save UTF-8 with a BOM: it stuck to the first source term, which
    then matched no text."""
    assert parse_entries(data, fmt) == (("cart", "Warenkorb"),)


def test_tsv_lines_end_at_lf_crlf_and_cr_only() -> None:
    """A vertical tab or U+2028 inside a term stays in it (the store names it), rather
    than splitting the line where the client's editor shows none."""
    assert parse_entries("a\tb\rc\td\r\ne\tf", "tsv") == (("a", "b"), ("c", "d"), ("e", "f"))
    assert parse_entries("a\x0bx\tb\nc\u2028y\td", "tsv") == (("a\x0bx", "b"), ("c\u2028y", "d"))


async def test_large_glossaries_are_written_off_the_event_loop() -> None:
    """The routes that serve a glossary's TSV or CSV write a large one in a worker thread."""
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def write(entries: Entries) -> str:
        threads.append(threading.get_ident())
        return to_csv(entries)

    small = (("a", "b"),)
    large = tuple((f"{i:05d}" + "s" * 100, "t" * 100) for i in range(1000))
    assert await written_async(write, small) == "a,b\n"
    assert (await written_async(write, large)).count("\n") == 1000
    assert threads == [loop_thread, threads[1]]
    assert threads[1] != loop_thread
