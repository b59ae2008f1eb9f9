"""A body not declared as JSON, sent to a route that takes a JSON body model (found
2026-12-06, the first mistake of a new user): ``curl -d '{...}'`` without ``-H`` sends
``application/x-www-form-urlencoded``, ``requests.post(url, data=json.dumps(...))`` no
``Content-Type``. FastAPI 0.136 reads neither as JSON, and the answer was "Invalid request:
body: Input should be a valid dictionary or object to extract fields from", which does not
say what to send. It says so now, with the status it had (422 native, 400 OpenAI); DeepL's
and LibreTranslate's routes answered such bodies "Parameter 'text' not specified"."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.fakes import FakeEngine

TEXT = {"text": "Hello", "source_lang": "en", "target_lang": "de"}
CHAT = {"messages": [{"role": "user", "content": "Hello"}]}
ROUTES = [
    ("/translate", TEXT, 422),
    ("/translate/stream", TEXT, 422),
    ("/translate/batch", {"items": [TEXT]}, 422),
    ("/v1/chat/completions", CHAT, 400),
    ("/v1/responses", {"input": "Hello"}, 400),
]
WORDS = "the body must be JSON, sent with 'Content-Type: application/json'"


def message(r: httpx.Response) -> str:
    return str(r.json()["error"]["message"])


@pytest.mark.parametrize(("path", "body", "status"), ROUTES)
@pytest.mark.parametrize(
    ("content_type", "came"),
    [
        (None, "it came without a Content-Type"),
        ("application/x-www-form-urlencoded", "it came as 'application/x-www-form-urlencoded'"),
        ("text/plain;charset=UTF-8", "it came as 'text/plain'"),
    ],
    ids=["none", "curl-d", "fetch-string"],
)
async def test_a_body_not_declared_as_json_is_told_what_to_send(
    client: httpx.AsyncClient,
    engine: FakeEngine,
    path: str,
    body: dict,
    status: int,
    content_type: str | None,
    came: str,
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    r = await client.post(path, content=json.dumps(body), headers=headers)
    assert r.status_code == status, r.text
    assert message(r) == f"Invalid request: {WORDS} ({came}).", r.text
    assert engine.requests == []


@pytest.mark.parametrize(("path", "body", "status"), ROUTES)
@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON"]
)
async def test_a_body_declared_as_json_is_served(
    client: httpx.AsyncClient, path: str, body: dict, status: int, content_type: str
) -> None:
    r = await client.post(path, content=json.dumps(body), headers={"content-type": content_type})
    assert r.status_code == 200, r.text


DEEPL = {"Authorization": "DeepL-Auth-Key k"}
COMPAT = [
    ("/v2/translate", {"text": ["Hello"], "target_lang": "DE"}, DEEPL),
    ("/libretranslate/translate", {"q": "Hello", "source": "en", "target": "de"}, {}),
]


@pytest.mark.parametrize(("path", "body", "headers"), COMPAT)
async def test_compat_routes_name_what_they_read(
    client: httpx.AsyncClient, engine: FakeEngine, path: str, body: dict, headers: dict
) -> None:
    """DeepL's and LibreTranslate's routes read their parameters themselves: a body of no
    type they read was ignored, and JSON sent as a form read as one field named by the
    whole object; both answered that the text was not specified ("Parameter 'text' not
    specified.", "missing q parameter")."""
    raw = json.dumps(body)
    r = await client.post(path, content=raw, headers=headers)
    assert r.status_code == 400, r.text
    assert "(it came without a Content-Type)" in r.text, r.text
    r = await client.post(path, content=raw, headers=headers | {"content-type": "text/plain"})
    assert "send the parameters as JSON" in r.text, r.text
    form = headers | {"content-type": "application/x-www-form-urlencoded"}
    r = await client.post(path, content=raw, headers=form)
    assert r.status_code == 400, r.text
    assert "the body is JSON sent as a form" in r.text, r.text
    assert engine.requests == []
    assert (await client.post(path, json=body, headers=headers)).status_code == 200
    assert (await client.post(path, data=body, headers=headers)).status_code == 200


async def test_requests_without_a_body_need_no_content_type(client: httpx.AsyncClient) -> None:
    assert (await client.get("/languages")).status_code == 200
    r = await client.post("/v2/languages", headers=DEEPL | {"content-type": "text/plain"})
    assert r.status_code == 200, r.text
    assert (await client.get("/translate")).status_code == 405
