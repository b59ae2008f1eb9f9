from __future__ import annotations

import pytest

from serve_app.translation.markup import Style, parse
from serve_app.translation.markup.segment import Segment


def segment(html: str) -> Segment:
    (seg,) = parse("html", html).segments
    return seg


LINK = segment('Read <a href="/doc?a=1&amp;b=2">the <b>docs</b></a> now<br>please')


def test_source_shows_placeholders() -> None:
    assert LINK.source() == "Read <x1>the <x2>docs</x2></x1> now<x3/>please"


def test_reordered_answer_gets_its_tags_back() -> None:
    out = LINK.restore("Bitte<x3/> jetzt <x1>die <x2>Doku</x2></x1> lesen")
    assert out == 'Bitte<br> jetzt <a href="/doc?a=1&amp;b=2">die <b>Doku</b></a> lesen'


@pytest.mark.parametrize(
    "answer",
    [
        "Lies <x1>die Doku</x1> jetzt<x3/>bitte",  # x2 dropped
        "Lies <x1>die <x2>Doku</x2></x1> <x1>x</x1> jetzt<x3/>",  # x1 twice
        "Lies <x1>die <x2>Doku</x1></x2> jetzt<x3/>",  # badly nested
        "Lies <x1>die <x2>Doku</x2></x1> jetzt<x3/><x9/>",  # invented
        "Lies <x1>die <x2>Doku</x2> jetzt<x3/>",  # never closed
        "Lies </x1>die <x2>Doku</x2><x1> jetzt<x3/>",  # closed before opened
        "Lies <x1/>die <x2>Doku</x2> jetzt<x3/>",  # a pair written as void
        "Lies <x1>die <x2>Doku</x2></x1> jetzt<x3>",  # void opened, never closed
    ],
)
def test_answers_that_lose_or_mangle_tags_are_refused(answer: str) -> None:
    assert LINK.restore(answer) is None


def test_void_written_as_pair_and_spacing_accepted() -> None:
    assert LINK.restore("A <x1>b <X2>c</x2></x1> d<x3></x3>e") is not None
    assert LINK.restore("A < x1 >b <x2 >c</x2></x1> d<x3 />e") is not None


def test_hy_mt_style_uses_s_tags() -> None:
    style = Style("s", void_as_pair=True)
    assert LINK.source(style) == "Read <s1>the <s2>docs</s2></s1> now<s3></s3>please"
    assert LINK.restore("<s1>die <s2>Doku</s2></s1> jetzt<s3></s3>bitte", style) is not None
    assert LINK.restore("<x1>die <x2>Doku</x2></x1> jetzt<x3/>bitte", style) is None


def test_text_is_escaped_when_restored() -> None:
    seg = segment("Tom &amp; <i>Jerry</i> &nbsp;show")
    assert seg.source() == "Tom & <x1>Jerry</x1> \xa0show"
    assert seg.restore("Tom & <x1>Jerry</x1> <script>\xa0") == (
        "Tom &amp; <i>Jerry</i> &lt;script&gt;&nbsp;"
    )


def test_fallback_translates_runs_and_keeps_every_tag() -> None:
    runs = LINK.runs()
    assert [r.text for r in runs] == ["Read", "the", "docs", "now", "please"]
    out = LINK.join_runs(["Lies", "die", "Doku", "jetzt", "bitte & <danke>"])
    assert out == (
        'Lies <a href="/doc?a=1&amp;b=2">die <b>Doku</b></a> jetzt<br>bitte &amp; &lt;danke&gt;'
    )
    with pytest.raises(ValueError, match="runs"):
        LINK.join_runs(["too few"])


def test_runs_without_words_are_kept() -> None:
    seg = segment("<b>Hi</b> — <i>:)</i> 42")
    assert [r.text for r in seg.runs()] == ["Hi"]
    assert seg.join_runs(["Hallo"]) == "<b>Hallo</b> — <i>:)</i> 42"
