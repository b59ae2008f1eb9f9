"""The multi-node configs: the Ray cluster launcher YAML and the KubeRay RayService manifest,
checked against Ray's own schemas and against serve_config.yaml (resources, replica limits)."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from serve_app.tools import kuberay
from serve_app.tools.launcher import load_serve_config
from tests.conftest import ROOT

LAUNCHER = ROOT / "cluster" / "ray-cluster.gpu.yaml"
SHAPE = kuberay.replica_shape(load_serve_config(ROOT / "serve_config.yaml"))


def _ray_pin() -> str:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return next(d.split("==")[1] for d in deps if d.startswith("ray[serve]=="))


@pytest.fixture(scope="module")
def launcher() -> dict[str, Any]:
    return dict(yaml.safe_load(LAUNCHER.read_text()))


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / kuberay.MANIFEST).read_text()))


def _gpu_types(launcher: dict[str, Any]) -> dict[str, dict[str, Any]]:
    types = launcher["available_node_types"]
    return {name: t for name, t in types.items() if t["resources"].get("GPU", 0) > 0}


# --- Ray cluster launcher ---------------------------------------------------------------


def test_launcher_config_passes_rays_schema(launcher: dict[str, Any]) -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config

    validate_config(launcher)
    filled = prepare_config(launcher)  # Ray's own defaults and setup-command merging
    validate_config(filled)
    assert filled["head_node_type"] in filled["available_node_types"]


def test_the_schema_check_catches_a_broken_config(launcher: dict[str, Any]) -> None:
    import jsonschema
    from ray.autoscaler._private.util import validate_config

    broken = {**launcher, "available_node_types": {"x": {"node_config": {}}}}
    with pytest.raises(jsonschema.ValidationError, match="'resources' is a required property"):
        validate_config(broken)


def test_head_is_cpu_only_so_no_replica_lands_there(launcher: dict[str, Any]) -> None:
    head = launcher["available_node_types"][launcher["head_node_type"]]
    assert head["resources"].get("GPU", 0) == 0
    assert SHAPE.num_gpus >= 1  # every replica needs a GPU, which the head does not have
    assert head["max_workers"] == 0


def test_gpu_workers_carry_one_replica_per_gpu(launcher: dict[str, Any]) -> None:
    gpu_types = _gpu_types(launcher)
    assert gpu_types, "no GPU worker node type"
    for name, node_type in gpu_types.items():
        resources = node_type["resources"]
        replicas = resources["GPU"] / SHAPE.num_gpus
        assert replicas == resources["GPU"], f"{name}: not one replica per GPU"
        assert resources["CPU"] >= replicas * SHAPE.num_cpus, f"{name}: too few CPUs"
        assert "g4-" in node_type["node_config"]["machineType"]  # RTX PRO 6000 (GB202)


def test_autoscaler_limits_match_the_deployments_replicas(launcher: dict[str, Any]) -> None:
    gpu_types = _gpu_types(launcher)
    max_gpus = sum(t["max_workers"] * t["resources"]["GPU"] for t in gpu_types.values())
    min_gpus = sum(t["min_workers"] * t["resources"]["GPU"] for t in gpu_types.values())
    assert max_gpus / SHAPE.num_gpus == SHAPE.max_replicas
    assert min_gpus / SHAPE.num_gpus == SHAPE.min_replicas
    assert launcher["max_workers"] == sum(t["max_workers"] for t in gpu_types.values())


def test_setup_commands_install_the_project(launcher: dict[str, Any]) -> None:
    remote_dirs = [dst for dst, src in launcher["file_mounts"].items() if src == "."]
    assert remote_dirs, "the repository is not synced to the nodes"
    commands = "\n".join(launcher["setup_commands"])
    assert f"cd {remote_dirs[0]}" in commands
    assert "pip install -q -r requirements/gpu.txt" in commands
    assert "pip install -q -e ." in commands
    assert launcher["docker"]["image"] == f"rayproject/ray:{_ray_pin()}-py311-gpu"


def test_start_commands_join_the_head_and_export_metrics(launcher: dict[str, Any]) -> None:
    head = " ".join(launcher["head_start_ray_commands"])
    worker = " ".join(launcher["worker_start_ray_commands"])
    assert "ray start --head --port=6379" in head
    assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in head
    assert "--address=$RAY_HEAD_IP:6379" in worker
    for command in (head, worker):
        assert "--metrics-export-port=8080" in command
        # Ray's controller and proxies get the config's RAY_SERVE_* settings at start.
        exports = "launcher ray-env serve_config.yaml)"
        assert command.index(exports) < command.index("ray start")


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def test_every_pod_starts_ray_with_the_configs_ray_serve_settings(
    manifest: dict[str, Any],
) -> None:
    from serve_app.tools.kuberay import IMAGE_HAPROXY
    from serve_app.tools.launcher import ray_env

    expected = ray_env(load_serve_config(ROOT / "serve_config.yaml"), haproxy=IMAGE_HAPROXY)
    assert expected["RAY_SERVE_ENABLE_HA_PROXY"] == "1"
    # The HAProxy that Ray runs is the one the image's Dockerfile writes (tools/haproxy.py).
    assert expected["RAY_SERVE_HAPROXY_BINARY_PATH"] == IMAGE_HAPROXY
    dockerfile = (ROOT / "cluster/kuberay/Dockerfile").read_text()
    assert f"RUN python -m serve_app.tools.haproxy {IMAGE_HAPROXY}\n" in dockerfile
    cluster = manifest["spec"]["rayClusterConfig"]
    pods = [cluster["headGroupSpec"]] + cluster["workerGroupSpecs"]
    for pod in pods:
        (container,) = pod["template"]["spec"]["containers"]
        assert {k: v for k, v in _env(container).items() if k.startswith("RAY_SERVE_")} == expected


# --- KubeRay RayService -----------------------------------------------------------------


def test_manifest_is_up_to_date_with_serve_config() -> None:
    assert kuberay.main(["--check"]) == 0, "run `python -m serve_app.tools.kuberay`"


def test_drift_is_detected_and_regeneration_fixes_it(tmp_path: Path) -> None:
    for rel in (kuberay.SERVE_CONFIG, kuberay.TEMPLATE, kuberay.MANIFEST):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    config = tmp_path / kuberay.SERVE_CONFIG
    config.write_text(config.read_text().replace("max_replicas: 8 ", "max_replicas: 5 "))
    assert kuberay.main(["--check", "--root", str(tmp_path)]) == 1
    assert kuberay.main(["--root", str(tmp_path)]) == 0
    assert kuberay.main(["--check", "--root", str(tmp_path)]) == 0
    regenerated = yaml.safe_load((tmp_path / kuberay.MANIFEST).read_text())
    worker = regenerated["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    assert worker["maxReplicas"] == 5
    assert "max_replicas: 5 " in regenerated["spec"]["serveConfigV2"]


def test_embedded_serve_config_is_serve_config_yaml(manifest: dict[str, Any]) -> None:
    from ray.serve.schema import ServeDeploySchema

    embedded = yaml.safe_load(manifest["spec"]["serveConfigV2"])
    assert embedded == load_serve_config(ROOT / "serve_config.yaml")
    ServeDeploySchema.model_validate(embedded)  # what Ray's dashboard does with it
    assert embedded["proxy_location"] == "EveryNode"
    assert embedded["http_options"]["host"] == "0.0.0.0"  # reachable from the pod's IP


def test_manifest_structure(manifest: dict[str, Any]) -> None:
    assert manifest["apiVersion"] == "ray.io/v1"
    assert manifest["kind"] == "RayService"
    assert manifest["metadata"]["name"]
    spec = manifest["spec"]
    assert spec["upgradeStrategy"]["type"] == "NewCluster"
    cluster = spec["rayClusterConfig"]
    assert cluster["rayVersion"] == _ray_pin()
    assert cluster["enableInTreeAutoscaling"] is True
    assert cluster["autoscalerOptions"]["idleTimeoutSeconds"] > 0
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    for group in groups:
        assert isinstance(group["rayStartParams"], dict)
        for container in group["template"]["spec"]["containers"]:
            assert container["image"] == kuberay.IMAGE
            assert container["readinessProbe"]["exec"]["command"]
            assert container["livenessProbe"]["exec"]["command"]
            assert 8000 in {p["containerPort"] for p in container["ports"]}


def _containers(group: dict[str, Any]) -> list[dict[str, Any]]:
    return list(group["template"]["spec"]["containers"])


def test_head_pod_offers_no_gpu(manifest: dict[str, Any]) -> None:
    head = manifest["spec"]["rayClusterConfig"]["headGroupSpec"]
    assert head["rayStartParams"]["num-gpus"] == "0"
    for container in _containers(head):
        assert "nvidia.com/gpu" not in container["resources"].get("limits", {})


def test_gpu_worker_group_matches_serve_config(manifest: dict[str, Any]) -> None:
    (group,) = manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    (container,) = _containers(group)
    requests, limits = container["resources"]["requests"], container["resources"]["limits"]
    assert requests["nvidia.com/gpu"] == limits["nvidia.com/gpu"] == 1
    replicas_per_pod = limits["nvidia.com/gpu"] / SHAPE.num_gpus
    assert replicas_per_pod == 1
    assert float(limits["cpu"]) >= replicas_per_pod * SHAPE.num_cpus
    assert group["maxReplicas"] * replicas_per_pod == SHAPE.max_replicas
    assert group["minReplicas"] * replicas_per_pod == SHAPE.min_replicas
    assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/dev/shm" in mounts


def test_dockerfile_builds_on_the_pinned_ray() -> None:
    dockerfile = (ROOT / "cluster" / "kuberay" / "Dockerfile").read_text()
    assert f"FROM rayproject/ray:{_ray_pin()}-py311-gpu" in dockerfile
    assert "requirements/gpu.txt" in dockerfile
    assert kuberay.IMAGE in dockerfile


# --- capacity plan ----------------------------------------------------------------------


def test_capacity_plan_arithmetic() -> None:
    from serve_app.tools.capacity import plan

    # 100 req/s at 10 per replica and 70%: ceil(100 / 7) = 15 replicas, 15 nodes + 1 spare.
    result = plan(100, 10)
    assert (result.replicas, result.nodes) == (15, 16)
    assert result.capacity_rps >= 100
    assert plan(100, 10, replicas_per_node=4, spare_nodes=0).nodes == 4
    assert plan(7, 10).replicas == 1
    with pytest.raises(ValueError, match="utilization"):
        plan(100, 10, utilization=1.5)


def test_capacity_cli_prints_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    from serve_app.tools.capacity import main

    assert main(["--rps-per-replica", "10", "--target", "100"]) == 0
    assert "15 replicas on 16 nodes" in capsys.readouterr().out


def test_production_asks_for_keys_and_the_manifest_sets_them(manifest: dict[str, Any]) -> None:
    """Port 8000 of the production config is public: it names its keys' variable (a replica
    without it does not start), and every GPU pod gets it from a Secret that is not optional.
    The CPU config (development, loopback) and so the demo start without keys."""
    args = load_serve_config(ROOT / "serve_config.yaml")["applications"][0]["args"]
    variable = args["security"]["api_keys_env"]
    for group in manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
        (container,) = group["template"]["spec"]["containers"]
        env = {e["name"]: e for e in container["env"]}
        secret = env[variable]["valueFrom"]["secretKeyRef"]
        assert secret["name"]
        assert secret["key"]
        assert not secret.get("optional", False)
    cpu = load_serve_config(ROOT / "serve_config.cpu.yaml")["applications"][0]["args"]
    assert "security" not in cpu
