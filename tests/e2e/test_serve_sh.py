"""`./serve.sh` on a machine where a Ray killed without `ray stop` left its current-cluster file
behind (CI hit it: `serve run` tried to reach the dead cluster for ten minutes): the launcher
sees that nothing listens at the file's address and serve.sh starts a fresh local Ray with
`serve run --address local`, the service answers, and RAY_ADDRESS stays out of Ray's
environment.

Like the other modules with a cluster of their own, it restarts Ray (`ray stop --force` before
and after), so it runs before the session's shared cluster starts (tests/conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import yaml

from bench.ports import free_port
from bench.process import descendants, kill_tree
from serve_app.tools.launcher import derive_config
from tests.conftest import ROOT
from tests.e2e.conftest import START_TIMEOUT_S

BIN = Path(sys.executable).parent


def _ray_stop(env: dict[str, str]) -> None:
    # It also removes Ray's current-cluster file.
    subprocess.run([str(BIN / "ray"), "stop", "--force"], capture_output=True, env=env, timeout=180)


@contextmanager
def stale_cluster_file(env: dict[str, str]) -> Iterator[str]:
    """Ray's current-cluster file (where Ray reads it) naming a port nobody listens on; yields
    that address. Whatever file was there before is put back after."""
    from ray._common.utils import get_ray_address_file

    path = Path(get_ray_address_file(None))
    backup = path.read_text() if path.exists() else None
    _ray_stop(env)
    address = f"127.0.0.1:{free_port()}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(address)
    try:
        yield address
    finally:
        _ray_stop(env)
        path.unlink(missing_ok=True)
        if backup is not None:
            path.write_text(backup)


def _stop(proc: subprocess.Popen) -> None:
    """`serve run` and the local Ray it started, with every process below them, at once (a
    graceful stop waits 30 s for the HAProxy ingress's deregistration window: bench/process.py)."""
    if proc.poll() is None:
        kill_tree(proc, descendants(proc.pid))


def _wait_ready(proc: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve.sh exited ({proc.returncode}):\n{log.read_text()[-8000:]}")
        if "Connecting to existing Ray cluster" in log.read_text():  # the dead one: it would hang
            raise AssertionError(f"serve run went for the dead cluster:\n{log.read_text()[-8000:]}")
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise AssertionError(f"not ready in {START_TIMEOUT_S}s:\n{log.read_text()[-8000:]}")


def test_serve_sh_starts_a_fresh_ray_past_a_dead_clusters_file(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    port = free_port()
    config = derive_config(  # the demo's config (launcher.write_demo_config), on a free port
        ROOT / "serve_config.cpu.yaml",
        top={"http_options": {"port": port}},
        args={
            "engine": {"model": str(tiny_model_dir), "max_model_len": 2048},
            "prompt": {"family": "chat", "sampling": {"temperature": 0.0}},
            "limits": {"max_input_tokens": 512},
        },
        runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1"}},
    )
    path = tmp_path / "serve_config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    # The venv running the tests (./test.sh's: serve.sh's set-up finds it installed), unless
    # VENV names another.
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.setdefault("VENV", str(BIN.parent))
    log = tmp_path / "serve.log"
    with stale_cluster_file(env) as dead, log.open("w") as out:
        proc = subprocess.Popen(
            ["./serve.sh", str(path)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _wait_ready(proc, f"http://127.0.0.1:{port}", log)
            # serve.sh exec'd `serve run`: its command line has the address, its environment not.
            cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
        finally:
            _stop(proc)
    text = log.read_text()
    ignored = [line for line in text.splitlines() if line.startswith("[serve] ignoring")]
    assert len(ignored) == 1, text[-8000:]
    assert dead in ignored[0]
    assert "Connecting to existing Ray cluster" not in text
    assert [b"run", b"--address", b"local", str(path).encode()] == cmdline[-5:-1]
    assert not [v for v in environ if v.startswith(b"RAY_ADDRESS=")]
