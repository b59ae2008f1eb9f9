"""DeepL v2 and LibreTranslate endpoints over the fake engine: shapes, statuses, errors."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine
from tests.unit.translation.test_translation_flow import text_of

AUTH = {"Authorization": "DeepL-Auth-Key test-key"}


@pytest.fixture
def engine() -> FakeEngine:
    e = FakeEngine()
    e.reply = lambda prompt: text_of(prompt).upper()
    return e


async def client_for(engine: FakeEngine, **args) -> httpx.AsyncClient:
    config = AppConfig.model_validate({"prompt": {"family": "chat"}, **args})
    service = TranslationService(config, engine)
    await service.start()
    transport = httpx.ASGITransport(app=create_app(service), raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://t")


@pytest.fixture
async def client(engine: FakeEngine) -> AsyncIterator[httpx.AsyncClient]:
    async with await client_for(engine) as c:
        yield c


# -- DeepL --------------------------------------------------------------------------------------


async def test_deepl_translate_json(client: httpx.AsyncClient) -> None:
    body = {"text": ["Hello world", "Good morning"], "target_lang": "DE", "source_lang": "EN"}
    r = await client.post("/v2/translate", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "translations": [
            {"detected_source_language": "EN", "text": "HELLO WORLD", "billed_characters": 11},
            {"detected_source_language": "EN", "text": "GOOD MORNING", "billed_characters": 12},
        ]
    }


async def test_deepl_translate_form_detects_source(client: httpx.AsyncClient) -> None:
    form = {"text": ["Das ist ein schöner Tag.", ""], "target_lang": "EN-US"}
    r = await client.post("/v2/translate", data=form, headers=AUTH)
    assert r.status_code == 200, r.text
    out = r.json()["translations"]
    assert out[0]["detected_source_language"] == "DE"
    assert out[1] == {"detected_source_language": "", "text": "", "billed_characters": 0}


@pytest.mark.parametrize("target", ["PT-BR", "ZH-HANS", "ZH-HANT", "EN-GB", "pt-pt"])
async def test_deepl_target_variants(client: httpx.AsyncClient, target: str) -> None:
    body = {"text": ["Hallo"], "target_lang": target, "source_lang": "DE"}
    assert (await client.post("/v2/translate", json=body, headers=AUTH)).status_code == 200


async def test_deepl_formality_and_context_reach_the_prompt(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    engine.reply = lambda prompt: "ok"
    body = {
        "text": ["Hello"],
        "target_lang": "DE",
        "source_lang": "EN",
        "formality": "more",
        "context": "A letter to the bank.",
    }
    assert (await client.post("/v2/translate", json=body, headers=AUTH)).status_code == 200
    prompt = "".join(chr(i) for i in engine.requests[0].prompt_token_ids)
    assert "formal" in prompt
    assert "A letter to the bank." in prompt


async def test_deepl_formality_on_a_family_without_it(engine: FakeEngine) -> None:
    engine.reply = lambda prompt: "ok"
    async with await client_for(engine, prompt={"family": "seed_x"}) as c:
        body = {"text": ["Hello"], "target_lang": "DE", "source_lang": "EN"}
        r = await c.post("/v2/translate", json={**body, "formality": "less"}, headers=AUTH)
        assert r.status_code == 400
        assert "formality" in r.json()["message"]
        r = await c.post("/v2/translate", json={**body, "formality": "prefer_less"}, headers=AUTH)
        assert r.status_code == 200


SCRIPT_TARGETS = [
    ("/translate", {"text": "Hello", "source_lang": "en", "target_lang": "zh-TW"}, {}, "error"),
    (
        "/translate/batch",
        {"items": [{"text": "Hello", "source_lang": "en", "target_lang": "zh-Hant"}]},
        {},
        "results",
    ),
    ("/v2/translate", {"text": ["Hello"], "source_lang": "EN", "target_lang": "ZH-HANT"}, AUTH,
     "message"),
    ("/libretranslate/translate", {"q": "Hello", "source": "en", "target": "zh-TW"}, {}, "error"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "body", "headers", "key"), SCRIPT_TARGETS)
async def test_a_target_script_the_model_lacks_is_refused_by_every_api(
    engine: FakeEngine, path: str, body: dict, headers: dict, key: str
) -> None:
    """Seed-X offers Chinese in simplified characters only: traditional Chinese asked of it
    (``zh-TW``, DeepL's ``ZH-HANT``) was translated into simplified characters, answered as
    ``zh``. Each API refuses it now, in its own shape (a batch item in its place)."""
    engine.reply = lambda prompt: "ok"
    async with await client_for(engine, prompt={"family": "seed_x"}) as c:
        r = await c.post(path, json=body, headers=headers)
        if key == "results":
            assert r.status_code == 200
            error = r.json()["results"][0]["error"]
            assert error["code"] == "unsupported_language"
            assert "Hant script" in error["message"]
        else:
            assert r.status_code == 400, r.text
            assert "Hant script" in str(r.json()[key])
        assert not engine.requests
        ok = {"text": "Hello", "source_lang": "zh-TW", "target_lang": "en"}  # a source: read
        assert (await c.post("/translate", json=ok)).json()["source_lang"] == "zh"


DETECTED_AS_TARGET = [
    ("/translate", {"text": "Das Wetter ist heute wunderbar.", "target_lang": "de"}, {}, "error"),
    ("/v2/translate", {"text": ["Das Wetter ist heute wunderbar."], "target_lang": "DE"}, AUTH,
     "message"),
    ("/libretranslate/translate",
     {"q": "Das Wetter ist heute wunderbar.", "source": "auto", "target": "de"}, {}, "error"),
]  # fmt: skip


async def test_a_source_detected_as_the_target_says_it_was_detected(
    client: httpx.AsyncClient,
) -> None:
    """A client that gave no source was told "Source and target are the same language
    ('de')", as if it had sent one; the refusal says the text was detected as the target.
    (DeepL and LibreTranslate answer such a text as it is: test_deepl_client_features.)"""
    path, body, headers, key = DETECTED_AS_TARGET[0]
    r = await client.post(path, json=body, headers=headers)
    assert r.status_code == 400, r.text
    assert "detected as 'de'" in str(r.json()[key])


@pytest.mark.parametrize(("path", "body", "headers", "key"), DETECTED_AS_TARGET)
async def test_auto_as_a_target_says_it_detects_sources(
    client: httpx.AsyncClient, path: str, body: dict, headers: dict, key: str
) -> None:
    r = await client.post(path, json={**body, ("target" if "q" in body else "target_lang"): "auto"},
                          headers=headers)  # fmt: skip
    assert r.status_code == 400
    assert "'auto' detects a source" in str(r.json()[key])


DEEPL_ERRORS = [
    ({"text": ["Hi"], "target_lang": "DE"}, {}, 403),
    ({"target_lang": "DE"}, AUTH, 400),
    ({"text": ["Hi"]}, AUTH, 400),
    ({"text": ["Hi"], "target_lang": "XX"}, AUTH, 400),
    ({"text": ["Hi"], "target_lang": "DE", "glossary_id": "g1"}, AUTH, 400),
    ({"text": ["Hi"], "target_lang": "DE", "formality": "very"}, AUTH, 400),
    ({"text": [3], "target_lang": "DE"}, AUTH, 400),
    ({"text": ["Hi"] * 60, "target_lang": "DE", "source_lang": "EN"}, AUTH, 413),
]


@pytest.mark.parametrize(("body", "headers", "status"), DEEPL_ERRORS)
async def test_deepl_errors(client: httpx.AsyncClient, body, headers, status: int) -> None:
    r = await client.post("/v2/translate", json=body, headers=headers)
    assert r.status_code == status, r.text
    assert set(r.json()) == {"message"}
    assert r.json()["message"]


async def test_deepl_languages(client: httpx.AsyncClient) -> None:
    sources = (await client.get("/v2/languages", headers=AUTH)).json()
    codes = [x["language"] for x in sources]
    assert "EN" in codes
    assert "ZH" in codes
    assert "PT" in codes
    assert len(codes) == len(set(codes))
    # The deepl client sends type=target as a form body of a GET.
    r = await client.request("GET", "/v2/languages", data={"type": "target"}, headers=AUTH)
    targets = {x["language"]: x for x in r.json()}
    assert {"EN-US", "EN-GB", "PT-BR", "PT-PT", "ZH-HANS", "ZH-HANT", "DE"} <= set(targets)
    assert targets["DE"] == {"language": "DE", "name": "German", "supports_formality": True}
    bad = await client.get("/v2/languages?type=both", headers=AUTH)
    assert bad.status_code == 400


async def test_deepl_usage_counts_characters(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v2/usage", headers=AUTH)).json()["character_count"] == 0
    body = {"text": ["Hello", "world!"], "target_lang": "DE", "source_lang": "EN"}
    await client.post("/v2/translate", json=body, headers=AUTH)
    usage = (await client.get("/v2/usage", headers=AUTH)).json()
    assert usage == {"character_count": 11, "character_limit": 10**12}


async def test_deepl_can_be_turned_off(engine: FakeEngine) -> None:
    async with await client_for(engine, compat={"deepl": False}) as c:
        assert (await c.get("/v2/usage", headers=AUTH)).status_code == 404


@pytest.mark.parametrize("prefix", ["/v1", "/v2", "/libretranslate"])
async def test_a_compat_prefix_alone_is_answered_in_its_api_shape(
    client: httpx.AsyncClient, prefix: str
) -> None:
    """``GET /v2`` (no trailing slash) is the compat API's path as much as ``/v2/nope``: its
    404 comes in that API's error shape, not the native one."""
    bare, nested = await client.get(prefix), await client.get(prefix + "/nope")
    assert bare.status_code == nested.status_code == 404
    assert bare.json().keys() == nested.json().keys()
    assert bare.json() != {"error": {"code": "not_found", "message": "Not Found"}}


# -- LibreTranslate -----------------------------------------------------------------------------

LT = "/libretranslate"


async def test_libre_translate_form_and_json(client: httpx.AsyncClient) -> None:
    r = await client.post(f"{LT}/translate", data={"q": "Hello", "source": "en", "target": "de"})
    assert r.json() == {"translatedText": "HELLO"}
    r = await client.post(
        f"{LT}/translate", json={"q": ["Hello", "Bye"], "source": "en", "target": "de"}
    )
    assert r.json() == {"translatedText": ["HELLO", "BYE"]}


@pytest.mark.parametrize(("libre", "bcp47"), [("zt", "zh-Hant"), ("PB", "pt-BR")])
async def test_libre_reads_its_own_codes_zt_and_pb(
    client: httpx.AsyncClient, engine: FakeEngine, libre: str, bcp47: str
) -> None:
    """LibreTranslate's ``zt`` and ``pb`` (Argos Translate's traditional Chinese and Brazilian
    Portuguese) were "not supported" here; they are read as ``zh-Hant`` and ``pt-BR``, as a
    target and as a source, and ask the engine exactly what those codes do."""
    prompts: list[str] = []
    engine.reply = lambda prompt: prompts.append(prompt) or "ok"
    for n, target in enumerate((libre, bcp47, bcp47.split("-")[0])):
        body = {"q": f"Hi {n}", "source": "en", "target": target}  # no cache hit
        r = await client.post(f"{LT}/translate", json=body)
        assert r.json() == {"translatedText": "ok"}, r.text
    asked = [prompt.replace(f"Hi {n}", "Hi") for n, prompt in enumerate(prompts)]
    assert asked[0] == asked[1] != asked[2]
    r = await client.post(f"{LT}/translate", json={"q": "Olá", "source": libre, "target": "en"})
    assert r.status_code == 200, r.text


async def test_libre_auto_source_reports_detected_language(client: httpx.AsyncClient) -> None:
    body = {"q": "Das ist ein schöner Tag.", "source": "auto", "target": "en", "api_key": "k"}
    out = (await client.post(f"{LT}/translate", json=body)).json()
    assert out["detectedLanguage"]["language"] == "de"
    assert 50 < out["detectedLanguage"]["confidence"] <= 100
    body["q"] = [body["q"], "Bonjour tout le monde, comment allez-vous ?"]
    out = (await client.post(f"{LT}/translate", json=body)).json()
    assert [d["language"] for d in out["detectedLanguage"]] == ["de", "fr"]


async def test_libre_detect_and_languages(client: httpx.AsyncClient) -> None:
    found = (await client.post(f"{LT}/detect", data={"q": "Buenos días, amigo."})).json()
    assert found[0]["language"] == "es"
    assert 0 < found[0]["confidence"] <= 100
    langs = (await client.get(f"{LT}/languages")).json()
    en = next(x for x in langs if x["code"] == "en")
    assert en["name"] == "English"
    assert "de" in en["targets"]


async def test_libre_detect_pools_a_list_of_texts(client: httpx.AsyncClient) -> None:
    """A list for ``q`` is one list of languages, as LibreTranslate's ``detect_languages``
    pools a batch (a language's mean confidence over the texts it is found in, ranked by it
    times those texts' characters); it was "missing q parameter"."""
    spanish = ["Buenos días, amigo.", "¿Dónde está la biblioteca de la ciudad?"]
    found = (await client.post(f"{LT}/detect", json={"q": spanish})).json()
    assert found[0]["language"] == "es"
    mixed = ["Guten Morgen, mein lieber Freund, wie geht es dir heute?", "Hola", " "]
    found = (await client.post(f"{LT}/detect", json={"q": mixed})).json()
    assert found[0]["language"] == "de"  # the longer text weighs more
    assert {"de", "es"} <= {f["language"] for f in found}
    assert all(0 < f["confidence"] <= 100 for f in found)
    form = (await client.post(f"{LT}/detect", data={"q[]": spanish})).json()
    assert form[0]["language"] == "es"


@pytest.mark.parametrize(
    ("q", "message"),
    [
        ([], "missing q parameter"),
        ([None], "missing q parameter"),
        ([1, "Hola"], "q must be a string or a list of strings"),
        ([["Hola"]], "q must be a string or a list of strings"),
        (5, "q must be a string or a list of strings"),
        (["  ", "\n"], "must not be empty"),
        (["Hola"] * 51, "at most 50 items"),
    ],
)
async def test_libre_detect_refuses_what_is_no_list_of_texts(
    client: httpx.AsyncClient, q: object, message: str
) -> None:
    r = await client.post(f"{LT}/detect", json={"q": q})
    assert r.status_code in (400, 413), r.text
    assert message in r.json()["error"], r.text


LIBRE_ERRORS = [
    ("/translate", {"source": "en", "target": "de"}),
    ("/translate", {"q": "", "source": "en", "target": "de"}),  # empty (a blank q: answered)
    ("/translate", {"q": "Hi", "source": "en"}),
    ("/translate", {"q": "Hi", "source": "en", "target": "qq"}),
    ("/translate", {"q": "Hi", "source": "en", "target": "de", "format": "xml"}),
    ("/detect", {}),
]


@pytest.mark.parametrize(("path", "body"), LIBRE_ERRORS)
async def test_libre_errors(client: httpx.AsyncClient, path: str, body) -> None:
    r = await client.post(f"{LT}{path}", json=body)
    assert r.status_code == 400, r.text
    assert set(r.json()) == {"error"}


async def test_a_path_not_offered_is_shown_percent_encoded_and_cut(
    client: httpx.AsyncClient,
) -> None:
    """A 404's message names the path as sent: a NUL, a bidirectional override or markup
    in it stay percent-encoded, and a long one is cut."""
    r = await client.get("/v2/%00%e2%80%ae<b>", headers=AUTH)
    assert r.json() == {
        "message": "Not Found: this server does not offer GET /v2/%00%e2%80%ae%3Cb%3E."
    }
    long = (await client.get("/v1/" + "a" * 9000)).json()["error"]["message"]
    assert long.endswith("a" * 196 + "....")
    assert len(long) < 300


async def test_libre_prefix_does_not_touch_the_native_api(client: httpx.AsyncClient) -> None:
    r = await client.post("/translate", json={"q": "Hi", "target": "de"})
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "invalid_request"
    nope = (await client.get(f"{LT}/nope")).json()
    assert nope == {"error": "Not Found: this server does not offer GET /libretranslate/nope."}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v2/translate", {"text": ["hi"] * 5000, "target_lang": "DE"}),
        ("/libretranslate/translate", {"q": ["hi"] * 5000, "source": "en", "target": "de"}),
    ],
)
async def test_oversized_compat_batches_are_refused_before_items_are_built(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, path: str, body: dict
) -> None:
    # Validating 100,000 items before the size check cost seconds on the event loop.
    def no_items(**_: object) -> None:
        raise AssertionError("items were built")

    monkeypatch.setattr("serve_app.api.compat.deepl.make_item", no_items)
    monkeypatch.setattr("serve_app.api.compat.libre.make_item", no_items)
    r = await client.post(path, json=body, headers=AUTH)
    assert r.status_code == 413, r.text
    assert "at most" in r.text
