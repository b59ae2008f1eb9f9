from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from serve_app.core.config import AppConfig, EngineConfig, LimitsConfig
from tests.conftest import ROOT


def test_defaults_match_the_production_engine_sizing() -> None:
    engine = EngineConfig()
    assert engine.model == "tencent/HY-MT1.5-1.8B"
    assert engine.max_num_seqs == 16
    assert engine.max_num_batched_tokens == 8192
    assert engine.gpu_memory_utilization == 0.3


@pytest.mark.parametrize(
    "args",
    [
        {"engine": {"modle": "typo"}},
        {"unknown": 1},
        {"engine": {"max_num_seqs": 0}},
        {"engine": {"gpu_memory_utilization": 1.5}},
        {"engine": {"dtype": "int3"}},
        {"prompt": {"family": "nope"}},
        {"limits": {"max_batch_items": 500, "max_engine_requests": 100}},
        {"limits": {"request_timeout_s": 400, "max_request_timeout_s": 300}},
        {"engine": {"max_model_len": 512}, "limits": {"max_input_tokens": 512}},
        {"prompt": {"sampling": {"min_p": 1.5}}},
        {"prompt": {"sampling": {"presence_penalty": 3}}},
    ],
)
def test_invalid_args_are_refused(args: dict) -> None:
    with pytest.raises(ValidationError):
        AppConfig.model_validate(args)


def test_engine_args_carry_every_setting() -> None:
    engine = EngineConfig(model="m", revision="abc", max_num_seqs=24, enforce_eager=True)
    args = engine.to_engine_args()
    assert (args.model, args.revision, args.max_num_seqs) == ("m", "abc", 24)
    assert args.max_num_batched_tokens == 8192
    assert args.gpu_memory_utilization == 0.3
    assert args.enable_chunked_prefill is True
    assert args.enforce_eager is True
    assert args.max_model_len == 4096
    assert args.max_cudagraph_capture_size == 512
    assert args.stream_interval == 4


def test_cudagraph_capture_size_none_leaves_vllm_default() -> None:
    assert (
        "max_cudagraph_capture_size"
        not in EngineConfig(max_cudagraph_capture_size=None).engine_kwargs()
    )
    assert (
        EngineConfig(max_cudagraph_capture_size=256).to_engine_args().max_cudagraph_capture_size
        == 256
    )


def test_cudagraph_mode_reaches_vllm_compilation_config() -> None:
    assert "compilation_config" not in EngineConfig().engine_kwargs()
    args = EngineConfig(cudagraph_mode="FULL").to_engine_args()
    assert args.compilation_config.cudagraph_mode.name == "FULL"
    production = AppConfig.model_validate(_app("serve_config.yaml")["args"]).engine
    assert production.cudagraph_mode == "FULL"
    with pytest.raises(ValidationError):
        EngineConfig(cudagraph_mode="ALWAYS")  # type: ignore[arg-type]


def test_hf_token_read_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TOKEN", "hf_secret")
    engine = EngineConfig(hf_token_env="MY_TOKEN")
    assert engine.hf_token() == "hf_secret"
    assert "hf_secret" not in repr(engine)
    assert "hf_secret" not in engine.model_dump_json()


def _app(path: str) -> dict:
    return yaml.safe_load((ROOT / path).read_text())["applications"][0]


@pytest.mark.parametrize("path", ["serve_config.yaml", "serve_config.cpu.yaml"])
def test_shipped_configs_validate(path: str) -> None:
    app = _app(path)
    assert app["import_path"] == "serve_app.serving.app:build_app"
    config = AppConfig.model_validate(app["args"])
    deployment = app["deployments"][0]
    assert deployment["name"] == "Translator"
    # A replica must accept at least what Ray lets through to it.
    assert config.limits.max_engine_requests >= deployment["max_ongoing_requests"]
    assert deployment["backpressure_config"]["retry_after_s"] >= 1


def test_production_config_pins_one_gpu_per_replica_and_autoscales() -> None:
    deployment = _app("serve_config.yaml")["deployments"][0]
    assert deployment["ray_actor_options"]["num_gpus"] == 1
    scaling = deployment["autoscaling_config"]
    assert 1 <= scaling["min_replicas"] <= scaling["max_replicas"]
    assert scaling["target_ongoing_requests"] <= deployment["max_ongoing_requests"]


def test_cpu_config_differs_only_in_resources_and_sizes() -> None:
    gpu, cpu = _app("serve_config.yaml"), _app("serve_config.cpu.yaml")
    assert cpu["deployments"][0]["ray_actor_options"]["num_gpus"] == 0
    assert cpu["import_path"] == gpu["import_path"]
    assert cpu["args"]["engine"]["model"] == gpu["args"]["engine"]["model"]
    assert cpu["args"]["prompt"] == gpu["args"]["prompt"]


@pytest.mark.parametrize(
    "model", ["tencent/Hunyuan-MT-Chimera-7B", "/models/hunyuan-mt-chimera-7b-fp8"]
)
@pytest.mark.parametrize("family", ["hunyuan_mt", "hy_mt", "chat"])
def test_hunyuan_mt_chimera_is_refused_with_the_model_to_serve_instead(
    model: str, family: str
) -> None:
    """Chimera fuses candidate translations; given one plain prompt it would answer
    nonsense, so no family may serve it."""
    args = {"engine": {"model": model}, "prompt": {"family": family}}
    with pytest.raises(ValidationError, match="Chimera") as info:
        AppConfig.model_validate(args)
    assert "tencent/Hunyuan-MT-7B (prompt.family: hunyuan_mt)" in str(info.value)
    assert AppConfig.model_validate({"engine": {"model": "tencent/Hunyuan-MT-7B"}})


def test_limits_defaults_are_consistent() -> None:
    limits = LimitsConfig()
    assert limits.max_batch_items <= limits.max_engine_requests


def test_builder_refuses_bad_args_before_any_replica_starts() -> None:
    from serve_app.serving.app import build_app

    with pytest.raises(ValidationError):
        build_app({"engine": {"modle": "x"}})
    with pytest.raises(ValueError, match="yue"):
        build_app({"prompt": {"family": "seed_x"}, "supported_languages": ["yue"]})
    with pytest.raises(ValueError, match="src:tgt"):
        build_app({"supported_language_pairs": ["en-de"]})
    assert build_app({}) is not None


def test_detection_cache_and_compat_keys_validate() -> None:
    config = AppConfig.model_validate(
        {
            "limits": {"max_text_chars": 500},
            "cache": {"enabled": False, "max_entries": 10, "max_bytes": 4096},
            "compat": {"deepl": False, "libretranslate_prefix": "/lt"},
        }
    )
    assert (config.limits.max_text_chars, config.cache.enabled) == (500, False)
    assert config.compat.libretranslate_prefix == "/lt"
    for bad in (
        {"cache": {"max_bytes": 1}},
        {"cache": {"size": 3}},
        {"compat": {"libretranslate_prefix": "no-slash"}},
        {"compat": {"libretranslate_prefix": "/trailing/"}},
    ):
        with pytest.raises(ValidationError):
            AppConfig.model_validate(bad)
