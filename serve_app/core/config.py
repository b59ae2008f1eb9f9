"""The application's one configuration model, validated once from the YAML ``args``.

Everything a replica needs (engine, prompts, languages, limits) lives here and is passed
explicitly; nothing reads configuration from globals. Ray Serve's own deployment options
(replicas, autoscaling, queue limits, health checks) stay in ``serve_config.yaml``'s
``deployments`` section, where Ray reads them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from serve_app.core.documents_config import DocumentsConfig
from serve_app.core.markup_config import MarkupConfig
from serve_app.core.store_config import StoreConfig

if TYPE_CHECKING:
    from vllm.engine.arg_utils import AsyncEngineArgs

Dtype = Literal["auto", "half", "float16", "bfloat16", "float", "float32"]
CudagraphMode = Literal["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineConfig(_Strict):
    """Settings of the vLLM engine each replica owns."""

    model: str = Field(
        "tencent/HY-MT1.5-1.8B",
        description="Hugging Face hub id or local folder of the model.",
    )
    revision: str | None = Field(None, description="Hub revision (branch, tag or commit).")
    tokenizer: str | None = Field(None, description="Tokenizer id or path; default: the model's.")
    dtype: Dtype = Field("auto", description="Weights dtype: auto, bfloat16, float16, float32.")
    max_num_seqs: int = Field(
        16, ge=1, le=1024, description="Sequences decoded together (continuous batch size)."
    )
    max_num_batched_tokens: int = Field(
        8192, ge=16, description="Token budget of one engine step (prefill chunks + decodes)."
    )
    gpu_memory_utilization: float = Field(
        0.3,
        gt=0,
        le=1,
        description="Fraction of GPU memory the engine may take (of RAM on the CPU backend).",
    )
    enable_chunked_prefill: bool = Field(
        True, description="Split long prefills so decodes of other requests keep flowing."
    )
    max_model_len: int | None = Field(
        4096, ge=64, description="Context length (prompt + output); None: the model's own."
    )
    enforce_eager: bool = Field(
        False, description="Skip CUDA-graph capture (faster start, slower decode)."
    )
    max_cudagraph_capture_size: int | None = Field(
        512,
        ge=1,
        description="Largest engine step, in tokens, run as a CUDA graph. vLLM's own default "
        "(2 x max_num_seqs) leaves every step that mixes decodes with a new text's prefill "
        "un-graphed; 512 gave 1.46x the RPS at 25 users on an H200 "
        "(bench/results/2026-11-22-h200-cudagraph). None: vLLM's default.",
    )
    cudagraph_mode: CudagraphMode | None = Field(
        None,
        description="vLLM's compilation_config.cudagraph_mode. FULL runs the steps that mix "
        "decodes with a prefill as one CUDA graph where the attention backend can (FA3 on "
        "Hopper): 1.35x the RPS of vLLM's FULL_AND_PIECEWISE on an H100 (bench/results/"
        "2026-12-07-h100-full-cudagraphs). Where the attention backend graphs only uniform "
        "decode batches (FA2, FlashInfer), vLLM 0.26 falls back to FULL_AND_PIECEWISE with a "
        "warning; with a backend that supports no full graph it refuses to start. None: "
        "vLLM's default.",
    )
    load_format: str = Field(
        "auto", description="Weight loading; 'dummy' gives random weights for benchmarks."
    )
    seed: int = Field(0, description="Engine sampling seed.")
    scheduling_policy: Literal["fcfs", "priority"] = Field(
        "priority",
        description="vLLM's scheduling: 'priority' serves requests by their priority (live "
        "requests 0, document segments documents.engine_priority), then arrival; 'fcfs' by "
        "arrival only (priorities ignored).",
    )
    admission_group: int = Field(
        1,
        ge=1,
        le=256,
        description="Grouped admission (serve_app/engine/grouped_admission.py): while requests "
        "wait, vLLM's scheduler admits them once this many places in the batch are free (or "
        "admission_max_hold_steps steps have passed), so new requests' prefills share a step "
        "instead of each costing one (a step with a prefill took ~3 decode steps on an H100). "
        "1: vLLM's own scheduler.",
    )
    admission_max_hold_steps: int = Field(
        8,
        ge=0,
        le=256,
        description="With admission_group > 1: the most engine steps waiting requests are held "
        "back while fewer places than the group are free.",
    )
    admission_group_full_graphs: int = Field(
        1,
        ge=1,
        le=256,
        description="The admission group where the engine runs steps that mix decodes with a "
        "prefill as whole CUDA graphs (cudagraph_mode resolved to FULL, e.g. FA3 on Hopper): "
        "such a step costs about a decode step, so holding places buys nothing (an H100: 0.93x "
        "vllm serve's RPS with 4, 0.976x with 1, bench/results/2026-12-07-h100-full-item1). "
        "admission_group applies where they run piecewise (the fallback on other GPUs).",
    )
    trust_remote_code: bool = Field(False, description="Allow model code from the hub.")
    hf_token_env: str = Field(
        "HF_TOKEN",
        description="Name of the environment variable holding a Hugging Face token. "
        "The token itself never appears in config or logs.",
    )
    export_engine_metrics: bool = Field(
        True, description="Export vLLM's metrics through Ray's metrics agent (inside Ray)."
    )
    engine_metrics_flush_s: float = Field(
        1.0,
        ge=0,
        description="With export_engine_metrics: vLLM's metrics are kept in plain Python per "
        "engine step and sent to Ray's metrics API every this many seconds (same series, "
        "exact values; see docs/operations.md). 0: vLLM's RayPrometheusStatLogger, which "
        "makes dozens of Ray metric calls per engine step on the replica's event loop.",
    )
    engine_metrics_token_sample: int = Field(
        0,
        ge=0,
        description="With engine_metrics_flush_s > 0: at most this many of the per-token "
        "inter-token latencies go to Ray per flush, evenly spaced (the histogram's quantiles "
        "hold; its _count and _sum become the sample's). 0: all of them (exact).",
    )
    startup_timeout_s: float = Field(
        900, gt=0, description="Seconds the engine may take to start before the replica fails."
    )
    stream_interval: int = Field(
        4,
        ge=1,
        description="vLLM's stream_interval: a streamed request's output comes from the engine "
        "with its first token at once, then every N tokens (1: every token). Each output is "
        "work on the replica's event loop (the flow, output hygiene, an event); 4 cut the "
        "replica's CPU per streamed translation by 30% (bench/stream_interval.py), below what "
        "the streams' pacing (limits.stream_interval_s) sends anyway.",
    )
    warmup_requests: int = Field(
        16,
        ge=0,
        le=256,
        description="Requests the engine decodes at once (a few tokens each, with the "
        "translations' sampling) before the replica takes traffic, so that vLLM compiles the "
        "kernels of a full batch then, not under the first users (its Triton top-k/top-p "
        "sampler held a new replica's requests for 7.4 s on an H200; serve_app/engine/warmup.py"
        "). 0: none.",
    )
    extra_engine_args: dict[str, Any] = Field(
        default_factory=dict,
        description="Further AsyncEngineArgs fields, passed through unchanged.",
    )

    def hf_token(self) -> str | None:
        return os.environ.get(self.hf_token_env) or None

    def engine_kwargs(self) -> dict[str, Any]:
        """The vLLM engine arguments, as keywords (``AsyncEngineArgs``, ``LLM``, CLI flags)."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "revision": self.revision,
            "tokenizer": self.tokenizer,
            "dtype": self.dtype,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "enable_chunked_prefill": self.enable_chunked_prefill,
            "enforce_eager": self.enforce_eager,
            "load_format": self.load_format,
            "seed": self.seed,
            "trust_remote_code": self.trust_remote_code,
            "scheduling_policy": self.scheduling_policy,
            "stream_interval": self.stream_interval,
        }
        if self.max_model_len is not None:
            kwargs["max_model_len"] = self.max_model_len
        if self.max_cudagraph_capture_size is not None:
            kwargs["max_cudagraph_capture_size"] = self.max_cudagraph_capture_size
        if self.cudagraph_mode is not None:
            kwargs["compilation_config"] = {"cudagraph_mode": self.cudagraph_mode}
        return {**kwargs, **self.extra_engine_args}

    def serving_kwargs(self) -> dict[str, Any]:
        """``engine_kwargs`` plus what only this project's serving adds to vLLM (grouped
        admission's scheduler): a peer run with ``engine_kwargs`` is vLLM as shipped."""
        from serve_app.engine.grouped_admission import AdmissionSettings, engine_args

        kwargs = self.engine_kwargs()
        settings = AdmissionSettings(
            group=self.admission_group,
            max_hold_steps=self.admission_max_hold_steps,
            full_graph_group=self.admission_group_full_graphs,
        )
        return {**kwargs, **engine_args(settings, kwargs.get("additional_config") or {})}

    def to_engine_args(self) -> AsyncEngineArgs:
        from vllm.engine.arg_utils import AsyncEngineArgs

        return AsyncEngineArgs(**self.serving_kwargs())


class SamplingConfig(_Strict):
    """Decoding settings; None means the prompt family's recommended value."""

    temperature: float | None = Field(None, ge=0, le=2, description="0 = greedy.")
    top_p: float | None = Field(None, gt=0, le=1, description="Nucleus sampling mass.")
    top_k: int | None = Field(None, ge=-1, description="Top-k; -1 or 0 disables.")
    repetition_penalty: float | None = Field(None, gt=0, le=2, description="1 = none.")
    min_p: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Drop tokens below this fraction of the top one's probability; 0 = off.",
    )
    presence_penalty: float | None = Field(
        None, ge=-2, le=2, description="Penalty on tokens already generated; 0 = none."
    )
    ignore_eos: bool = Field(
        False,
        description="Benchmarks only: generate exactly the output budget, ignoring end of "
        "sequence, so every system compared does the same work with random weights.",
    )


class PromptConfig(_Strict):
    """How a translation request becomes a prompt for the configured model."""

    family: str = Field(
        "hy_mt",
        description="Prompt family, one of the registry's (serve_app/translation/families): "
        "hy_mt (HY-MT1.5), hunyuan_mt (Hunyuan-MT-7B), seed_x, translategemma, or chat (any "
        "chat model through its own chat template).",
    )
    system_prompt: str | None = Field(
        None, description="System message for the chat family (others ignore it)."
    )
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=lambda: {"enable_thinking": False},
        description="Extra chat-template variables (Qwen3: enable_thinking=False).",
    )
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)

    @field_validator("family")
    @classmethod
    def _registered(cls, family: str) -> str:
        # The registry imports this module: looked up when a config is validated.
        from serve_app.translation.families import FAMILIES

        if family not in FAMILIES:
            raise ValueError(f"unknown prompt family {family!r}; known: {', '.join(FAMILIES)}")
        return family


class LimitsConfig(_Strict):
    """Request limits: what a replica accepts before it answers 4xx or 503."""

    max_input_tokens: int = Field(
        1024, ge=1, description="Longest text accepted, in tokens of the model (413 beyond)."
    )
    max_output_tokens: int = Field(2048, ge=1, description="Hard cap on generated tokens per text.")
    output_tokens_ratio: float = Field(
        3.0, gt=0, description="Generated tokens allowed per input token (plus a margin)."
    )
    output_tokens_margin: int = Field(
        32, ge=0, description="Generated tokens allowed on top of the ratio."
    )
    max_batch_items: int = Field(50, ge=1, description="Most texts in one batch request.")
    max_engine_requests: int = Field(
        128,
        ge=1,
        description="Engine requests (running + waiting) a replica holds before it answers "
        "503; batch items count one each.",
    )
    retry_after_s: int = Field(1, ge=0, description="Retry-After sent with 503 answers.")
    request_timeout_s: float = Field(
        60, gt=0, description="Default deadline of a request (504 beyond)."
    )
    max_request_timeout_s: float = Field(
        300, gt=0, description="Largest deadline a client may ask for with timeout_s."
    )
    max_text_chars: int = Field(
        100_000,
        ge=1,
        description="Longest text accepted, in characters (413 beyond). Texts over "
        "max_input_tokens are split into pieces of at most that many tokens.",
    )
    inline_plan_chars: int = Field(
        1000,
        ge=0,
        le=4000,
        description="A request of plain text of at most this many characters in all is "
        "planned (detected, tokenized, its prompt built) on the replica's event loop: "
        "bounded work, cheaper than the hop to a planning thread; longer texts and markup "
        "are planned in the planning pool; so are the messages of an OpenAI chat completion "
        "(the chat template rendered, tokenized). 0: always the pool.",
    )
    stream_interval_s: float = Field(
        0.05,
        ge=0,
        le=1,
        description="Streams (SSE): after the opening event and the first text, at most one "
        "message per this many seconds, holding every event generated meanwhile (each "
        "message costs the replica and Ray's proxy CPU; api/pacing.py). 0: every event "
        "on its own.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> LimitsConfig:
        if self.max_batch_items > self.max_engine_requests:
            raise ValueError("max_batch_items must not exceed max_engine_requests")
        if self.request_timeout_s > self.max_request_timeout_s:
            raise ValueError("request_timeout_s must not exceed max_request_timeout_s")
        return self


class CacheConfig(_Strict):
    """The exact-match translation cache of each replica."""

    enabled: bool = Field(True, description="Serve repeated identical requests from memory.")
    max_entries: int = Field(100_000, ge=1, description="Most translations kept (LRU).")
    max_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Most memory the kept translations may take."
    )


class CompatConfig(_Strict):
    """Drop-in endpoints for clients of other translation APIs."""

    deepl: bool = Field(True, description="Serve the DeepL API v2 subset under /v2.")
    openai: bool = Field(
        True,
        description="Serve the OpenAI API subset (/v1/models, /v1/chat/completions, "
        "/v1/responses).",
    )
    libretranslate_prefix: str | None = Field(
        "/libretranslate",
        pattern=r"^/[A-Za-z0-9_/-]*[A-Za-z0-9_-]$",
        description="Path prefix of the LibreTranslate API (None: off).",
    )
    deepl_character_limit: int = Field(
        10**12, ge=1, description="character_limit reported by GET /v2/usage."
    )


class SecurityConfig(_Strict):
    """Optional API keys, the request body limit (see ``security.py``) and the deadline for
    receiving a body (``body_deadline.py``)."""

    api_keys_env: str | None = Field(
        None,
        description="Name of an environment variable holding comma-separated API keys. "
        "With any key configured, every route but /healthz and /readyz needs one (401).",
    )
    api_keys_file: str | None = Field(
        None, description="Path of a file of API keys, one a line ('#' starts a comment)."
    )
    max_body_bytes: int = Field(
        1 << 20, ge=1024, description="Largest request body accepted, in bytes (413 beyond)."
    )
    body_timeout_s: float = Field(
        30,
        gt=0,
        description="Seconds a request's whole body may take to arrive once the request "
        "reaches the replica, plus 1 s per body_min_bytes_per_s bytes of it (its "
        "Content-Length, or what a chunked body has sent so far); beyond, 408 "
        "request_timeout with Connection: close (api/body_deadline.py). A client dribbling "
        "its body holds one of the replica's max_ongoing_requests places meanwhile; neither "
        "Ray's proxy nor its HAProxy ingress bounds that (docs/hostile-input.md).",
    )
    body_min_bytes_per_s: int = Field(
        64 * 1024,
        ge=1,
        description="The slowest upload rate a large body is given time for (see "
        "body_timeout_s): a 1 MiB body 16 s more, a 20 MiB document upload 320 s more.",
    )
    store_keys: bool = Field(
        False,
        description="Accept the keys kept in the store (python -m serve_app.tools.keys), "
        "with their quotas; every route but /healthz and /readyz then needs a key (401).",
    )


class AppConfig(_Strict):
    """The whole application's configuration (the ``args`` of ``serve_config.yaml``)."""

    engine: EngineConfig = Field(default_factory=EngineConfig)
    prompt: PromptConfig = Field(default_factory=PromptConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    compat: CompatConfig = Field(default_factory=CompatConfig)
    markup: MarkupConfig = Field(
        default_factory=MarkupConfig,
        description="How segments with tags are translated: placeholders or structurally "
        "(docs/markup.md).",
    )
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    store: StoreConfig | None = Field(
        default_factory=StoreConfig,
        description="Shared state (stored glossaries, API keys and usage, documents): SQLite "
        "on the head node by default, or PostgreSQL; null turns it off.",
    )
    documents: DocumentsConfig = Field(
        default_factory=DocumentsConfig,
        description="Document translation (docs/documents.md); needs the store.",
    )
    model_name: str | None = Field(
        None, description="Model name reported in responses; default: engine.model."
    )
    supported_languages: list[str] | None = Field(
        None, description="Language codes offered; None: all the prompt family knows."
    )
    supported_language_pairs: list[str] | None = Field(
        None,
        description="Allowed 'src-tgt' pairs written 'en:de'; None: every pair of "
        "supported languages.",
    )

    @property
    def served_model_name(self) -> str:
        return self.model_name or self.engine.model

    @model_validator(mode="after")
    def _fits_context(self) -> AppConfig:
        max_len = self.engine.max_model_len
        if max_len is not None and self.limits.max_input_tokens >= max_len:
            raise ValueError("limits.max_input_tokens must be below engine.max_model_len")
        if self.security.store_keys and self.store is None:
            raise ValueError("security.store_keys needs a store")
        return self

    @model_validator(mode="after")
    def _servable_model(self) -> AppConfig:
        # The registry imports this module: looked up when a config is validated.
        from serve_app.translation.families import unservable_model

        reason = unservable_model(self.engine.model)
        if reason:
            raise ValueError(reason)
        return self
