"""core.gc_pause: the collector off while large inputs are read, shared across threads."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from serve_app.core.gc_pause import GC_PAUSE_CHARS, gc_paused
from serve_app.translation.markup.document import Budget, MarkupOptions, OverBudget, parse


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_only_a_large_input_pauses_the_collector() -> None:
    with gc_paused(GC_PAUSE_CHARS - 1):
        assert gc.isenabled()
    with gc_paused(GC_PAUSE_CHARS):
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_last_of_overlapping_reads_starts_it_again() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with gc_paused(GC_PAUSE_CHARS):
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with gc_paused(GC_PAUSE_CHARS):
            second_in.set()
            first_out.wait(10)
            seen.append(gc.isenabled())  # the first has ended; this one still reads
        seen.append(gc.isenabled())

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen == [False, True]


def test_a_collector_turned_off_elsewhere_is_left_off() -> None:
    gc.disable()
    with gc_paused(GC_PAUSE_CHARS):
        pass
    assert not gc.isenabled()


def test_an_error_in_the_block_still_starts_it_again() -> None:
    with pytest.raises(ValueError, match="in the read"), gc_paused(GC_PAUSE_CHARS):
        raise ValueError("in the read")
    assert gc.isenabled()


def test_a_large_markdown_table_is_read_without_a_full_collection() -> None:
    """A 1.6 MB table of 400,000 cells, stopped by a document's budget: markdown-it's million
    tokens set off full collections, each of which held the GIL over every object of the
    process (the event loop stood still for up to 0.8 s at a time, 5.4 s in all); read with
    the collector paused, none runs, and the collector is back on after."""
    text = "|a" * 400_000 + "\n" + "|-" * 400_000
    budget = Budget(
        max_segments=20_000, max_segment_chars=20_000, max_chars=1_000_000,
        max_segment_requests=64,
    )  # fmt: skip
    full: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    gc.callbacks.append(count)
    try:
        with pytest.raises(OverBudget):
            parse("markdown", text, MarkupOptions(budget=budget))
    finally:
        gc.callbacks.remove(count)
    assert full == []
    assert gc.isenabled()
