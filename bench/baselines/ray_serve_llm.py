"""Ray Serve LLM (``ray.serve.llm.build_openai_app``) over the same engine settings: a peer.

    python -m bench.baselines.ray_serve_llm --config CONFIG.json --port 8104

What a Ray user would deploy instead of this project: an OpenAI-compatible app with one vLLM
replica. On the GPU machine it runs on Ray 2.58 (whose ``ray.serve.llm`` works with vLLM 0.26);
put that Ray first on PYTHONPATH for this process.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
from pathlib import Path

from serve_app.core.config import AppConfig

READY = "ray serve llm ready"  # printed once `serve.run` returns: every replica is up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-ongoing-requests", type=int, default=48)
    parser.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    ns = parser.parse_args()

    import ray
    from ray import serve
    from ray.serve.llm import LLMConfig, build_openai_app

    config = AppConfig.model_validate(json.loads(ns.config.read_text()))
    engine_kwargs = config.engine.engine_kwargs()
    model = engine_kwargs.pop("model")
    llm_config = LLMConfig(
        model_loading_config={"model_id": "bench", "model_source": model},
        engine_kwargs=engine_kwargs,
        deployment_config={
            "autoscaling_config": {"min_replicas": 1, "max_replicas": 1},
            "max_ongoing_requests": ns.max_ongoing_requests,
        },
        log_engine_metrics=False,
        # A placement group without GPUs is how Ray Serve LLM is told to run on the CPU.
        **({"placement_group_config": {"bundles": [{"CPU": 1}]}} if ns.device == "cpu" else {}),
    )
    # Logical CPUs: the ingress, the LLM server and its placement group each ask for some;
    # a small machine would leave the deployment pending for ever.
    # address="local": a cluster of its own (its Ray version may differ from a cluster
    # already running here, such as the one of `serve run` in a head-to-head).
    ray.init(address="local", include_dashboard=False, num_cpus=max(8, os.cpu_count() or 1))
    serve.start(http_options={"host": "127.0.0.1", "port": ns.port})
    serve.run(build_openai_app({"llm_configs": [llm_config]}), blocking=False)
    print(READY, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
