"""Queue-depth autoscaling: what a replica reports and the policy Ray Serve's controller runs.

Ray Serve's default policy sees requests queued at the proxies and requests "ongoing" at each
replica. With ``max_ongoing_requests`` above the engine's ``max_num_seqs`` part of that load
waits inside vLLM, and a batch request is one Serve request but many engine requests. So each
replica reports its own queue (``record_autoscaling_stats``): engine requests running and
waiting (from vLLM's scheduler stats, bounded by the engine's exact count of unfinished
requests) and the requests it admitted. The policy (``queue_depth_policy``, named in
``autoscaling_config.policy``) sizes the deployment to keep ``target_ongoing_requests`` of that
queue per replica; Ray applies bounds, delays and scaling factors around it.

The controller unpickles this module by value: it imports nothing heavy.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from serve_app.engine.protocol import EngineLoad

# Ray Serve's logger: in the controller, lines go to its log file.
logger = logging.getLogger("ray.serve")

# Names of the metrics a replica reports; the policy reads them back per replica.
ENGINE_RUNNING = "engine_running"
ENGINE_WAITING = "engine_waiting"
ADMITTED = "admitted"


def replica_stats(load: EngineLoad, admitted: int) -> dict[str, float]:
    """What ``record_autoscaling_stats`` returns: flat numbers, as Ray Serve requires."""
    return {
        ENGINE_RUNNING: float(load.running),
        ENGINE_WAITING: float(load.waiting),
        ADMITTED: float(admitted),
    }


def replica_queue_depths(metrics: dict[str, dict[Any, float]]) -> dict[Any, float]:
    """Per replica: the larger of what it admitted and what its engine holds.

    Admitted requests not yet in the engine (tokenizing) and engine requests of batch items
    are both load; each is a lower bound of the replica's queue, so the larger is taken.
    """
    replicas = set().union(
        *(metrics.get(k, {}) for k in (ENGINE_RUNNING, ENGINE_WAITING, ADMITTED))
    )
    depths = {}
    for replica in replicas:
        engine = metrics.get(ENGINE_RUNNING, {}).get(replica, 0.0)
        engine += metrics.get(ENGINE_WAITING, {}).get(replica, 0.0)
        depths[replica] = max(engine, metrics.get(ADMITTED, {}).get(replica, 0.0))
    return depths


def desired_replicas(
    serve_requests: float,
    serve_queued: float,
    depths: dict[Any, float],
    target_per_replica: float,
    bounds: tuple[int, int],
) -> int:
    """Replicas needed to hold the whole queue at ``target_per_replica`` each.

    The queue is what waits at Ray Serve's proxies (``serve_queued``) plus every replica's own
    queue; never less than what Ray Serve counts itself (``serve_requests``: queued + ongoing),
    so a replica that has not reported yet still counts.
    """
    demand = max(serve_requests, serve_queued + sum(depths.values()))
    low, high = bounds
    return min(max(math.ceil(demand / target_per_replica), low), high)


def queue_depth_policy(ctx: Any) -> tuple[int, dict[str, Any]]:
    """Ray Serve custom autoscaling policy (``ray.serve.config.AutoscalingContext`` in).

    Configure it in ``autoscaling_config.policy.policy_function`` as
    ``serve_app.serving.autoscaling:queue_depth_policy``; ``target_ongoing_requests`` is the queue
    each replica should hold.
    """
    depths = replica_queue_depths(ctx.aggregated_metrics or {})
    queued = ctx.total_queued_requests or 0.0
    desired = desired_replicas(
        ctx.total_num_requests,
        queued,
        depths,
        ctx.config.get_target_ongoing_requests(),
        (ctx.capacity_adjusted_min_replicas, ctx.capacity_adjusted_max_replicas),
    )
    depth = queued + sum(depths.values())
    # The controller calls this every 0.1 s: say only what changes.
    if desired != ctx.policy_state.get("desired", ctx.target_num_replicas):
        logger.info(
            "queue-depth policy: %.1f queued at proxies + %s at replicas, Ray Serve counts "
            "%.1f -> %d replicas",
            queued,
            {str(r): round(d, 1) for r, d in depths.items()},
            ctx.total_num_requests,
            desired,
        )
    return desired, {"queue_depth": depth, "desired": desired}
