"""The requests the named clients really send, replayed through the real stack (serve run,
Ray's proxy, vLLM on CPU, the tiny random-weight model), as their source writes them:

- Mastodon's DeepL provider (``app/lib/translation_service/deepl.rb``): a form posted with
  http.rb, whose encoder writes arrays Rack-style (``text[]=...``) and a nil ``source_lang``
  as a bare key, ``tag_handling=html``; ``GET /v2/languages?type=source|target``.
- Mastodon's LibreTranslate provider (``libre_translate.rb``): JSON ``q`` (a list of HTML
  statuses), ``source`` ``auto``, ``format`` ``html``, ``api_key``; ``GET /languages``.
- Weblate's DeepL machinery (``weblate/machinery/deepl.py``): JSON with ``formality``,
  ``tag_handling: xml``, ``ignore_tags: ["x"]`` and, with "next gen" on,
  ``model_type: prefer_quality_optimized``; its LibreTranslate machinery: a form.
- deepl-python (``split_sentences``, ``preserve_formatting``, ``model_type``, usage) and
  libretranslatepy; LibreTranslate's ``alternatives`` and ``/frontend/settings``.
"""

from __future__ import annotations

import re

import httpx

TIMEOUT = 300
AUTH = {"Authorization": "DeepL-Auth-Key any-key"}
STATUS = (
    '<p>Good <em>morning</em>, <a href="https://ex.example/@ann">@ann</a>! The weather is '
    "lovely today and we are going to the market with our friends.</p>"
)
_TAG = re.compile(r"<[^>]+>")


def test_mastodon_deepl_provider(served: str) -> None:
    form = httpx.QueryParams([("text[]", STATUS), ("text[]", "<p>Hello world</p>")])
    body = str(form) + "&source_lang&target_lang=de&tag_handling=html"
    headers = AUTH | {"content-type": "application/x-www-form-urlencoded"}
    r = httpx.post(f"{served}/v2/translate", content=body, headers=headers, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    first, second = r.json()["translations"]
    assert _TAG.findall(first["text"]) == _TAG.findall(STATUS)
    assert _TAG.findall(second["text"]) == ["<p>", "</p>"]
    assert re.fullmatch(r"[A-Z]{2}", first["detected_source_language"])
    for kind in ("source", "target"):
        r = httpx.get(f"{served}/v2/languages?type={kind}", headers=AUTH, timeout=TIMEOUT)
        assert r.status_code == 200
        assert {"language", "name"} <= set(r.json()[0])


def test_mastodon_libretranslate_provider(served: str) -> None:
    body = {
        "q": [STATUS, "<p>See you tomorrow at the station, we will take the early train.</p>"],
        "source": "auto",
        "target": "de",
        "format": "html",
        "api_key": "",
    }
    r = httpx.post(f"{served}/libretranslate/translate", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    out = r.json()
    assert len(out["translatedText"]) == 2
    assert _TAG.findall(out["translatedText"][0]) == _TAG.findall(STATUS)
    detected = out["detectedLanguage"]  # one per status, as Mastodon reads them
    assert len(detected) == 2
    assert all(0 <= d["confidence"] <= 100 and d["language"] for d in detected)
    r = httpx.get(f"{served}/libretranslate/languages", timeout=TIMEOUT)
    assert any(lang["code"] == "de" for lang in r.json())


def test_weblate_deepl_machinery(served: str) -> None:
    params = {
        "text": ['Hello <x id="0"></x>, you have <x id="7"></x> new messages'],
        "source_lang": "EN",
        "target_lang": "DE",
        "formality": "default",
        "tag_handling": "xml",
        "ignore_tags": ["x"],
        "model_type": "prefer_quality_optimized",
    }
    r = httpx.post(f"{served}/v2/translate", json=params, headers=AUTH, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    (entry,) = r.json()["translations"]
    assert entry["text"].count('<x id="0"></x>') == 1
    assert entry["text"].count('<x id="7"></x>') == 1
    assert entry["model_type_used"] == "quality_optimized"
    r = httpx.get(
        f"{served}/v2/languages", params={"type": "target"}, headers=AUTH, timeout=TIMEOUT
    )
    assert any(lang["language"] == "DE" for lang in r.json())


def test_weblate_libretranslate_machinery(served: str) -> None:
    data = {"q": "Hello world", "source": "en", "target": "de"}
    r = httpx.post(f"{served}/libretranslate/translate", data=data, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert isinstance(r.json()["translatedText"], str)


def test_deepl_python_options_and_usage(served: str) -> None:
    import deepl

    client = deepl.DeepLClient("any-key", server_url=served)
    result = client.translate_text(
        "hello world",
        source_lang="EN",
        target_lang="DE",
        split_sentences="nonewlines",
        preserve_formatting=True,
        model_type="latency_optimized",
    )
    assert isinstance(result, deepl.TextResult)
    assert result.model_type_used == "quality_optimized"
    assert result.text[:1] == result.text[:1].lower() or not result.text[:1].isalpha()
    usage = client.get_usage()  # per replica without a store: the count may be either's
    assert usage.character is not None
    assert usage.character.limit == 10**12


def test_libretranslate_alternatives_are_other_translations(served: str) -> None:
    body = {"q": "Good morning, my friend", "source": "en", "target": "de", "alternatives": 3}
    r = httpx.post(f"{served}/libretranslate/translate", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    out = r.json()
    alternatives = out["alternatives"]
    assert 1 <= len(alternatives) <= 3
    assert out["translatedText"] not in alternatives
    assert len(set(alternatives)) == len(alternatives)
    body["alternatives"] = 9
    r = httpx.post(f"{served}/libretranslate/translate", json=body, timeout=TIMEOUT)
    assert r.status_code == 400
    assert "alternatives" in r.json()["error"]


def test_libretranslatepy_and_frontend_settings(served: str) -> None:
    from libretranslatepy import LibreTranslateAPI

    lt = LibreTranslateAPI(f"{served}/libretranslate/")
    assert isinstance(lt.translate("Good morning", "en", "de"), str)
    assert lt.detect("Guten Morgen, wie geht es dir?")[0]["language"] == "de"
    r = httpx.get(f"{served}/libretranslate/frontend/settings", timeout=TIMEOUT)
    assert r.status_code == 200
    settings = r.json()
    assert settings["language"]["source"]["code"] == "auto"
    assert settings["keyRequired"] is False
