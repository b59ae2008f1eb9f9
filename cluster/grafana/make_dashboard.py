"""Writes translation-fleet.json, the Grafana dashboard of the translation fleet.

Every query reads metrics from Ray's Prometheus endpoint: the service's (ray_translator_*),
Ray Serve's (ray_serve_*) and vLLM's (ray_vllm_*, tagged with ReplicaId). The end-to-end tests
check each metric named here against a real scrape. Run: python cluster/grafana/make_dashboard.py
"""

from __future__ import annotations

import json
from pathlib import Path

DS = {"type": "prometheus", "uid": "${datasource}"}
APP = 'application="translator"'


def panel(pid: int, title: str, exprs: list[tuple[str, str]], unit: str, x: int, y: int) -> dict:
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "datasource": DS,
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(65 + i), "datasource": DS, "expr": e, "legendFormat": legend}
            for i, (e, legend) in enumerate(exprs)
        ],
    }


def quantiles(metric: str, by: str = "") -> list[tuple[str, str]]:
    group = f"le{', ' + by if by else ''}"
    return [
        (
            f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket[$__rate_interval])))",
            f"p{int(q * 100)}{' {{' + by + '}}' if by else ''}",
        )
        for q in (0.5, 0.95, 0.99)
    ]


PANELS = [
    ("Throughput (requests/s by status)", [
        ("sum by (status) (rate(ray_translator_requests_total[$__rate_interval]))",
         "{{status}}"),
    ], "reqps"),
    ("Texts and tokens per second", [
        ("sum(rate(ray_translator_texts_total[$__rate_interval]))", "texts/s"),
        ("sum(rate(ray_translator_output_tokens_total[$__rate_interval]))", "output tokens/s"),
        ("sum(rate(ray_translator_input_tokens_total[$__rate_interval]))", "input tokens/s"),
        ("sum(rate(ray_translator_characters_total[$__rate_interval]))", "characters/s"),
    ], "short"),
    ("Request latency (/translate)",
     [(e.replace("[$__rate_interval]", '{endpoint="/translate"}[$__rate_interval]'), lg)
      for e, lg in quantiles("ray_translator_request_duration_seconds")], "s"),
    ("Time to first token and engine queue wait",
     quantiles("ray_translator_time_to_first_token_seconds")[:2]
     + [(e, "queue " + lg) for e, lg in quantiles("ray_translator_queue_wait_seconds")[:2]], "s"),
    ("Queue depth vs replicas", [
        (f"sum(ray_serve_num_ongoing_requests_at_replicas{{{APP}}})", "ongoing at replicas"),
        (f"sum(ray_serve_deployment_queued_queries{{{APP}}})", "queued at proxies"),
        ("sum(ray_vllm_num_requests_waiting)", "waiting in engines"),
        (f"sum(ray_serve_deployment_replica_healthy{{{APP}}})", "healthy replicas"),
        (f"max(ray_serve_autoscaling_target_replicas{{{APP}}})", "target replicas"),
    ], "short"),
    ("Engine requests per replica", [
        ("sum by (ReplicaId) (ray_vllm_num_requests_running)", "running {{ReplicaId}}"),
        ("sum by (ReplicaId) (ray_vllm_num_requests_waiting)", "waiting {{ReplicaId}}"),
        ("sum by (ReplicaId) (ray_translator_engine_running_mean)",
         "running, step mean {{ReplicaId}}"),
        ("sum by (ReplicaId) (ray_translator_engine_waiting_mean)",
         "waiting, step mean {{ReplicaId}}"),
        ("sum by (ReplicaId) (ray_translator_engine_decoding_mean)",
         "decoding, step mean {{ReplicaId}}"),
    ], "short"),
    ("KV-cache usage per replica", [
        ("max by (ReplicaId) (ray_vllm_kv_cache_usage_perc)", "{{ReplicaId}}"),
    ], "percentunit"),
    ("Time per output token (vLLM)",
     quantiles("ray_vllm_inter_token_latency_seconds")[:2], "s"),
    ("Errors and rejections", [
        ('sum by (status) (rate(ray_translator_requests_total{status=~"4..|5.."}'
         "[$__rate_interval]))", "{{status}}"),
        ("sum by (reason) (rate(ray_translator_rejected_requests_total[$__rate_interval]))",
         "rejected: {{reason}}"),
        ("sum(rate(ray_vllm_num_preemptions_total[$__rate_interval]))", "preemptions"),
    ], "reqps"),
    ("Batch sizes", quantiles("ray_translator_batch_size")[:2], "short"),
    ("Translation cache (lookups/s: hits cost no GPU)", [
        ("sum by (result) (rate(ray_translator_cache_lookups_total[$__rate_interval]))",
         "{{result}}"),
    ], "reqps"),
    ("Documents (progress: segments and characters/s; jobs finished)", [
        ("sum(rate(ray_translator_document_characters_total[$__rate_interval]))",
         "characters/s"),
        ("sum(rate(ray_translator_document_segments_total[$__rate_interval]))", "segments/s"),
        ("sum by (state) (increase(ray_translator_documents_finished_total"
         "[$__rate_interval]))", "jobs {{state}}"),
    ], "short"),
    # Every replica reports the same fleet-wide figures (read from the store): max, not sum.
    ("Documents backlog (left to translate, fleet-wide)", [
        ("max(ray_translator_document_backlog_characters)", "characters"),
        ("max(ray_translator_document_backlog_segments)", "segments"),
        ("max(ray_translator_document_backlog_jobs)", "jobs"),
    ], "short"),
]  # fmt: skip


def dashboard() -> dict:
    panels = [
        panel(i + 1, title, exprs, unit, x=(i % 2) * 12, y=(i // 2) * 8)
        for i, (title, exprs, unit) in enumerate(PANELS)
    ]
    return {
        "title": "Translation fleet",
        "uid": "translation-fleet",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "tags": ["ray", "vllm", "translation"],
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus"}]
        },
        "panels": panels,
    }


if __name__ == "__main__":
    out = Path(__file__).with_name("translation-fleet.json")
    out.write_text(json.dumps(dashboard(), indent=2) + "\n")
    print(out)
