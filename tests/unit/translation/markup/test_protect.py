from __future__ import annotations

import pytest

from serve_app.translation.markup import parse
from serve_app.translation.markup.protect import split

PROTECTED = [
    "{name}",
    "{{user.name}}",
    "{0}",
    "{count, number}",
    "%s",
    "%1$d",
    "%(name)s",
    "%-5.2f",
    "%%",
    "{count, plural, one {# file} other {# files, {n} in {dir}}}",
    "{gender, select, female {her} other {their}}",
    "https://example.com/a_(b)?q=1&r=2#frag",
    "<x1>",
    "</s12>",
    # Liquid and Jinja (Jekyll, Hugo, Ansible): tags and output with filters
    "{% include note.html %}",
    "{%- if user.admin -%}",
    "{{ page.title | upcase }}",
]


@pytest.mark.parametrize("variable", PROTECTED)
def test_variables_are_protected(variable: str) -> None:
    pieces = split(f"Hello {variable}, bye")
    assert pieces == [(False, "Hello "), (True, variable), (False, ", bye")]


@pytest.mark.parametrize(
    "prose", ["50% of us", "100 % sure", "a {b c} d", "x < y", "{}", "{% 10 % off %}", "{%}"]
)
def test_prose_is_not_protected(prose: str) -> None:
    assert split(prose) == [(False, prose)]


def test_url_loses_trailing_punctuation() -> None:
    assert split("See https://ex.com/a.") == [
        (False, "See "),
        (True, "https://ex.com/a"),
        (False, "."),
    ]


def test_plain_text_document_has_placeholders_for_variables() -> None:
    doc = parse("text", "  Hi {name}, {n, plural, one {# new} other {# new}} at %s  ")
    (seg,) = doc.segments
    assert seg.source() == "Hi <x1/>, <x2/> at <x3/>"
    assert doc.rebuild([seg.restore("Hallo <x1/>, <x2/> um <x3/>") or ""]) == (
        "  Hallo {name}, {n, plural, one {# new} other {# new}} um %s  "
    )
    # The fallback keeps every variable whatever the model does.
    assert [r.text for r in seg.runs()] == ["Hi", "at"]
    assert doc.rebuild([seg.join_runs(["Hallo", "um"])]) == (
        "  Hallo {name}, {n, plural, one {# new} other {# new}} um %s  "
    )


def test_unclosed_icu_message_is_not_protected_whole() -> None:
    assert split("{n, plural, one {x}") == [(False, "{n, plural, one "), (True, "{x}")]
