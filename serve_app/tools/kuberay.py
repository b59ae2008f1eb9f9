"""The KubeRay ``RayService`` manifest, generated from ``serve_config.yaml``.

``cluster/kuberay/rayservice.yaml`` is rendered from ``cluster/kuberay/rayservice.template.yaml``:
``serve_config.yaml`` goes in verbatim as ``serveConfigV2`` (comments included), and the GPU
worker group's pod counts follow the deployment's autoscaling limits, and the pods' environment
carries the config's ``RAY_SERVE_*`` settings (Ray's controller and proxies read them at start,
not from the application's runtime env), so the manifest cannot
say something else than the config that ``serve deploy`` and ``serve run`` use.
``python -m serve_app.tools.kuberay`` rewrites the manifest; ``--check`` exits 1 when the committed
file differs from what its sources give (the tests run it).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serve_app.tools.launcher import derive_config, ray_env

ROOT = Path(__file__).resolve().parents[2]
SERVE_CONFIG = Path("serve_config.yaml")
TEMPLATE = Path("cluster/kuberay/rayservice.template.yaml")
MANIFEST = Path("cluster/kuberay/rayservice.yaml")
# Built from cluster/kuberay/Dockerfile; push it where your cluster pulls from.
IMAGE = "ghcr.io/your-org/serve-app:0.1.0-gpu"
GPUS_PER_POD = 1  # one RTX 5090-class GPU per worker pod
# Where the image's Dockerfile writes the HAProxy script (serve_app/tools/haproxy.py).
IMAGE_HAPROXY = "/home/ray/serve-app-haproxy"


@dataclass(frozen=True)
class ReplicaShape:
    """What one translator replica asks of a node, and how many replicas may run."""

    num_gpus: float
    num_cpus: float
    min_replicas: int
    max_replicas: int


def replica_shape(serve_config: dict[str, Any]) -> ReplicaShape:
    """The translator deployment's resources and replica limits from a serve config."""
    deployment = serve_config["applications"][0]["deployments"][0]
    options = deployment.get("ray_actor_options") or {}
    scaling = deployment.get("autoscaling_config")
    if scaling:
        low, high = int(scaling.get("min_replicas", 1)), int(scaling["max_replicas"])
    else:
        low = high = int(deployment.get("num_replicas", 1))
    return ReplicaShape(
        num_gpus=float(options.get("num_gpus", 0)),
        num_cpus=float(options.get("num_cpus", 1)),
        min_replicas=low,
        max_replicas=high,
    )


def gpu_pods(replicas: int, shape: ReplicaShape, gpus_per_pod: int = GPUS_PER_POD) -> int:
    """GPU worker pods that ``replicas`` translator replicas need."""
    return math.ceil(replicas * shape.num_gpus / gpus_per_pod)


def _indent_block(text: str, indent: str) -> str:
    lines = text.rstrip("\n").splitlines()
    return "\n".join((indent + line) if line.strip() else "" for line in lines)


def _fill_block(template: str, key: str, text: str) -> str:
    """Every line holding ``{{key}}`` replaced by ``text``, indented as that line."""
    lines = []
    for line in template.splitlines():
        if "{{" + key + "}}" in line:
            line = _indent_block(text, line[: len(line) - len(line.lstrip())])
        lines.append(line)
    return "\n".join(lines) + "\n"


def pod_env(serve_config: dict[str, Any]) -> str:
    """The config's Ray Serve variables as a pod's ``env`` entries."""
    return "\n".join(
        f"- {{name: {key}, value: {json.dumps(value)}}}"
        for key, value in sorted(ray_env(serve_config, haproxy=IMAGE_HAPROXY).items())
    )


def render(root: Path = ROOT, image: str = IMAGE) -> str:
    """The manifest's text for the serve config and template under ``root``."""
    serve_text = (root / SERVE_CONFIG).read_text()
    config = derive_config(root / SERVE_CONFIG)
    shape = replica_shape(config)
    out = _fill_block((root / TEMPLATE).read_text(), "SERVE_CONFIG_V2", serve_text)
    out = _fill_block(out, "RAY_SERVE_ENV", pod_env(config))
    values = {
        "IMAGE": image,
        "GPUS_PER_POD": str(GPUS_PER_POD),
        "GPU_WORKERS_MIN": str(gpu_pods(shape.min_replicas, shape)),
        "GPU_WORKERS_MAX": str(gpu_pods(shape.max_replicas, shape)),
    }
    for key, value in values.items():
        out = out.replace("{{" + key + "}}", value)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve_app.tools.kuberay", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the manifest drifted")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository root")
    ns = parser.parse_args(argv)
    expected = render(ns.root)
    target = ns.root / MANIFEST
    if not ns.check:
        target.write_text(expected)
        print(target)
        return 0
    if not target.is_file() or target.read_text() != expected:
        print(
            f"{MANIFEST} is out of date with {SERVE_CONFIG} or {TEMPLATE}: "
            "run `python -m serve_app.tools.kuberay`",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
