"""OpenAI's ``seed`` and ``logit_bias`` reach the engine, over the fake engine (before
2026-12-07 both were silently dropped: a client asking for reproducible samples got the
engine's own randomness, and a ``logit_bias`` changed nothing). Bad values are OpenAI's 400
``invalid_request_error``, before a stream opens. ``tests/integration/test_vllm_engine.py``
shows the real engine follows both."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from serve_app.api.compat.openai.protocol import INT64_MAX, INT64_MIN
from tests.fakes import FakeEngine
from tests.unit.api.test_openai_api import MODEL, openai_for

ASK: Any = [{"role": "user", "content": "Hello"}]


async def test_choice_i_samples_with_seed_plus_i(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    await openai_for(client).chat.completions.create(
        model=MODEL, messages=ASK, n=3, temperature=1.0, seed=41
    )
    assert [job.seed for job in engine.requests] == [41, 42, 43]
    await openai_for(client).chat.completions.create(model=MODEL, messages=ASK, n=2)
    assert [job.seed for job in engine.requests[3:]] == [None, None]


async def test_a_seed_at_the_int64_edge_wraps_for_the_next_choice(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    body = {"model": MODEL, "messages": ASK, "n": 2, "seed": INT64_MAX, "stream": True}
    r = await client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    assert [job.seed for job in engine.requests] == [INT64_MAX, INT64_MIN]


async def test_logit_bias_reaches_the_engine_as_token_ids(
    client: httpx.AsyncClient, engine: FakeEngine
) -> None:
    await openai_for(client).chat.completions.create(
        model=MODEL, messages=ASK, logit_bias={"72": 5, "101": -100}
    )
    assert engine.requests[0].logit_bias == ((72, 5.0), (101, -100.0))
    await openai_for(client).chat.completions.create(model=MODEL, messages=ASK, logit_bias={})
    assert engine.requests[1].logit_bias == ()


@pytest.mark.parametrize(
    ("field", "fragment"),
    [
        ({"seed": 2**63}, "less than or equal to"),
        ({"seed": -(2**63) - 1}, "greater than or equal to"),
        ({"seed": "7x"}, "valid integer"),
        ({"logit_bias": {"hello": 5}}, "token ids"),
        ({"logit_bias": {"-1": 5}}, "token ids"),
        ({"logit_bias": {"١٢": 5}}, "token ids"),  # Arabic-Indic digits: int() reads them
        ({"logit_bias": {"1" * 400: 5}}, "token ids"),
        ({"logit_bias": {"5": 100.5}}, "from -100 to 100"),
        ({"logit_bias": {"5": "NaN"}}, "finite number"),
        ({"logit_bias": [5]}, "valid dictionary"),
        ({"logit_bias": {str(i): 1 for i in range(1025)}}, "at most 1024"),
        ({"logit_bias": {"1114112": 5}}, "token ids run from 0 to 1114111"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_bad_values_are_openai_400s_before_a_stream_opens(
    client: httpx.AsyncClient,
    engine: FakeEngine,
    field: dict[str, Any],
    fragment: str,
    stream: bool,
) -> None:
    body = {"model": MODEL, "messages": ASK, "stream": stream} | field
    r = await client.post("/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert fragment in error["message"], error
    assert engine.requests == []


async def test_the_openai_client_raises_bad_request_on_a_token_past_the_vocabulary(
    client: httpx.AsyncClient,
) -> None:
    with pytest.raises(openai.BadRequestError, match="logit_bias"):
        await openai_for(client).chat.completions.create(
            model=MODEL, messages=ASK, logit_bias={"99999999": 1}
        )
