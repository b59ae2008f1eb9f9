"""Output hygiene per prompt family: wrapping removed, real content kept."""

from __future__ import annotations

import pytest

from serve_app.hygiene import clean

CASES = [
    # family, model output, source text, expected
    ("chat", "<think>\nLet me think.\n</think>\n\nHallo Welt", "Hello world", "Hallo Welt"),
    ("chat", "<think>\n\n</think>\n\nHallo Welt", "Hello world", "Hallo Welt"),
    ("chat", "</think>\n\nHallo", "Hello", "Hallo"),
    ("chat", "<think>I never finished thinking", "Hello", ""),
    ("chat", "Here is the translation:\n\nHallo Welt", "Hello world", "Hallo Welt"),
    ("chat", "Sure! Here's the German translation: Hallo", "Hello", "Hallo"),
    ("chat", "Here is the translation of the text into German:\nHallo", "Hello", "Hallo"),
    ("chat", '"Hallo Welt"', "Hello world", "Hallo Welt"),
    ("chat", "“Hallo Welt”", "Hello world", "Hallo Welt"),
    ("chat", "Translation: Hallo", "Hello", "Hallo"),
    ("hy_mt", "以下是翻译结果：\nHello world", "你好，世界", "Hello world"),
    ("hy_mt", "译文：你好", "Hello", "你好"),
    ("hy_mt", "「你好」", "Hello", "你好"),
    ("hunyuan_mt", "翻译结果：你好", "Hello", "你好"),
    ("hunyuan_mt", "  Bonjour  ", "Hello", "Bonjour"),
    ("seed_x", "Hallo Welt <de>", "Hello world", "Hallo Welt"),
    ("seed_x", "<de> Hallo Welt", "Hello world", "Hallo Welt"),
    ("translategemma", "Hallo Welt<end_of_turn>", "Hello world", "Hallo Welt"),
    ("translategemma", "«Bonjour»", "Hello", "Bonjour"),
]


@pytest.mark.parametrize(("family", "output", "source", "expected"), CASES)
def test_wrapping_is_removed(family: str, output: str, source: str, expected: str) -> None:
    assert clean(output, source, family) == expected


KEPT = [
    ("chat", '"Hallo", sagte er', '"Hello", he said'),  # quotes that are not around it all
    ("chat", '"Hallo Welt"', '"Hello world"'),  # the source was quoted too
    ("chat", "Translation: the act of translating", "Translation: the act"),
    ("chat", "Here is the translation:", "Hello"),  # nothing after it: keep what we have
    ("hy_mt", "He said 'hi' and 'bye'", "Er sagte 'hi' und 'bye'"),
    ("seed_x", "Use the <de> tag", "Use the <de> tag"),
    ("chat", "<think> tags are HTML-like", "<think> tags are HTML-like"),
]


@pytest.mark.parametrize(("family", "output", "source"), KEPT)
def test_content_that_looks_like_wrapping_is_kept(family: str, output: str, source: str) -> None:
    assert clean(output, source, family) == output
