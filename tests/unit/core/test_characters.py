"""The characters names and terms may not hold: one regex, the same set as the Unicode
categories it stands for (Cc, Cs, Zl, Zp), and invisible terms."""

from __future__ import annotations

import unicodedata

import pytest

from serve_app.core.characters import bad_character, invisible

pytestmark = pytest.mark.unit

_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})


def test_the_pattern_refuses_exactly_those_categories() -> None:
    wrong = [
        f"U+{cp:04X}"
        for cp in range(0x110000)
        if (unicodedata.category(chr(cp)) in _CATEGORIES) != (bad_character(chr(cp)) is not None)
    ]
    assert wrong == []


@pytest.mark.parametrize(
    ("text", "found"),
    [("cart", None), ("a\tb", "U+0009"), ("a\x85", "U+0085"), ("x\u2028", "U+2028"),
     ("\ud800", "U+D800"), ("ok \x00 then \x07", "U+0000"), ("a\u200bb\u202e", None)],
)  # fmt: skip
def test_first_bad_character_is_named(text: str, found: str | None) -> None:
    assert bad_character(text) == found


def test_newlines_and_tabs_may_be_allowed() -> None:
    assert bad_character("a\r\n\tb", allow_newlines=True) is None
    assert bad_character("a\n\x0bb", allow_newlines=True) == "U+000B"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", True), (" \u00a0", True), ("\u200b", True), ("\ufeff\u200e ", True),
     ("a", False), ("\u200dx", False)],
)  # fmt: skip
def test_invisible_is_whitespace_and_format_characters_only(text: str, expected: bool) -> None:
    assert invisible(text) is expected
