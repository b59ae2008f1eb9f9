"""One count of the engine requests a segment may need (``Segment.engine_requests``): the
service refuses a request by it (``Document.engine_requests``), and a document's reader
stops by it (``Budget.max_segment_requests``), so that an upload accepted is one whose
segments the service accepts when the document worker sends them."""

from __future__ import annotations

import pytest

from serve_app.translation.markup import Budget, MarkupOptions, OverBudget, engine_requests, parse

BIG = 10**9


def budget(max_segment_requests: int) -> Budget:
    return Budget(1000, 100_000, 1_000_000, max_segment_requests)


def runs(fmt: str, n: int) -> str:
    """One paragraph whose ``n`` words each sit in inline markup of ``fmt``."""
    inline = "<b>w{}</b>" if fmt == "html" else "**w{}**"
    return " ".join(inline.format(i) for i in range(n))


def test_a_segment_needs_one_request_or_one_for_each_run_with_words() -> None:
    html = "<p>a b</p><p>a <b>b</b> c</p><p>a <b>1</b> 2</p>"
    plain, tagged, numbers = parse("html", html).segments
    assert plain.engine_requests() == 1
    assert tagged.engine_requests() == 3
    assert numbers.engine_requests() == 1  # runs without words are not sent
    document = parse("html", "<p>a <b>b</b> c</p>" * 10)
    assert document.engine_requests(BIG) == 30
    assert document.engine_requests(5) == 6  # stopped once past 5


def test_variables_and_urls_split_a_plain_text_into_runs() -> None:
    assert engine_requests("text", "Hello {name}, see https://example.com/x now", BIG) == 3
    assert engine_requests("text", "Hello world", BIG) == 1
    assert engine_requests("text", "a {x} " * 200, BIG) == 200


@pytest.mark.parametrize("fmt", ["html", "markdown"])
def test_a_reader_stops_at_the_segment_past_the_limit(fmt: str) -> None:
    text = f"<p>intro</p><p>{runs(fmt, 6)}</p>" if fmt == "html" else f"intro\n\n{runs(fmt, 6)}\n"
    with pytest.raises(OverBudget, match="Segment 2 splits into 6 parts") as info:
        parse(fmt, text, MarkupOptions(budget=budget(5)))
    assert info.value.in_segment
    document = parse(fmt, text, MarkupOptions(budget=budget(6)))
    assert [s.engine_requests() for s in document.segments] == [1, 6]


@pytest.mark.parametrize("fmt", ["html", "markdown"])
def test_what_a_reader_accepts_a_request_of_the_segment_needs_no_more(fmt: str) -> None:
    """The document worker sends each segment's source as a request in the file's format:
    counted again there, it needs what the reader counted."""
    text = runs(fmt, 128) if fmt == "html" else f"> {runs(fmt, 64)}\n> {runs(fmt, 64)}\n"
    (segment,) = parse(fmt, text, MarkupOptions(budget=budget(128))).segments
    assert segment.engine_requests() == 128
    fragment = "".join(unit.raw for unit in segment.units)
    assert engine_requests(fmt, fragment, BIG) == 128
    with pytest.raises(OverBudget):
        parse(fmt, text, MarkupOptions(budget=budget(127)))


def test_the_characters_are_checked_before_the_runs_are_counted() -> None:
    """A flood of runs is stopped by its characters, as it is read, never walked whole."""
    small = Budget(1000, 500, 1_000_000, 128)
    with pytest.raises(OverBudget, match="characters") as info:
        parse("html", "<p>" + "<b>x</b>" * 100_000 + "</p>", MarkupOptions(budget=small))
    assert not info.value.in_segment
