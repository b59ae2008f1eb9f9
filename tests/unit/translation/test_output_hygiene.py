"""Output hygiene per prompt family: wrapping removed, real content kept."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from serve_app.core.config import PromptConfig
from serve_app.translation.families import make_prompt_family
from serve_app.translation.hygiene import DEFAULT_HOLD


def clean(output: str, source: str, family: str) -> str:
    return make_prompt_family(PromptConfig(family=family)).clean(output, source)


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
    # Seed-X-7B issue #9: a chain of thought after "[COT]" (when the stop did not end it).
    ("seed_x", "真倒霉！\n\n[COT] 好的，我现在需要翻译。", "F", "真倒霉！"),
    ("seed_x", "Hallo Welt <de>[COT] Erst die Wörter.", "Hello world", "Hallo Welt"),
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
    ("seed_x", "Der Marker [COT] beginnt", "The marker [COT] starts"),  # the source has it
    ("chat", "<think> tags are HTML-like", "<think> tags are HTML-like"),
]


@pytest.mark.parametrize(("family", "output", "source"), KEPT)
def test_content_that_looks_like_wrapping_is_kept(family: str, output: str, source: str) -> None:
    assert clean(output, source, family) == output


LONG = "Der schnelle braune Fuchs springt über den faulen Hund, und dann läuft er weiter. " * 3
STREAMED = [
    *((f, o, s) for f, o, s, _ in CASES),
    *KEPT,
    ("chat", LONG, "The quick brown fox jumps over the lazy dog. " * 3),
    ("chat", "Here is the translation:\n" + LONG, "The quick brown fox."),
    ("chat", "<think>\nFirst the words.\n</think>\n" + LONG, "The fox."),
    ("chat", f'"{LONG}"', "The fox."),
    ("chat", '"Hallo", sagte er. ' + LONG, "Hello, he said."),
    ("chat", "«Hallo» sagte er.", "Hello, he said."),
    ("hy_mt", "以下是翻译：" + "这是一个很长的句子。" * 5, "This is a long sentence."),
    ("translategemma", LONG + "<end_of_turn>", "The fox."),
    ("seed_x", LONG + "[COT] Zuerst übersetze ich die Wörter einzeln.", "The fox."),
]


def streamed(output: str, source: str, family: str, cuts: list[int]) -> list[str]:
    """What StreamCleaner passes on when ``output`` arrives cut at ``cuts``."""
    cleaner = make_prompt_family(PromptConfig(family=family)).stream_cleaner(source)
    bounds = [0, *sorted(set(cuts)), len(output)]
    sent = [cleaner.feed(output[a:b]) for a, b in itertools.pairwise(bounds)]
    return [*sent, cleaner.finish()]


@pytest.mark.parametrize(("family", "output", "source"), STREAMED)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_streamed_deltas_add_up_to_the_cleaned_output(
    family: str, output: str, source: str, data: st.DataObject
) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(output)), max_size=40))
    assert "".join(streamed(output, source, family, cuts)) == clean(output, source, family)


@pytest.mark.parametrize(
    "output", [LONG, "Here is the translation: " + LONG, "<think>Hm.</think>" + LONG]
)
def test_a_plain_translation_streams_as_it_comes(output: str) -> None:
    """Only the last few characters wait for the end (a closing quote or tag may follow)."""
    sent = streamed(output, "The fox.", "chat", list(range(4, len(output), 4)))
    before_the_end = "".join(sent[:-1])
    hold = DEFAULT_HOLD
    assert len(before_the_end) >= len(clean(output, "The fox.", "chat")) - hold - 4
    assert before_the_end.startswith("Der schnelle")


@pytest.mark.parametrize("family", ["hy_mt", "hunyuan_mt", "chat"])
def test_the_first_token_is_sent_at_once(family: str) -> None:
    """Nothing waits for a second token when no rule could strip the end (the time to first
    token of a stream is one engine step, as with `vllm serve`)."""
    cleaner = make_prompt_family(PromptConfig(family=family)).stream_cleaner("Good morning")
    assert cleaner.feed("Guten") == "Guten"
    assert cleaner.feed(" Morgen") == " Morgen"


@pytest.mark.parametrize("cuts", [[7], [1, 6, 7, 8], list(range(1, 19))])
def test_a_quoted_opening_is_not_taken_for_a_wrapper_too_soon(cuts: list[int]) -> None:
    """``"Hallo"`` alone would be stripped of its quotes; once text follows the closing quote
    they are kept, and the deltas already sent must still be the answer's start (they were
    ``Hallo`` and then nothing more: the stream stopped at its first word)."""
    output = '"Hallo", sagte er.'
    sent = streamed(output, "Hello, he said.", "chat", cuts)
    assert "".join(sent) == output
    assert "".join(sent[:-1]).startswith('"Hallo",')  # streamed before the end


def test_a_quoted_start_waits_for_the_end() -> None:
    """Only the end shows whether an opening quote wraps the whole answer."""
    output = f'"{LONG}"'
    sent = streamed(output, "The fox.", "chat", list(range(4, len(output), 4)))
    assert "".join(sent[:-2]) == ""  # every delta before the one with the closing quote
    assert "".join(sent) == LONG.strip()
