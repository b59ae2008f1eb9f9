"""What the autoscaling ramp asks the running service once a second, besides the load.

- Replicas: Ray Serve's own count of the deployment's RUNNING replicas, from the dashboard's
  REST API (``/api/serve/applications/``, what ``serve status`` shows; as
  tests/e2e/test_autoscaling.py reads it). The dashboard's address is the one ``serve run``
  logged when it started its local Ray.
- Engine queues: Ray's Prometheus endpoint on the node (``bench.cpu_profile.ray_metrics_urls``:
  its port from the Ray session's ``metrics_export_port_*`` file), summed over replicas: the
  engines' waiting and running requests, averaged over every engine step of the replica's
  last export interval (``ray_translator_engine_waiting_mean``/``_running_mean``,
  serve_app/engine/metrics.py; vLLM's ``ray_vllm_num_requests_waiting``/``_running``, one
  step's count, where a replica does not export those), and the engine requests the
  replicas admitted (``ray_translator_engine_requests_in_flight``,
  serve_app/serving/metrics.py).

A source that does not answer in time leaves its fields None for that second.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.ramp_timeline import Probe

WAITING = "ray_vllm_num_requests_waiting"
RUNNING = "ray_vllm_num_requests_running"
IN_FLIGHT = "ray_translator_engine_requests_in_flight"
WAITING_MEAN = "ray_translator_engine_waiting_mean"
RUNNING_MEAN = "ray_translator_engine_running_mean"
ENGINE_SERIES = (WAITING, RUNNING, IN_FLIGHT, WAITING_MEAN, RUNNING_MEAN)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DASHBOARD = re.compile(r"View the dashboard at (\S+)")
DEFAULT_DASHBOARD = "http://127.0.0.1:8265"


def dashboard_url(log: str) -> str:
    """The dashboard address ``serve run`` logged for the Ray it started (its default else)."""
    found = _DASHBOARD.findall(_ANSI.sub("", log))
    if not found:
        return DEFAULT_DASHBOARD
    url = found[-1]
    return url if "://" in url else f"http://{url}"


def metric_sums(text: str, names: tuple[str, ...]) -> dict[str, float]:
    """Each of ``names`` summed over its series in a Prometheus text page (absent: not in).
    Only the lines of those metrics are parsed: Ray's page on a node with vLLM is thousands
    of lines (histograms per replica), and the probe runs beside the users' requests."""
    wanted = "\n".join(line for line in text.splitlines() if line.startswith(names))
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(wanted):
        for sample in family.samples:
            if sample.name in names:
                sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    return sums


def _auth_headers() -> dict[str, str]:
    token = Path.home() / ".ray" / "auth_token"
    return {"Authorization": f"Bearer {token.read_text().strip()}"} if token.exists() else {}


async def running_replicas(
    client: httpx.AsyncClient, dashboard: str, app: str = "translator", name: str = "Translator"
) -> int | None:
    """RUNNING replicas of the deployment by Ray Serve's REST API; None if it did not say."""
    try:
        r = await client.get(f"{dashboard}/api/serve/applications/", headers=_auth_headers())
        r.raise_for_status()
        deployment = r.json()["applications"][app]["deployments"][name]
    except (httpx.HTTPError, KeyError, ValueError):
        return None
    return sum(1 for replica in deployment["replicas"] if replica["state"] == "RUNNING")


async def engine_sums(client: httpx.AsyncClient, urls: list[str]) -> dict[str, float] | None:
    """The engine gauges summed over every endpoint; None if none answered."""
    sums: dict[str, float] = {}
    answered = False
    for url in urls:
        try:
            text = (await client.get(url)).text
        except httpx.HTTPError:
            continue
        answered = True
        # Off the loop that the ramp's users share (the page's size is Ray's, not ours).
        found = await asyncio.to_thread(metric_sums, text, ENGINE_SERIES)
        for name, value in found.items():
            sums[name] = sums.get(name, 0.0) + value
    return sums if answered else None


async def probe_once(
    client: httpx.AsyncClient, dashboard: str, urls: list[str], t_s: float
) -> Probe:
    replicas, sums = await asyncio.gather(
        running_replicas(client, dashboard), engine_sums(client, urls)
    )
    waiting, running = engine_queue(sums or {})
    return Probe(t_s, replicas, waiting, running, (sums or {}).get(IN_FLIGHT))


def engine_queue(sums: dict[str, float]) -> tuple[float | None, float | None]:
    """Waiting and running engine requests: the step means where the replicas export them
    (a whole interval, not the step a scrape happens to catch), else vLLM's gauges."""
    if WAITING_MEAN in sums and RUNNING_MEAN in sums:
        return sums[WAITING_MEAN], sums[RUNNING_MEAN]
    return sums.get(WAITING), sums.get(RUNNING)


async def record(
    dashboard: str, urls: list[str], start: float, out: list[Probe], period_s: float = 1.0
) -> None:
    """Probes every ``period_s`` into ``out`` until cancelled (times since ``start``, on the
    running loop's clock, as ``bench.ramp_load.loop_time``); a slow answer delays the next
    probe, never overlaps it."""
    loop = asyncio.get_running_loop()
    async with httpx.AsyncClient(timeout=3 * period_s) as client:
        while True:
            began = loop.time()
            out.append(await probe_once(client, dashboard, urls, began - start))
            await asyncio.sleep(max(0.0, period_s - (loop.time() - began)))
