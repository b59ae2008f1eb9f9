"""A generation request's decoding settings become vLLM's ``SamplingParams`` unchanged."""

from __future__ import annotations

from serve_app.engine.protocol import GenerationRequest
from serve_app.engine.vllm import sampling_params


def test_every_decoding_setting_reaches_vllm() -> None:
    request = GenerationRequest(
        [1, 2, 3],
        max_tokens=64,
        temperature=0.7,
        top_p=0.8,
        top_k=20,
        repetition_penalty=1.05,
        min_p=0.05,
        presence_penalty=1.5,
        stop=("[COT]",),
    )
    params = sampling_params(request)
    assert (params.temperature, params.top_p, params.top_k) == (0.7, 0.8, 20)
    assert (params.repetition_penalty, params.min_p, params.presence_penalty) == (1.05, 0.05, 1.5)
    assert params.stop == ["[COT]"]
    assert not params.include_stop_str_in_output  # the marker is not part of the text
    assert params.max_tokens == 64


def test_no_stop_sequences_by_default() -> None:
    params = sampling_params(GenerationRequest([1], max_tokens=8))
    assert params.stop == []
    assert (params.min_p, params.presence_penalty) == (0.0, 0.0)
