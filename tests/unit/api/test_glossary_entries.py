"""Glossary entries as clients write them (TSV, CSV) and the terms one text needs."""

from __future__ import annotations

import pytest

from serve_app.api.glossary_entries import parse_entries, terms_for, to_csv, to_tsv
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
