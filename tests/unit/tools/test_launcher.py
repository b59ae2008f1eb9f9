from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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
    assert ray_env(config) == {"RAY_SERVE_THROUGHPUT_OPTIMIZED": "1", **PROXY_ENV}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["ray-env", str(path)]) == 0


def test_the_production_config_leaves_ray_serve_at_its_defaults() -> None:
    from serve_app.tools.launcher import load_serve_config, ray_env

    # but for the proxy's header cleaning (serving/proxy_headers.py)
    assert ray_env(load_serve_config(ROOT / "serve_config.yaml")) == PROXY_ENV
