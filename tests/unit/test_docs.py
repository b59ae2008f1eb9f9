"""The README stays short and the docs' links stay whole.

A newcomer reads README.md first: it must stay a page read in minutes, its set-up section must
hold the two blocks the CI smoke test runs (found by their marker lines), and no link in it or
in docs/ may point at a file or a heading that is not there (files move; links rot silently).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# The repository root, wherever in tests/ this file sits.
ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
README = ROOT / "README.md"
PAGES = [README, ROOT / "cluster" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)

DEMO_SERVE = """<!-- ci: demo-serve -->
```bash
./serve.sh --demo
```"""

DEMO_CURL = """<!-- ci: demo-curl -->
```bash
curl -s localhost:8000/translate -H 'Content-Type: application/json' \\
  -d '{"text": "Hello, world!", "source_lang": "en", "target_lang": "de"}'
```"""


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(h) for h in _HEADING.findall(text)}


def _relative_links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return [t for t in _LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I)]


def _is_broken(page: Path, target: str) -> bool:
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    if not dest.exists():
        return True
    return bool(anchor) and dest.suffix == ".md" and anchor not in _anchors(dest)


def test_readme_is_short() -> None:
    assert len(README.read_text(encoding="utf-8")) < 10_500


def test_readme_holds_the_ci_demo_blocks_in_order() -> None:
    text = README.read_text(encoding="utf-8")
    serve, curl = text.find(DEMO_SERVE), text.find(DEMO_CURL)
    assert serve != -1, "the demo-serve block is missing or changed"
    assert curl != -1, "the demo-curl block is missing or changed"
    assert serve < curl
    assert text.count("<!-- ci: demo-serve -->") == 1
    assert text.count("<!-- ci: demo-curl -->") == 1


def test_readme_shows_a_nonempty_demo_translation_after_the_curl() -> None:
    text = README.read_text(encoding="utf-8")
    after = text[text.find(DEMO_CURL) + len(DEMO_CURL) :]
    answer = re.search(r'"translation":\s*"([^"]*)"', after)
    assert answer is not None
    assert answer.group(1).strip()


def test_pages_exist() -> None:
    names = {p.name for p in PAGES}
    expected = {
        "README.md",
        "api.md",
        "compatibility.md",
        "operations.md",
        "reliability.md",
        "benchmarks.md",
        "cluster.md",
        "development.md",
    }
    assert expected <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_existing_files_and_headings(page: Path) -> None:
    broken = [target for target in _relative_links(page) if _is_broken(page, target)]
    assert not broken, f"{page.name}: broken links {broken}"


def test_link_checker_sees_links() -> None:
    """The checker itself: it finds relative links and skips absolute ones."""
    links = _relative_links(README)
    assert "docs/api.md" in links
    assert not any(link.startswith("https:") for link in links)
    assert _is_broken(README, "docs/no-such-page.md")
    assert _is_broken(README, "docs/api.md#no-such-heading")
    assert not _is_broken(README, "docs/api.md#request-fields")
    assert _slug("The serving path's cost") == "the-serving-paths-cost"
    assert _slug("Prometheus, Grafana and the Ray dashboard") == (
        "prometheus-grafana-and-the-ray-dashboard"
    )
