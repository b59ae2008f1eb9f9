"""The capacity plan's arithmetic: how many replicas and GPU nodes a target request rate needs.

Inputs are measured, not guessed: the requests per second one replica sustains comes from the
GPU benchmark (cluster/README.md, "Capacity plan"). Replicas are planned at a utilization below
1 for headroom, and spare nodes are added so that losing a node keeps the target.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    """Replicas and nodes for a target rate."""

    target_rps: float
    replicas: int
    nodes: int
    capacity_rps: float  # what the planned replicas sustain at the planned utilization


def plan(
    target_rps: float,
    rps_per_replica: float,
    *,
    replicas_per_node: int = 1,
    utilization: float = 0.7,
    spare_nodes: int = 1,
) -> Plan:
    """Replicas = ceil(target / (utilization x rps_per_replica)); nodes hold them plus spares."""
    if target_rps <= 0 or rps_per_replica <= 0 or replicas_per_node < 1 or spare_nodes < 0:
        raise ValueError("rates must be positive, replicas_per_node >= 1, spare_nodes >= 0")
    if not 0 < utilization <= 1:
        raise ValueError("utilization must be in (0, 1]")
    usable = utilization * rps_per_replica
    replicas = math.ceil(target_rps / usable)
    nodes = math.ceil(replicas / replicas_per_node) + spare_nodes
    return Plan(target_rps, replicas, nodes, replicas * usable)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve_app.tools.capacity", description=__doc__)
    parser.add_argument("--rps-per-replica", type=float, required=True)
    parser.add_argument("--target", type=float, required=True, help="requests/s to sustain")
    parser.add_argument("--replicas-per-node", type=int, default=1)
    parser.add_argument("--utilization", type=float, default=0.7)
    parser.add_argument("--spare-nodes", type=int, default=1)
    ns = parser.parse_args(argv)
    result = plan(
        ns.target,
        ns.rps_per_replica,
        replicas_per_node=ns.replicas_per_node,
        utilization=ns.utilization,
        spare_nodes=ns.spare_nodes,
    )
    ceiling = result.nodes * ns.replicas_per_node  # spare nodes' replicas included
    print(
        f"{result.target_rps:g} req/s: {result.replicas} replicas on {result.nodes} nodes "
        f"({ns.spare_nodes} spare); max_replicas >= {ceiling}; planned capacity "
        f"{result.capacity_rps:.1f} req/s at {ns.utilization:.0%} utilization"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
