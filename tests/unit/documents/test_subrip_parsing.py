"""SubRip files read in time linear in their size: ``srt.parse`` searched for each cue with
``finditer``, and its index pattern splits a run of digits every way it can at every
position tried (a line of 2,000 digits: 66 s; 10,000: hours). ``subtitles.parse_srt`` matches
the same pattern where the last cue ended and bounds the digits that start a line."""

from __future__ import annotations

import random
import time

import pytest
import srt

from serve_app.api.errors import http_status
from serve_app.core.errors import MalformedDocument
from serve_app.documents import FORMATS, DocumentLimits, extract
from serve_app.documents.subtitles import MAX_LEADING_DIGITS, parse_srt
from tests.docsamples import SAMPLES

CUE = "1\n00:00:01,000 --> 00:00:02,000\n"


@pytest.mark.parametrize(
    "text",
    [
        "1\n" + "0" * 1_500 + "\n",  # an index line, then no timing: 28 s (10,000: hours)
        "x" + "0" * 1_000 + "\n",  # digits after text: 8 s
        CUE + "hi\n" + "7" * 15_000 + "\nmore\n\n",  # a cue line: 3.5 s for every one
    ],
    ids=["index-line", "after-text", "cue-line"],
)
def test_a_run_of_digits_is_refused_at_once(text: str) -> None:
    data = text.encode()
    start = time.process_time()  # the regex holds the GIL: no thread can time it out
    with pytest.raises(MalformedDocument) as info:
        extract(FORMATS["srt"], data, DocumentLimits())
    assert time.process_time() - start < 1
    assert http_status(info.value) == 400


def test_a_file_of_short_numbers_is_read_in_linear_time() -> None:
    """Lines of 20 digits in a cue's text are read (a phone number, a year), 0.1 MB of them
    in a fraction of a second."""
    text = CUE + ("7" * MAX_LEADING_DIGITS + "\n") * 5_000 + "\n"
    start = time.process_time()
    assert len(parse_srt(text)) == 1
    assert time.process_time() - start < 1


def _fields(cues: list[srt.Subtitle]) -> list[tuple[object, ...]]:
    return [(c.index, c.start, c.end, c.content, c.proprietary) for c in cues]


def test_parse_srt_reads_what_srt_parse_reads() -> None:
    """The same cues, or an error for the same files, on the sample and 3,000 mutations of
    it (CRLF, indexes with dots or signs, missing indexes, blank lines inside a cue)."""
    base = SAMPLES["srt"]().decode()
    pieces = ["1", "\n", "\r\n", "\n\n", " ", "00:00:01,000", " --> ", "-->", "2.5", "-3",
              "00:00:02,000", "Hi", "<i>x</i>", "\r", "0:0:0", ",", "X1 Y2"]  # fmt: skip
    rnd = random.Random(7)
    texts = [base, base + "\n\n\n", "  \n" + base, base.replace("\n", "\r\n"), "", " \n"]
    for _ in range(3_000):
        chars = list(base) if rnd.random() < 0.5 else []
        for _ in range(rnd.randint(0, 12)):
            chars.insert(rnd.randint(0, len(chars)), rnd.choice(pieces))
        texts.append("".join(chars))
    for text in texts:
        try:
            expected: list[tuple[object, ...]] | None = _fields(list(srt.parse(text)))
        except srt.SRTParseError:
            expected = None
        try:
            got: list[tuple[object, ...]] | None = _fields(parse_srt(text))
        except MalformedDocument:
            got = None
        assert got == expected, repr(text)


@pytest.mark.parametrize("newline", ["\r", "\r\n", "\n"], ids=["CR", "CRLF", "LF"])
def test_line_ends_of_every_kind_are_read_as_players_read_them(newline: str) -> None:
    """A file of lone CRs (old Mac style) was a 400 (``srt`` reads CRLF and LF only); FFmpeg's
    SubRip reader and pysubs2 read it, and so does this one now. A mixed file's lone CR
    in a cue is a line break too. The translated file has LF line ends."""
    text = CUE + "Hello\nworld\n\n2\n00:00:03,000 --> 00:00:04,000\n<i>Bye</i>\r\n\n"
    data = text.replace("\r\n", "\n").replace("\n", newline).encode()
    fmt = FORMATS["srt"]
    segments = extract(fmt, data, DocumentLimits())
    assert [s.text for s in segments] == ["Hello\nworld", "<g1>Bye</g1>"]
    out = fmt.rebuild(data, ["Hallo\nWelt", "<g1>Tschüss</g1>"]).decode()
    cues = list(srt.parse(out))
    assert [c.content for c in cues] == ["Hallo\nWelt", "<i>Tschüss</i>"]
    assert [c.start.seconds for c in cues] == [1, 3]
    assert "\r" not in out
