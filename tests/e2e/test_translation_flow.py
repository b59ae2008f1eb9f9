"""The translation flow end to end (serve run, Ray's proxy, real vLLM on the CPU, tiny model):
auto-detection, per-item batch errors, long-text splitting, cache, glossary/context/formality,
SSE streaming, and the DeepL / LibreTranslate endpoints driven by their own client libraries.
The tiny model's output is nonsense: only structure, counts and statuses are asserted."""

from __future__ import annotations

import json
import urllib.error
import uuid
from typing import Any

import httpx
import pytest

ITEM = {"text": "Good evening, dear friends.", "source_lang": "en", "target_lang": "de"}
TIMEOUT = 180


def test_source_is_detected(served: str) -> None:
    item = {"text": "Das Wetter ist heute wirklich wunderbar.", "target_lang": "en"}
    r = httpx.post(f"{served}/translate", json=item, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["source_lang"], body["detected_source_lang"]) == ("de", "de")
    assert 0.5 < body["detection_confidence"] <= 1


def test_batch_item_errors_leave_the_rest_translated(served: str) -> None:
    items = [
        ITEM,
        {**ITEM, "target_lang": "qq"},
        {**ITEM, "text": " "},
        {"text": "Bonjour tout le monde, comment allez-vous ?", "target_lang": "de"},
    ]
    r = httpx.post(f"{served}/translate/batch", json={"items": items}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    body = r.json()
    results = body["results"]
    assert body["failed"] == 2
    assert [results[i]["error"]["code"] for i in (1, 2)] == [
        "unsupported_language",
        "invalid_request",
    ]
    assert results[0]["target_lang"] == "de"
    assert "translation" in results[0]
    assert results[3]["detected_source_lang"] == "fr"


def test_long_text_is_split_and_reassembled(served: str) -> None:
    # About 900 tokens of the tiny model over limits.max_input_tokens = 512.
    sentence = "the quick brown fox jumps over a lazy dog while hello world says good morning."
    paragraphs = [" ".join([sentence] * 6) for _ in range(8)]
    text = "  " + "\n\n".join(paragraphs) + "\n"
    r = httpx.post(
        f"{served}/translate", json={**ITEM, "text": text, "cache": False}, timeout=TIMEOUT
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["segments"] >= 2
    translation = body["translation"]
    assert translation.startswith("  ")
    assert translation.endswith("\n")
    assert translation.count("\n\n") >= body["segments"] - 1
    assert body["usage"]["input_tokens"] > 0
    assert body["usage"]["output_tokens"] > 0
    assert isinstance(body["truncated"], bool)


def _cache_round(served: str, item: dict[str, str]) -> tuple[dict[str, int], int]:
    """Eight requests of one text: a hit exactly when the replica answering has kept a
    complete answer to it (each replica has its own cache; an answer cut at its token limit
    or empty is never kept). The hits per replica, and how many answers were complete."""
    stored: set[str] = set()
    hits: dict[str, int] = {}
    complete = 0
    for _ in range(8):
        r = httpx.post(f"{served}/translate", json=item, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        body, replica = r.json(), r.headers["x-replica"]
        assert body["cached"] == (replica in stored), body
        if body["cached"]:
            assert body["usage"] == {"input_tokens": 0, "output_tokens": 0}
            hits[replica] = hits.get(replica, 0) + 1
        elif not body["truncated"] and body["translation"].strip():
            stored.add(replica)
            complete += 1
    return hits, complete


def test_cache_keeps_complete_answers_only_and_hits_cost_no_engine_tokens(served: str) -> None:
    # Random weights seldom end an output before its token limit: most answers are cut
    # (truncated), and those must not be kept; a complete one is served again from the cache.
    item = {**ITEM, "text": f"Cache check {uuid.uuid4().hex[:8]}"}
    hits, complete = _cache_round(served, item)
    assert complete or not hits, (hits, complete)
    bypass = httpx.post(f"{served}/translate", json={**item, "cache": False}, timeout=TIMEOUT)
    assert bypass.json()["cached"] is False
    if not hits:
        return  # every answer was cut: none kept, none served from the cache (checked above)
    # GET /cache describes the replica that answers it: ask until one that served hits here.
    for _ in range(20):
        r = httpx.get(f"{served}/cache")
        if hits.get(replica := r.headers["x-replica"]):
            break
    stats = r.json()
    assert stats["enabled"]
    assert stats["hits"] >= hits[replica]
    assert stats["entries"] >= 1


def test_glossary_context_and_formality(served: str) -> None:
    item = {
        **ITEM,
        "glossary": [{"source": "world", "target": "Welt"}],
        "context": "A friendly greeting.",
        "formality": "formal",
    }
    r = httpx.post(f"{served}/translate", json=item, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["input_tokens"] > 0


def _events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    events, name = [], None
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[len("data: ") :])))
    return events


def _stream(served: str, text: str) -> list[tuple[str, dict[str, Any]]]:
    body = {**ITEM, "text": text, "cache": False}
    with httpx.stream("POST", f"{served}/translate/stream", json=body, timeout=TIMEOUT) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        return _events(r)


def test_stream_delivers_tokens_as_they_are_generated(served: str) -> None:
    """Deltas add up to the final (cleaned) translation, and outputs come in several deltas.
    The random-weight model's outputs are short and random (some clean to a few characters,
    sent at once), so a few texts are tried until one shows it."""
    for n in range(8):
        text = f"Good morning {n}, the weather is fine today and we walk down to the sea."
        events = _stream(served, text)
        names = [name for name, _ in events]
        assert names[0] == "start", names
        assert names[-1] == "done", names
        done = events[-1][1]
        assert done["usage"]["output_tokens"] > 1
        deltas = [d["text"] for name, d in events if name == "delta"]
        assert "".join(deltas) == done["translation"]  # cleaned as it streamed
        if len(deltas) > 1:
            return
    pytest.fail("none of 8 translations came in more than one delta")


def test_stream_error_midway_is_an_error_event(served: str) -> None:
    text = " ".join(["the quick brown fox jumps over a lazy dog"] * 40)
    body = {**ITEM, "text": text, "timeout_s": 0.5, "cache": False}
    with httpx.stream("POST", f"{served}/translate/stream", json=body, timeout=TIMEOUT) as r:
        assert r.status_code == 200
        events = _events(r)
    assert events[0][0] == "start"
    assert events[-1] == (
        "error",
        {"error": {"code": "deadline_exceeded", "message": events[-1][1]["error"]["message"]}},
    )


# -- drop-in compatibility, through the clients people use ------------------------------------


@pytest.fixture
def deepl_client(served: str):
    import deepl

    return deepl.DeepLClient("any-key", server_url=served)


def test_deepl_client_translates(deepl_client) -> None:
    one = deepl_client.translate_text("Hello world", target_lang="DE", source_lang="EN")
    assert isinstance(one.text, str)
    assert one.detected_source_lang == "EN"
    assert one.billed_characters == len("Hello world")
    many = deepl_client.translate_text(
        ["Bonjour tout le monde, comment allez-vous ?", "Buenos días, ¿cómo estás hoy, amigo mío?"],
        target_lang="PT-BR",
    )
    assert [r.detected_source_lang for r in many] == ["FR", "ES"]
    formal = deepl_client.translate_text(
        "Hello", target_lang="EN-GB", source_lang="DE", formality="more", context="A letter."
    )
    assert isinstance(formal.text, str)


def test_deepl_client_languages_usage_and_errors(deepl_client) -> None:
    import deepl

    sources = {lang.code for lang in deepl_client.get_source_languages()}
    targets = {lang.code: lang for lang in deepl_client.get_target_languages()}
    assert {"EN", "DE", "ZH"} <= sources
    assert {"EN-US", "PT-BR", "ZH-HANS"} <= set(targets)
    assert targets["DE"].supports_formality is True
    usage = deepl_client.get_usage()
    assert usage.character.valid
    assert usage.character.count >= len("Hello world")
    assert not usage.any_limit_reached
    with pytest.raises(deepl.DeepLException, match="not supported"):
        deepl_client.translate_text("Hello", target_lang="XX")
    with pytest.raises(deepl.DeepLException):
        deepl_client.translate_text(
            "Hello", target_lang="DE", source_lang="EN", glossary="some-glossary-id"
        )


def test_deepl_without_auth_is_403(served: str) -> None:
    r = httpx.post(f"{served}/v2/translate", json={"text": ["Hi"], "target_lang": "DE"})
    assert r.status_code == 403
    assert set(r.json()) == {"message"}


def test_libretranslate_client(served: str) -> None:
    from libretranslatepy import LibreTranslateAPI

    lt = LibreTranslateAPI(f"{served}/libretranslate", api_key="unused")
    assert isinstance(lt.translate("Hello world", "en", "de"), str)
    assert isinstance(lt.translate("Das ist ein schöner Tag.", "auto", "en"), str)
    detected = lt.detect("Bonjour tout le monde, comment allez-vous ?")
    assert detected[0]["language"] == "fr"
    assert 0 < detected[0]["confidence"] <= 100
    languages = {x["code"]: x for x in lt.languages()}
    assert "de" in languages["en"]["targets"]
    with pytest.raises(urllib.error.HTTPError) as error:
        lt.translate("Hello", "en", "qq")
    assert error.value.code == 400
    assert set(json.loads(error.value.read())) == {"error"}


def test_libretranslate_batch_and_detected_language(served: str) -> None:
    body = {
        "q": ["Das ist wirklich ein sehr guter Tag.", "C'est vraiment une très belle journée."],
        "source": "auto",
        "target": "en",
    }
    r = httpx.post(f"{served}/libretranslate/translate", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    out = r.json()
    assert len(out["translatedText"]) == 2
    assert [d["language"] for d in out["detectedLanguage"]] == ["de", "fr"]
