"""Helpers of the browser test (tests/e2e/test_web_page.py): Debian's chromium driven by
Playwright, the demo config with API keys on, axe-core, and what the page sent."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from serve_app.tools.launcher import write_demo_config
from tests.conftest import ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
API_KEY = "web-key-1"
KEYS_ENV = {"TRANSLATOR_API_KEYS": f"{API_KEY},web-key-2"}
MAX_TEXT_CHARS = 400
DESKTOP = {"viewport": {"width": 1280, "height": 860}}
PHONE = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 2,
    "is_mobile": True,
    "has_touch": True,
}
AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
# Records what #output showed, mutation by mutation (the stream arriving in pieces).
WATCH_OUTPUT = """() => {
  window.__shown = [];
  if (window.__watching) return;
  window.__watching = true;
  const output = document.getElementById("output");
  new MutationObserver(() => window.__shown.push(output.textContent))
    .observe(output, {childList: true, characterData: true, subtree: true});
}"""
# The page's /translate/stream bodies handed to it one server-sent event per read, each
# event kept in window.__events (a list per stream). The bytes are the server's, in its order;
# only the network's grouping is undone. How the network groups them is timing: with the
# random model's ~30 tokens a stream lasts ~0.1-0.2 s, and a loaded machine that leaves the
# browser's processes no turn for that long hands the page the whole stream in one read, which
# the page rightly shows at once. Read event by event, what #output shows after each event is
# the page's doing alone. (An init script: the page's CSP does not apply to it.)
EVENT_BY_EVENT = """(() => {
  window.__events = [];
  const fetched = window.fetch;
  window.fetch = async (...args) => {
    const response = await fetched(...args);
    if (!String(args[0]).endsWith("/translate/stream") || !response.ok || !response.body) {
      return response;
    }
    const events = [];
    window.__events.push(events);
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    let buffer = "";
    const oneByOne = new TransformStream({
      transform(chunk, controller) {
        buffer += decoder.decode(chunk, {stream: true});
        let end;
        while ((end = buffer.indexOf("\\n\\n")) >= 0) {
          const block = buffer.slice(0, end + 2);
          buffer = buffer.slice(end + 2);
          events.push(block);
          controller.enqueue(encoder.encode(block));
        }
      },
      flush(controller) {
        if (buffer) controller.enqueue(encoder.encode(buffer));
      },
    });
    const {status, statusText, headers} = response;
    return new Response(response.body.pipeThrough(oneByOne), {status, statusText, headers});
  };
})();"""


def keyed_demo_config(workdir: Path, port: int) -> dict[str, Any]:
    """`./serve.sh --demo`'s config (the tiny model) on ``port``, one replica, keys on and a
    small text limit (so "text too long" is quick to reach)."""
    demo = write_demo_config(workdir / "demo.yaml", ROOT / "serve_config.cpu.yaml")
    config = yaml.safe_load(demo.read_text())
    config["http_options"]["port"] = port
    app = config["applications"][0]
    app["args"]["security"] = {"api_keys_env": "TRANSLATOR_API_KEYS"}
    app["args"]["limits"]["max_text_chars"] = MAX_TEXT_CHARS
    app["runtime_env"]["env_vars"].update(KEYS_ENV)
    app["deployments"][0]["num_replicas"] = 1
    # The store (stored glossaries) and documents (the Files tab); short outputs keep the
    # random model's document quick.
    app["args"]["store"] = {"url": f"sqlite:///{workdir}/store.db"}
    app["args"]["documents"] = {"poll_interval_s": 0.2}
    app["args"]["limits"].update(output_tokens_ratio=0.5, output_tokens_margin=4)
    return dict(config)


def axe_source() -> str:
    source = AXE.read_text(encoding="utf-8")
    assert hashlib.sha256(source.encode()).hexdigest() == AXE_SHA256, "vendored axe-core changed"
    return source


def serious_violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical findings on the page as it is now (WCAG 2.x A/AA
    rules and best practices)."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(axe_source())  # through the debugger: the page's CSP does not apply
    result = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]]}
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


@dataclass
class Traffic:
    """What the page asked for: every URL, and the bodies of its translation requests."""

    urls: list[str] = field(default_factory=list)
    streams: list[dict[str, Any]] = field(default_factory=list)
    asset_bytes: dict[str, int] = field(default_factory=dict)
    statuses: list[str] = field(default_factory=list)

    def watch(self, page: Any) -> None:
        page.on("request", self._request)
        page.on("response", self._response)

    def _request(self, request: Any) -> None:
        self.urls.append(request.url)
        if request.url.endswith("/translate/stream"):
            self.streams.append(json.loads(request.post_data or "{}"))

    def _response(self, response: Any) -> None:
        self.statuses.append(f"{response.status} {response.request.method} {response.url}")
        if response.request.resource_type in ("document", "script", "stylesheet", "image", "font"):
            try:
                self.asset_bytes[response.url] = len(response.body())
            except Exception:  # a 304 or a redirect has no body to count
                self.asset_bytes.setdefault(response.url, 0)


@contextmanager
def new_page(browser: Any, key: str | None, **options: Any) -> Iterator[tuple[Any, Traffic]]:
    """A fresh browser context (empty storage and cache) and page; with ``key``, the page
    finds it stored, as after a user entered it once."""
    context = browser.new_context(**{**DESKTOP, **options})
    if key is not None:
        context.add_init_script(f"localStorage.setItem('mt.key', {json.dumps(json.dumps(key))})")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    traffic = Traffic()
    traffic.watch(page)
    try:
        yield page, traffic
        assert not errors, errors
    finally:
        context.close()


def ready(page: Any, url: str) -> None:
    """Opens the page and waits until it has its config and languages."""
    page.goto(url)
    wait_enabled(page)


def wait_enabled(page: Any, traffic: Traffic | None = None, timeout_ms: int = 90_000) -> None:
    """Waits until the page has its config and languages (the Translate button enabled);
    on a timeout, says what the page showed and what it was answered."""
    try:
        page.wait_for_selector("#translate:not([disabled])", timeout=timeout_ms)
    except Exception as exc:
        shown = {i: page.text_content(f"#{i}") for i in ("message", "key-error")}
        answers = traffic.statuses[-12:] if traffic else "not recorded"
        raise AssertionError(f"the page never became ready: {shown}; answers: {answers}") from exc


def wait_translated(page: Any, timeout_ms: int = 120_000) -> str:
    """Waits for the current translation to end; its text."""
    page.wait_for_function(
        "() => document.getElementById('output').getAttribute('aria-busy') === 'false' "
        "&& document.getElementById('meta').textContent !== ''",
        timeout=timeout_ms,
    )
    return str(page.text_content("#output"))
