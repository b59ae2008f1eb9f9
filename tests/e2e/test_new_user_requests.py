"""A new user's first mistake, through ``serve run`` (HAProxy, a replica, the real engine):
a JSON body sent without ``Content-Type: application/json`` (found 2026-12-06; each test
fails on the code before). The README's ``curl`` without its ``-H`` sends
``application/x-www-form-urlencoded``; ``requests.post(url, data=json.dumps(...))`` sends no
``Content-Type``. The JSON routes answered "body: Input should be a valid dictionary or
object to extract fields from", DeepL's and LibreTranslate's that the text was not
specified; each now says what to send, in its API's shape, and the right request is served
at once after."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import requests

TIMEOUT = 300
TEXT = {"text": "Hello, world!", "source_lang": "en", "target_lang": "de"}
# path, body, extra headers, status, where the API puts its message
ROUTES: list[tuple[str, dict[str, Any], dict[str, str], int, str]] = [
    ("/translate", TEXT, {}, 422, "native"),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8},
        {},
        400,
        "native",
    ),
    (
        "/v2/translate",
        {"text": ["Hello"], "target_lang": "DE"},
        {"Authorization": "DeepL-Auth-Key k"},
        400,
        "deepl",
    ),
    ("/libretranslate/translate", {"q": "Hello", "source": "en", "target": "de"}, {}, 400, "libre"),
]


def message_of(payload: dict[str, Any], api: str) -> str:
    if api == "deepl":
        return str(payload["message"])
    if api == "libre":
        return str(payload["error"])
    return str(payload["error"]["message"])


def curl(url: str, body: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """``curl -s URL -d BODY`` as the README's example without ``-H 'Content-Type: ...'``."""
    args = ["curl", "-s", "-w", "\n%{http_code}", url, "-d", body]
    for name, value in headers.items():
        args += ["-H", f"{name}: {value}"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, check=True)
    text, _, status = out.stdout.rpartition("\n")
    return int(status), json.loads(text)


@pytest.mark.parametrize(("path", "body", "headers", "status", "api"), ROUTES)
def test_curl_without_its_content_type_is_told_what_to_send(
    served: str, path: str, body: dict[str, Any], headers: dict[str, str], status: int, api: str
) -> None:
    code, payload = curl(f"{served}{path}", json.dumps(body), headers)
    assert code == status, payload
    assert "Content-Type: application/json" in message_of(payload, api), payload
    code, payload = curl(
        f"{served}{path}", json.dumps(body), headers | {"Content-Type": "application/json"}
    )
    assert code == 200, payload


@pytest.mark.parametrize(("path", "body", "headers", "status", "api"), ROUTES)
def test_requests_data_without_a_content_type_is_told_what_to_send(
    served: str, path: str, body: dict[str, Any], headers: dict[str, str], status: int, api: str
) -> None:
    r = requests.post(f"{served}{path}", data=json.dumps(body), headers=headers, timeout=TIMEOUT)
    assert "content-type" not in {k.lower() for k in r.request.headers}
    assert r.status_code == status, r.text
    message = message_of(r.json(), api)
    assert "Content-Type: application/json" in message, message
    assert "it came without a Content-Type" in message, message
