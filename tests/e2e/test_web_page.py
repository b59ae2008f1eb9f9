"""The web page at ``/`` in a real browser (Debian's chromium, driven by Playwright) against
`serve run` of the demo config with API keys on: the key dialog, streamed translation as you
type, language pickers, swap, errors in words, first paint, page weight, accessibility
(axe-core), the Files tab's round trip of a document, stored glossaries, and the
screenshots in docs/ui/.

The cluster is this module's own (keys on, one replica); like the other modules with their own
cluster, it restarts Ray, so it runs before the session's shared cluster starts
(tests/conftest.py orders them).
Needs chromium: scripts/install_browser.sh (called by .ci/run).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest

from bench.ports import free_port
from tests.conftest import ROOT
from tests.e2e.conftest import serve_cluster
from tests.e2e.web_browser import (
    API_KEY,
    CHROMIUM,
    CHROMIUM_ARGS,
    EVENT_BY_EVENT,
    MAX_TEXT_CHARS,
    PHONE,
    WATCH_OUTPUT,
    keyed_demo_config,
    new_page,
    ready,
    serious_violations,
    wait_enabled,
    wait_translated,
)

ENGLISH = "The weather is lovely today, so we are going for a long walk in the park."
SHOTS = ROOT / "docs" / "ui"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("web")
    config = keyed_demo_config(workdir, free_port())
    ray_args = [f"--port={free_port()}"]
    with serve_cluster(config, workdir, replicas=1, ray_args=ray_args) as base:
        yield base + "/"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install_browser.sh", pytrace=False)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def test_first_paint_is_fast_the_page_small_and_all_from_the_service(
    browser: Any, url: str
) -> None:
    with new_page(browser, key=API_KEY) as (page, traffic):
        ready(page, url)
        paint = page.evaluate(
            "() => performance.getEntriesByName('first-contentful-paint')[0].startTime"
        )
        page.wait_for_load_state("networkidle")
    assert paint < 1000, f"first contentful paint after {paint:.0f} ms"
    assert set(traffic.asset_bytes) >= {url, url + "ui/static/app.js", url + "ui/static/app.css"}
    assert 0 < sum(traffic.asset_bytes.values()) < 200_000, traffic.asset_bytes
    assert all(u.startswith(url) for u in traffic.urls), traffic.urls


def test_a_keyed_server_asks_for_a_key_and_keeps_it(browser: Any, url: str) -> None:
    with new_page(browser, key=None) as (page, traffic):
        page.goto(url)
        dialog = page.locator("#key-dialog")
        dialog.wait_for(state="visible", timeout=30_000)
        assert page.evaluate("() => document.activeElement.id") == "key-input"
        page.fill("#key-input", "not-a-key")
        page.keyboard.press("Enter")
        page.wait_for_function(
            "() => document.getElementById('key-error').textContent.includes('refused')"
        )
        assert dialog.is_visible()
        page.fill("#key-input", API_KEY)
        page.click("#key-save")
        wait_enabled(page, traffic)
        assert not dialog.is_visible()
        assert page.text_content("#model") == "tiny-random-demo"
        assert page.evaluate("() => JSON.parse(localStorage.getItem('mt.key'))") == API_KEY
        page.reload()
        wait_enabled(page, traffic)
        assert not dialog.is_visible()


def test_typing_streams_the_translation_and_shows_the_detected_language(
    browser: Any, url: str
) -> None:
    with new_page(browser, key=API_KEY) as (page, traffic):
        page.add_init_script(EVENT_BY_EVENT)
        ready(page, url)
        page.click("#text")
        page.keyboard.type("Good morning, my friends. " + ENGLISH, delay=15)
        final = wait_translated(page)
        # Debounced: typing ~100 characters sent one request, not one per key.
        assert 1 <= len(traffic.streams) <= 2, traffic.streams
        assert traffic.streams[-1]["source_lang"] == "auto"
        assert final
        detected = page.text_content("#detected") or ""
        assert re.fullmatch(r"Detected: English \(\d{1,3}% sure\)", detected), detected
        assert f"/ {MAX_TEXT_CHARS}" in (page.text_content("#counter") or "")
        assert page.is_visible("#options")  # the demo's chat family takes all three options
        # The page is handed each stream event by event (EVENT_BY_EVENT): what it shows is
        # checked after every delta, whatever the network grouped. When events leave the
        # server is the pacing's (tests/unit/api/test_pacing.py, on a virtual clock).
        tries = []
        for n in range(1, STREAM_TRIES + 1):
            tries.append(shown_while_streaming(page, f"{ENGLISH} ({n} of {STREAM_TRIES})"))
            if len(tries[-1].deltas) > 1:
                break
        assert len(tries[-1].deltas) > 1, f"each translation came in one delta: {tries}"


# Random weights: an output may clean down to a few characters, sent in one delta; a few texts
# are tried until one comes in several.
STREAM_TRIES = 5


def translate_until_output(page: Any) -> str:
    """Translates a few texts until one's (random-weight) translation is not empty."""
    for n in range(1, 6):
        page.fill("#text", f"{ENGLISH} ({n})")
        page.keyboard.press("Control+Enter")
        if translation := wait_translated(page):
            return translation
    raise AssertionError("every translation was empty")


@dataclass
class Streamed:
    """A translation streamed to the page: the text of its delta events (in order), what
    #output showed after each event, and the final translation."""

    deltas: list[str]
    shown: list[str]
    final: str


def shown_while_streaming(page: Any, text: str) -> Streamed:
    """Translates ``text`` with its stream handed to the page event by event
    (``EVENT_BY_EVENT``, installed by the caller), and checks that the stream was start,
    deltas, done and that #output showed the text so far after each delta, then the done
    event's translation."""
    page.evaluate(WATCH_OUTPUT)
    page.fill("#text", text)
    page.keyboard.press("Control+Enter")
    final = wait_translated(page)
    events = [sse_event(block) for block in page.evaluate("() => window.__events.at(-1)")]
    names = [name for name, _ in events]
    assert names[0] == "start", names
    assert names[-1] == "done", names
    assert set(names[1:-1]) <= {"delta"}, names
    assert final == events[-1][1]["translation"]
    texts = [data["text"] for name, data in events if name == "delta"]
    shown = [s for s in page.evaluate("() => window.__shown") if s]
    streamed = Streamed([t for t in texts if t], shown, final)
    # The page shows each delta as it comes (one mutation per event read, the text so far),
    # then the done event's translation: a page that showed only the final text fails here.
    so_far = [s for s in accumulate(texts) if s]
    assert shown == so_far + ([final] if final else []), streamed
    return streamed


def sse_event(block: str) -> tuple[str, dict[str, Any]]:
    """One server-sent event of the stream (``event: NAME``, one ``data:`` line of JSON)."""
    name, data = block.strip().split("\n")
    assert name.startswith("event: "), block
    assert data.startswith("data: "), block
    return name[len("event: ") :], json.loads(data[len("data: ") :])


def test_pickers_search_swap_and_recent_pairs(browser: Any, url: str) -> None:
    with new_page(browser, key=API_KEY) as (page, traffic):
        ready(page, url)
        page.select_option("#source", "en")
        page.fill("#target-filter", "fren")
        assert page.input_value("#target") == "fr"
        page.fill("#text", ENGLISH)
        page.keyboard.press("Control+Enter")
        translation = wait_translated(page)
        assert traffic.streams[-1]["target_lang"] == "fr"
        page.click("#swap")
        assert (page.input_value("#source"), page.input_value("#target")) == ("fr", "en")
        # The translation becomes the text (random weights may translate to nothing: kept).
        assert page.input_value("#text") == (translation or ENGLISH)
        wait_translated(page)
        assert (traffic.streams[-1]["source_lang"], traffic.streams[-1]["target_lang"]) == (
            "fr",
            "en",
        )
        recent = page.locator("#recent button").all_text_contents()
        assert recent[:2] == ["French → English", "English → French"]
        page.reload()
        wait_enabled(page, traffic)
        assert (page.input_value("#source"), page.input_value("#target")) == ("fr", "en")


def test_errors_are_shown_in_words(browser: Any, url: str) -> None:
    with new_page(browser, key=API_KEY) as (page, _):
        ready(page, url)
        message = page.locator("#message")
        page.fill("#text", "x " * (MAX_TEXT_CHARS // 2 + 1))
        assert "over" in (page.get_attribute("#counter", "class") or "")
        page.keyboard.press("Control+Enter")
        message.wait_for(state="visible", timeout=30_000)
        assert message.text_content().startswith("Text too long")
        page.select_option("#source", "auto")
        page.select_option("#target", "en")
        page.fill("#text", ENGLISH)
        page.keyboard.press("Control+Enter")
        page.wait_for_function(
            "() => document.getElementById('message').textContent"
            ".startsWith('Unsupported language pair')",
            timeout=60_000,
        )


def test_overload_is_retried_after_retry_after(browser: Any, url: str) -> None:
    """Ray's proxy answers 503 with Retry-After when replicas are full; one such answer is
    injected here (a real one needs a saturated replica), the retry goes to the service."""
    with new_page(browser, key=API_KEY) as (page, traffic):
        refused: list[str] = []

        def overloaded_once(route: Any) -> None:
            if refused:
                route.continue_()
                return
            refused.append(route.request.url)
            body = {"error": {"code": "overloaded", "message": "Too many requests in flight."}}
            route.fulfill(status=503, headers={"Retry-After": "2"}, json=body)

        page.route("**/translate/stream", overloaded_once)
        ready(page, url)
        page.fill("#text", ENGLISH)
        page.keyboard.press("Control+Enter")
        page.wait_for_function(
            "() => document.getElementById('message').textContent.includes('retrying in 2 s')"
        )
        assert "overloaded" in (page.text_content("#message") or "")
        wait_translated(page)
        assert page.locator("#message").is_hidden()
        assert len(refused) == 1
        assert len(traffic.streams) == 2


def test_keyboard_clear_copy_and_focus_order(browser: Any, url: str) -> None:
    with new_page(browser, key=API_KEY, permissions=["clipboard-read", "clipboard-write"]) as (
        page,
        _,
    ):
        ready(page, url)
        order = []
        for _ in range(16):
            page.keyboard.press("Tab")
            order.append(
                page.evaluate("() => document.activeElement.id || document.activeElement.tagName")
            )
        expected = ["key-button", "A", "tab-text", "source-filter", "source", "swap"]
        assert order[: len(expected)] == expected, order
        assert order.index("text") < order.index("clear") < order.index("translate"), order
        translation = translate_until_output(page)
        page.click("#copy")
        assert page.evaluate("() => navigator.clipboard.readText()") == translation
        page.focus("#text")
        page.keyboard.press("Escape")
        assert page.input_value("#text") == ""
        assert page.text_content("#output") == ""
        assert page.evaluate("() => document.activeElement.id") == "text"


def test_controls_follow_the_servers_capabilities(browser: Any, url: str) -> None:
    """The page's side of /ui/config: options and the format picker appear only when the
    server lists them, and what is picked is sent. (The config is rewritten in the browser:
    the demo's family supports every option and the API has no `format` yet.)"""
    with new_page(browser, key=API_KEY) as (page, traffic):

        def rewritten(route: Any) -> None:
            config = route.fetch().json()
            config.update(options=[], formats=["text", "html", "markdown"], usage=True)
            route.fulfill(json=config)

        page.route("**/ui/config", rewritten)
        page.route(
            "**/usage", lambda r: r.fulfill(json={"character_count": 10, "character_limit": 1000})
        )
        page.route("**/translate/stream", lambda r: r.abort())
        ready(page, url)
        assert page.is_hidden("#options")
        assert page.locator("#format option").all_text_contents() == [
            "Plain text",
            "HTML",
            "Markdown",
        ]
        assert page.text_content("#usage") == "Quota: 990 characters left of 1,000"
        page.select_option("#format", "markdown")
        page.fill("#text", "# Title")
        page.keyboard.press("Control+Enter")
        page.wait_for_selector("#message:not([hidden])")
        assert traffic.streams[-1]["format"] == "markdown"
        assert "Cannot reach the translation service" in (page.text_content("#message") or "")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(("device", "options"), [("desktop", {}), ("phone", PHONE)])
def test_accessible_in_both_themes_and_sizes_with_screenshots(
    browser: Any, url: str, scheme: str, device: str, options: dict[str, Any]
) -> None:
    with new_page(browser, key=API_KEY, color_scheme=scheme, **options) as (page, _):
        ready(page, url)
        page.fill("#text", ENGLISH)
        page.keyboard.press("Control+Enter")
        wait_translated(page)
        assert serious_violations(page) == []
        page.click("#options summary")
        assert serious_violations(page) == []
        page.click("#options summary")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SHOTS / f"{device}-{scheme}.png", full_page=device == "phone")
        page.click("#key-button")
        assert serious_violations(page) == []


def test_files_tab_translates_a_document_and_downloads_it(browser: Any, url: str) -> None:
    with new_page(browser, key=API_KEY) as (page, _):
        ready(page, url)
        page.select_option("#source", "en")
        page.select_option("#target", "de")
        page.click("#tab-files")
        assert page.is_hidden("#text-panel")
        assert ".docx" in (page.text_content("#file-hint") or "")
        page.set_input_files(
            "#file-input",
            files=[{"name": "note.txt", "mimeType": "text/plain",
                    "buffer": b"Good morning.\n\nThe weather is lovely today.\n"}],
        )  # fmt: skip
        job = page.locator("#jobs li").first
        job.locator("button", has_text="Download").wait_for(timeout=180_000)
        assert job.locator(".job-status").text_content() == "Done"
        assert job.locator("progress").evaluate("p => p.value") == 1
        assert serious_violations(page) == []
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SHOTS / "files-desktop-light.png")
        with page.expect_download() as download:
            job.locator("button", has_text="Download").click()
        assert download.value.suggested_filename == "note.txt"
        assert Path(download.value.path()).read_bytes().count(b"\n\n") >= 1  # two paragraphs
        page.click("#tab-text")
        assert page.is_visible("#text-panel")


def test_stored_glossary_is_saved_picked_and_sent(browser: Any, url: str) -> None:
    with new_page(browser, key=API_KEY) as (page, traffic):
        ready(page, url)
        page.click("#options summary")
        assert page.is_disabled("#stored-glossary")  # "Detect language": no pair yet
        assert "source language" in (page.text_content("#stored-hint") or "")
        page.select_option("#source", "en")
        page.select_option("#target", "de")
        page.fill("#glossary", "cart = Warenkorb\ncheckout = Kasse")
        page.fill("#glossary-name", "shop terms")
        page.click("#save-glossary")
        page.wait_for_function("() => document.getElementById('stored-glossary').value !== ''")
        picked = page.input_value("#stored-glossary")
        assert page.locator("#stored-glossary option:checked").text_content() == (
            "shop terms (2 terms)"
        )
        assert page.input_value("#glossary") == ""
        page.fill("#text", "Your cart is ready for checkout.")
        page.keyboard.press("Control+Enter")
        wait_translated(page)
        assert traffic.streams[-1]["glossary_id"] == picked
        assert "glossary" not in traffic.streams[-1]
        assert page.locator("#message").is_hidden()
        page.select_option("#target", "fr")  # no glossary of the key for en->fr
        assert page.locator("#stored-glossary option").count() == 1
        page.select_option("#target", "de")  # back: the picked one again
        assert page.input_value("#stored-glossary") == picked
        assert serious_violations(page) == []
        # Documents use it too: the Files tab shows the picker (not the text's options).
        page.click("#tab-files")
        assert page.is_visible("#stored-glossary")
        assert page.is_hidden("#glossary")
        assert page.is_hidden("#save-glossary")
        upload = "/documents"
        with page.expect_response(lambda r: r.url.endswith(upload)) as created:
            page.set_input_files(
                "#file-input",
                files=[{"name": "cart.txt", "mimeType": "text/plain", "buffer": b"Your cart.\n"}],
            )
        assert created.value.json()["glossary_id"] == picked  # the job keeps the glossary
        job = page.locator("#jobs li").first
        job.locator("button", has_text="Download").wait_for(timeout=180_000)
        assert job.locator(".job-status").text_content() == "Done"
