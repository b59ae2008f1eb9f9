"""Metrics through Ray's Prometheus endpoint and JSON logs, on the running service."""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT
from tests.e2e.conftest import Cluster

Samples = list[tuple[str, dict[str, str], float]]


def scrape(url: str) -> Samples:
    text = httpx.get(url, timeout=30).text
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def total(samples: Samples, name: str, **labels: str) -> float:
    return sum(
        value
        for n, lab, value in samples
        if n == name and all(lab.get(k) == v for k, v in labels.items())
    )


def wait_for(check: Callable[[], bool], timeout: float = 90) -> None:
    """Ray's agent exports what replicas record every few seconds: poll, bounded."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "metrics did not reach the expected values"
        time.sleep(2)


def test_counters_match_the_traffic_sent(cluster: Cluster) -> None:
    before = scrape(cluster.metrics_url)
    # The cache is bypassed: every request here is engine work the counters must show.
    item = {"text": "Good morning to you", "source_lang": "en", "target_lang": "ko", "cache": False}
    answers = [httpx.post(f"{cluster.url}/translate", json=item, timeout=60) for _ in range(6)]
    assert {r.status_code for r in answers} == {200}
    bad = [
        httpx.post(f"{cluster.url}/translate", json={**item, "target_lang": "xx"}) for _ in range(3)
    ]
    assert {r.status_code for r in bad} == {400}
    batch = httpx.post(f"{cluster.url}/translate/batch", json={"items": [item, item]}, timeout=60)
    assert batch.status_code == 200
    output_tokens = (
        sum(r.json()["usage"]["output_tokens"] for r in answers)
        + batch.json()["usage"]["output_tokens"]
    )
    pair = {"source_lang": "en", "target_lang": "ko"}
    expected = {
        ("ray_translator_requests_total", "/translate", "200"): 6,
        ("ray_translator_requests_total", "/translate/batch", "200"): 1,
        ("ray_translator_texts_total", None, None): 8,
        ("ray_translator_characters_total", None, None): 8 * len(str(item["text"])),
        ("ray_translator_output_tokens_total", None, None): output_tokens,
    }

    def deltas() -> dict:
        now = scrape(cluster.metrics_url)
        out = {}
        for name, endpoint, status in expected:
            labels = dict(pair)
            if endpoint:
                labels |= {"endpoint": endpoint, "status": status}
            out[(name, endpoint, status)] = total(now, name, **labels) - total(
                before, name, **labels
            )
        invalid = {"endpoint": "/translate", "status": "400", "source_lang": "invalid"}
        out["invalid"] = total(now, "ray_translator_requests_total", **invalid) - total(
            before, "ray_translator_requests_total", **invalid
        )
        return out

    with contextlib.suppress(AssertionError):
        wait_for(lambda: deltas() == {**expected, "invalid": 3})
    assert deltas() == {**expected, "invalid": 3}  # on failure, shows which count differs


def test_engine_metrics_per_replica(cluster: Cluster) -> None:
    item = {"text": "Hello there", "source_lang": "en", "target_lang": "de"}
    served_by = set()
    for _ in range(60):  # both replicas must have run the engine once
        r = httpx.post(f"{cluster.url}/translate", json=item, timeout=60)
        served_by.add(r.headers["x-replica"])
        if len(served_by) == 2:
            break
    assert len(served_by) == 2

    def replicas(name: str) -> set[str]:
        return {
            labels.get("ReplicaId", "") for n, labels, _ in scrape(cluster.metrics_url) if n == name
        }

    wait_for(lambda: len(replicas("ray_vllm_num_requests_running") - {""}) == 2)
    for gauge in ("ray_vllm_num_requests_waiting", "ray_vllm_kv_cache_usage_perc"):
        assert len(replicas(gauge) - {""}) == 2, gauge
    histograms = {n for n, _, _ in scrape(cluster.metrics_url)}
    assert "ray_translator_time_to_first_token_seconds_bucket" in histograms
    assert "ray_translator_queue_wait_seconds_bucket" in histograms


ENGINE_GAUGES = ("ray_vllm_num_requests_running", "ray_vllm_num_requests_waiting")


def settled(url: str, names: tuple[str, ...], quiet_s: float = 12) -> Samples:
    """A scrape once the earlier tests' engine work has all been exported: the totals of
    ``names`` unchanged over longer than a buffer flush (1 s) and Ray's report period (10 s)."""
    deadline = time.monotonic() + 90
    last = scrape(url)
    while True:
        time.sleep(quiet_s)
        now = scrape(url)
        changed = {n: (total(last, n), total(now, n)) for n in names}
        changed = {n: pair for n, pair in changed.items() if pair[0] != pair[1]}
        if not changed:
            return now
        engines = {g: total(now, g) for g in ENGINE_GAUGES}
        assert time.monotonic() < deadline, (
            f"vLLM's metrics kept changing with no traffic: {changed}; engines now {engines}"
        )
        last = now


def test_engine_metrics_count_every_request_and_token(cluster: Cluster) -> None:
    """vLLM's metrics go through the buffered exporter (serve_app/engine/metrics.py): its
    counters and histogram counts match the engine work sent, token by token."""
    names = (
        "ray_vllm_generation_tokens_total",
        "ray_vllm_e2e_request_latency_seconds_count",
        "ray_vllm_inter_token_latency_seconds_count",
    )
    before = settled(cluster.metrics_url, names)
    texts = [f"Engine metrics check number {i}" for i in range(5)]
    answers = [
        httpx.post(
            f"{cluster.url}/translate",
            json={"text": t, "source_lang": "en", "target_lang": "de", "cache": False},
            timeout=60,
        )
        for t in texts
    ]
    assert {r.status_code for r in answers} == {200}
    tokens = [r.json()["usage"]["output_tokens"] for r in answers]
    # One latency per token after the first of each request (one token per engine step).
    expected = {names[0]: sum(tokens), names[1]: len(texts), names[2]: sum(tokens) - len(texts)}

    def deltas() -> dict[str, float]:
        now = scrape(cluster.metrics_url)
        return {n: total(now, n) - total(before, n) for n in names}

    with contextlib.suppress(AssertionError):
        wait_for(lambda: deltas() == expected)
    assert deltas() == expected
    failures = [
        r for r in _serve_log_records(cluster.logs) if "engine metric" in r.get("message", "")
    ]
    assert not failures


# Series that exist only after their event (a replica refusing work, a preemption): checked
# against the code that declares them instead of a scrape.
EVENT_ONLY = {
    "ray_translator_rejected_requests_total": (
        "serve_app/serving/metrics.py",
        '"translator_rejected_requests"',
    ),
    "ray_vllm_num_preemptions_total": ("vllm/v1/metrics/loggers.py", '"vllm:num_preemptions"'),
    # Document translation's metrics appear once a document is translated.
    "ray_translator_document_characters_total": (
        "serve_app/serving/metrics.py",
        '"translator_document_characters"',
    ),
    "ray_translator_document_segments_total": (
        "serve_app/serving/metrics.py",
        '"translator_document_segments"',
    ),
    "ray_translator_documents_finished_total": (
        "serve_app/serving/metrics.py",
        '"translator_documents_finished"',
    ),
    "ray_translator_document_backlog_characters": (
        "serve_app/serving/metrics.py",
        '"translator_document_backlog_characters"',
    ),
    "ray_translator_document_backlog_segments": (
        "serve_app/serving/metrics.py",
        '"translator_document_backlog_segments"',
    ),
    "ray_translator_document_backlog_jobs": (
        "serve_app/serving/metrics.py",
        '"translator_document_backlog_jobs"',
    ),
}


def test_grafana_dashboard_queries_use_real_metric_names(cluster: Cluster) -> None:
    import vllm

    dashboard = json.loads((ROOT / "cluster/grafana/translation-fleet.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\b(ray_[A-Za-z0-9_]+)", e)}
    assert len(used) >= 15
    item = {"text": "Grafana check", "source_lang": "en", "target_lang": "de"}
    assert httpx.post(f"{cluster.url}/translate", json=item, timeout=60).status_code == 200
    batch = httpx.post(f"{cluster.url}/translate/batch", json={"items": [item]}, timeout=60)
    assert batch.status_code == 200

    def missing() -> set[str]:
        return used - set(EVENT_ONLY) - {n for n, _, _ in scrape(cluster.metrics_url)}

    wait_for(lambda: not missing(), timeout=60)
    roots = {"serve_app": ROOT, "vllm": Path(vllm.__file__).parent.parent}
    for name in used & set(EVENT_ONLY):
        path, declared = EVENT_ONLY[name]
        assert declared in (roots[path.split("/")[0]] / path).read_text(), name


def _serve_log_records(logs: Path) -> list[dict]:
    records = []
    for path in (logs / "serve").glob("replica_*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    return records


def test_json_logs_carry_request_ids_and_no_text(cluster: Cluster) -> None:
    marker = f"MARKER{uuid.uuid4().hex}"
    request_id = f"logcheck-{uuid.uuid4().hex[:8]}"
    item = {"text": f"{marker} hello", "source_lang": "en", "target_lang": "de"}
    ok = httpx.post(f"{cluster.url}/translate", json=item, timeout=60)
    late = httpx.post(
        f"{cluster.url}/translate",
        json={**item, "timeout_s": 0.001, "cache": False},  # the same text: not from the cache
        headers={"X-Request-ID": request_id},
    )
    assert (ok.status_code, late.status_code) == (200, 504)
    assert late.headers["x-request-id"] == request_id

    def ours() -> list[dict]:
        return [r for r in _serve_log_records(cluster.logs) if r.get("request_id") == request_id]

    def logged(text: str) -> bool:
        return any(text in r.get("message", "") for r in ours())

    # Our warning, and Ray's access log line for the same request id.
    wait_for(lambda: logged("deadline_exceeded") and logged("POST /translate 504"), 30)
    for path in cluster.logs.rglob("*"):
        if path.is_file() and path.suffix in {".log", ".out", ".err"}:
            assert marker not in path.read_text(errors="replace"), path


def test_prometheus_config_finds_rays_endpoint(cluster: Cluster) -> None:
    import yaml

    config = yaml.safe_load((ROOT / "cluster/prometheus/prometheus.yml").read_text())
    files = config["scrape_configs"][0]["file_sd_configs"][0]["files"]
    groups = json.loads(Path(files[0]).read_text())
    targets = [t for group in groups for t in group["targets"]]
    port = cluster.metrics_url.rsplit(":", 1)[1].split("/")[0]
    assert any(t.endswith(f":{port}") for t in targets), targets
