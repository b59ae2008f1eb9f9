from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from bench.ports import free_port
from serve_app.tools import launcher
from tests.conftest import ROOT


def test_local_model_folder_passes(tiny_model_dir: Path) -> None:
    assert launcher.model_problem(str(tiny_model_dir), None, None) is None


def test_missing_local_folder_is_named(tmp_path: Path) -> None:
    problem = launcher.model_problem(str(tmp_path / "nope"), None, None)
    assert problem is not None
    assert "does not exist" in problem
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "config.json" in (launcher.model_problem(str(empty), None, None) or "")


def test_offline_preflight_names_model_and_local_path_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            launcher.derive_config(
                ROOT / "serve_config.yaml", args={"engine": {"model": "acme/not-cached-model"}}
            )
        )
    )
    assert launcher.main(["preflight", str(config)]) == 1
    err = capsys.readouterr().err
    assert "model 'acme/not-cached-model'" in err
    assert "args.engine.model: /models/NAME" in err
    assert "./serve.sh --demo" in err


def test_preflight_passes_for_local_model(tmp_path: Path, tiny_model_dir: Path) -> None:
    config = tmp_path / "c.yaml"
    derived = launcher.derive_config(
        ROOT / "serve_config.cpu.yaml", args={"engine": {"model": str(tiny_model_dir)}}
    )
    config.write_text(yaml.safe_dump(derived))
    assert launcher.main(["preflight", str(config)]) == 0


def test_derive_config_merges_without_touching_the_rest() -> None:
    derived = launcher.derive_config(
        ROOT / "serve_config.cpu.yaml",
        args={"engine": {"model": "/m"}},
        deployment={"num_replicas": 2},
        top={"http_options": {"port": 9999}},
    )
    app = derived["applications"][0]
    assert app["args"]["engine"]["model"] == "/m"
    assert app["args"]["engine"]["max_num_seqs"] == 16
    assert app["deployments"][0]["num_replicas"] == 2
    assert app["deployments"][0]["ray_actor_options"]["num_gpus"] == 0
    assert derived["http_options"] == {
        "host": "127.0.0.1",
        "port": 9999,
        "request_timeout_s": 330,
        "keep_alive_timeout_s": 75,
    }


def test_demo_config_serves_the_tiny_model(tmp_path: Path) -> None:
    out = launcher.write_demo_config(tmp_path / "demo.yaml", ROOT / "serve_config.cpu.yaml")
    app = yaml.safe_load(out.read_text())["applications"][0]
    model = Path(app["args"]["engine"]["model"])
    assert (model / "config.json").is_file()
    assert app["args"]["prompt"]["family"] == "chat"


@pytest.mark.parametrize(
    ("module", "out"),
    [
        ("serve_app.tools.launcher", "demo-config {tmp}/demo.yaml"),
        ("serve_app.tools.tiny_model", "{tmp}/m"),
    ],
)
def test_commands_a_shell_captures_print_only_their_value(
    tmp_path: Path, module: str, out: str
) -> None:
    """``config=$(python -m serve_app.tools.launcher demo-config ...)`` in serve.sh: the tokenizer
    trainer (native code) and the model writer print progress, which must go to stderr."""
    args = out.format(tmp=tmp_path).split()
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    value = Path(args[-1]).resolve()
    assert done.stdout == f"{value}\n"
    assert value.exists()


PROXY_ENV = {
    "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH": "serve_app.serving.proxy_headers:middlewares"
}


def test_ray_env_exports_only_the_ray_serve_settings(tmp_path: Path) -> None:
    from serve_app.tools.launcher import derive_config, main, ray_env

    config = derive_config(
        ROOT / "serve_config.cpu.yaml",
        runtime_env={"env_vars": {"RAY_SERVE_THROUGHPUT_OPTIMIZED": "1", "OTHER": "x"}},
    )
    assert ray_env(config, haproxy="/h") == {
        "RAY_SERVE_ENABLE_HA_PROXY": "1",  # the config's own
        "RAY_SERVE_HAPROXY_BINARY_PATH": "/h",  # the HAProxy Ray runs (tools/haproxy.py)
        "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",  # the config's own
        "RAY_SERVE_THROUGHPUT_OPTIMIZED": "1",
        **PROXY_ENV,
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["ray-env", str(path)]) == 0


@pytest.mark.parametrize("name", ["serve_config.yaml", "serve_config.cpu.yaml"])
def test_the_configs_turn_ray_serves_haproxy_ingress_on_and_nothing_else(name: str) -> None:
    from serve_app.tools.launcher import load_serve_config, ray_env

    # with its HAProxy, and the header cleaning of Ray's proxy (serving/proxy_headers.py), which
    # is still HAProxy's fallback while no replica is up; user code on the replica's own loop
    expected = {
        "RAY_SERVE_ENABLE_HA_PROXY": "1",
        "RAY_SERVE_HAPROXY_BINARY_PATH": "/h",
        "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
        **PROXY_ENV,
    }
    assert ray_env(load_serve_config(ROOT / name), haproxy="/h") == expected


# Ray's current-cluster file, as `ray start --head` leaves it, in a temp dir of the test's own.
@pytest.fixture
def ray_address_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (tmp_path / "ray").mkdir()
    return tmp_path / "ray" / "ray_current_cluster"


def _ray_address(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    assert launcher.main(["ray-address"]) == 0
    out = capsys.readouterr()
    return out.out, out.err


def test_a_stale_cluster_file_gets_a_fresh_local_ray(
    ray_address_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    ray_address_file.write_text(f"127.0.0.1:{port}\n")
    # Ray's own lookup (what `serve run` would connect to) reads this file.
    from ray._private.services import get_ray_address_from_environment

    assert get_ray_address_from_environment(None, None) == f"127.0.0.1:{port}"
    out, err = _ray_address(capsys)
    assert out == "local\n"
    # One line about the file; ./test.sh's end-to-end run beside this one may also leave an
    # orphaned HAProxy, which the launcher stops and names on a line of its own (CI, 43ee5c2).
    assert len([line for line in err.splitlines() if "HAProxy" not in line]) == 1
    assert str(ray_address_file) in err
    assert f"127.0.0.1:{port}" in err
    assert "fresh local Ray" in err
    assert launcher.serve_run_address_args({}) == ["--address", "local"]


def test_an_unroutable_address_is_given_up_after_the_probe_timeout(ray_address_file: Path) -> None:
    ray_address_file.write_text("192.0.2.2:51117")  # TEST-NET-1: nothing answers, not even RST
    started = time.monotonic()
    stale = launcher.stale_ray_address({}, timeout_s=0.5)
    assert stale == (str(ray_address_file), "192.0.2.2:51117")
    assert time.monotonic() - started < 5


def test_a_garbled_cluster_file_gets_a_fresh_local_ray(ray_address_file: Path) -> None:
    ray_address_file.write_text("")
    assert launcher.serve_run_address({}) == "local"


def test_a_live_cluster_is_connected_to(
    ray_address_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # On every interface, as Ray's GCS: Ray connects to this node's IP for 127.0.0.1.
    with socket.socket() as listener:
        listener.bind(("0.0.0.0", 0))
        listener.listen()
        ray_address_file.write_text(f"127.0.0.1:{listener.getsockname()[1]}")
        assert _ray_address(capsys) == ("", "")
        assert launcher.serve_run_address_args({}) == []


def test_ray_address_set_by_the_user_is_never_overridden(
    ray_address_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ray_address_file.write_text(f"127.0.0.1:{free_port()}")
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{free_port()}")
    assert _ray_address(capsys) == ("", "")
    assert launcher.serve_run_address({"RAY_ADDRESS": "auto"}) is None
    # An empty RAY_ADDRESS is none to Ray too: the file is read.
    assert launcher.serve_run_address({"RAY_ADDRESS": ""}) == "local"


def test_no_cluster_file_leaves_ray_its_choice(
    ray_address_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not ray_address_file.exists()
    assert _ray_address(capsys) == ("", "")


def _fake_haproxy(tmp_path: Path) -> Path:
    """A stand-in for Ray's HAProxy binary: ``sleep`` at the path Ray runs it from."""
    binary = tmp_path / "site-packages" / launcher.HAPROXY_BINARY
    binary.parent.mkdir(parents=True)
    binary.write_bytes(Path("/bin/sleep").read_bytes())
    binary.chmod(0o755)
    return binary


def _pids_running(binary: Path) -> set[int]:
    found = set()
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if cmdline[:1] == [str(binary)] and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.add(proc.pid)
    return found


def test_an_haproxy_left_by_a_dead_cluster_is_stopped_and_a_live_ones_kept(
    tmp_path: Path,
) -> None:
    """A cluster killed without Serve's shutdown leaves its HAProxy holding port 8000: the
    next `serve run` stops it. An HAProxy whose Ray manager lives is not touched."""
    binary = _fake_haproxy(tmp_path)
    # Orphaned: its parent, a shell, exits at once.
    subprocess.run(["sh", "-c", f"'{binary}' 60 >/dev/null 2>&1 &"], check=True)
    # Live: its parent is a process that names itself Ray's HAProxy manager.
    manager = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess; subprocess.run(['{binary}', '60'])",
            "ray::HAProxyManager",
        ]
    )
    try:
        deadline = time.monotonic() + 10
        while len(_pids_running(binary)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        before = _pids_running(binary)
        assert len(before) == 2
        # Only this test's: a real cluster's HAProxy may be orphaned beside it (other tests).
        orphans = {p.pid for p in launcher.orphaned_haproxies()} & before
        assert len(orphans) == 1
        assert launcher.stop_orphaned_haproxies() >= 1
        assert _pids_running(binary) == before - orphans
    finally:
        manager.kill()
        for pid in _pids_running(binary):
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
