"""Markup's CPU cost per request, and the HTML parsers it was chosen among.

``python -m bench.markup`` reads the ``html`` workload's posts (Mastodon statuses) and
reports, per request: microseconds to parse a post into segments with placeholders, and to
check and restore the answers and rebuild it (the model's answer is taken to be its input,
well-formed), beside the same for the ``variable`` workload's plain texts. ``--parsers``
compares ``html.parser`` (what ``serve_app.translation.markup`` uses) with ``selectolax``
and ``lxml`` where they are importable: time to parse and serialize a post, and how many
posts come back byte for byte. CPU figures are for comparing, as ratios, within one run.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from html.parser import HTMLParser

from bench.workloads import Item, make_workload
from serve_app.translation.markup import parse


def _per_item_us(items: list[Item], work: Callable[[Item], object], rounds: int) -> float:
    for item in items[: min(20, len(items))]:
        work(item)  # warm up
    start = time.perf_counter()
    for _ in range(rounds):
        for item in items:
            work(item)
    return (time.perf_counter() - start) / (rounds * len(items)) * 1e6


def parse_only(item: Item) -> object:
    return parse(item.format, item.text)


def round_trip(item: Item) -> str:
    """Parse, every segment's placeholders rendered, its answer checked and restored, and
    the document rebuilt: all the markup work of one request but the engine's."""
    doc = parse(item.format, item.text)
    outputs = []
    for segment in doc.segments:
        restored = segment.restore(segment.source())
        assert restored is not None
        outputs.append(restored)
    return doc.rebuild(outputs)


def markup_cost(n: int, rounds: int, seed: int = 0) -> dict[str, float]:
    posts = make_workload("html", n, seed=seed)
    plain = make_workload("variable", n, seed=seed)
    assert all(round_trip(p) == p.text for p in posts)
    return {
        "html_parse_us": _per_item_us(posts, parse_only, rounds),
        "html_round_trip_us": _per_item_us(posts, round_trip, rounds),
        "text_parse_us": _per_item_us(plain, parse_only, rounds),
        "text_round_trip_us": _per_item_us(plain, round_trip, rounds),
    }


class _Tokens(HTMLParser):
    """The standard library's tokenizer, as the markup package drives it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.n = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.n += 1


def _stdlib(text: str) -> str:
    from serve_app.translation.markup.htmltree import parse_tree

    return parse_tree(text).raw()


def _selectolax(text: str) -> str:
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(text)
    body = tree.body
    return body.inner_html if body is not None else ""


def _lxml(text: str) -> str:
    import lxml.html

    frag = lxml.html.fragment_fromstring(text, create_parent="div")
    out = lxml.html.tostring(frag, encoding="unicode")
    return out.removeprefix("<div>").removesuffix("</div>")


PARSERS: dict[str, Callable[[str], str]] = {
    "html.parser (stdlib, with source spans)": _stdlib,
    "selectolax 1.0.2 (lexbor)": _selectolax,
    "lxml 6.1.3 (libxml2)": _lxml,
}


def compare_parsers(n: int, rounds: int, seed: int = 0) -> list[dict[str, object]]:
    posts = make_workload("html", n, seed=seed)
    posts += [_with_entities(p) for p in posts]
    rows: list[dict[str, object]] = []
    for name, fn in PARSERS.items():
        try:
            fn(posts[0].text)
        except ImportError:
            rows.append({"parser": name, "available": False})
            continue
        identical = sum(fn(p.text) == p.text for p in posts)
        us = _per_item_us(posts, _on_text(fn), rounds)
        rows.append(
            {"parser": name, "us_per_post": us, "identical": identical, "posts": len(posts)}
        )
    return rows


def _on_text(fn: Callable[[str], str]) -> Callable[[Item], object]:
    return lambda item: fn(item.text)


def _with_entities(item: Item) -> Item:
    """The post as Mastodon also writes them: entities, a quoted attribute, a line break."""
    from dataclasses import replace

    text = item.text.replace("</a></span> ", "</a></span> &amp; ", 1)
    text = text.replace("</p><p>", "</p>\n<p>", 1)
    return replace(item, text=text.replace("<p>", "<p>&quot;It&#39;s&quot;<br /> ", 1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--parsers", action="store_true", help="compare HTML parsers too")
    ns = p.parse_args()
    out: dict[str, object] = {"markup": markup_cost(ns.requests, ns.rounds)}
    if ns.parsers:
        out["parsers"] = compare_parsers(ns.requests, ns.rounds)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
