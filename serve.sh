#!/usr/bin/env bash
# Runs the translation service on this machine.
#   ./serve.sh                 install into .venv if needed, then `serve run` the config for this
#                              machine: serve_config.yaml with an NVIDIA GPU, serve_config.cpu.yaml
#                              without one
#   ./serve.sh CONFIG          the same with another serve config
#   ./serve.sh --demo          offline demo: a tiny random-weight model built locally, no
#                              download; it answers every endpoint, but its "translations" are
#                              nonsense
# The API listens on http://127.0.0.1:8000 (docs at /docs). Ctrl-C stops it.
set -euo pipefail
root=$(cd "$(dirname "$0")" && pwd)
cd "$root"
bash scripts/setup_venv.sh
venv=${VENV:-$root/.venv}
export PATH="$venv/bin:$PATH"

if [ "${1:-}" = "--demo" ]; then
  config=$(python -m serve_app.tools.launcher demo-config "$root/.cache/serve_config.demo.yaml")
  echo "[serve] demo: tiny random model; translations are nonsense by design" >&2
elif [ -n "${1:-}" ]; then
  config=$1
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
  config=serve_config.yaml
else
  config=serve_config.cpu.yaml
fi

python -m serve_app.tools.launcher preflight "$config"
# Ray Serve's settings of the config (RAY_SERVE_*), for Ray's proxy and controller too.
eval "$(python -m serve_app.tools.launcher ray-env "$config")"
# "local" (a fresh local Ray) when Ray's current-cluster file names a cluster that is gone:
# `serve run` would wait for it forever. On the command line only, never in Ray's environment.
address=$(python -m serve_app.tools.launcher ray-address)
echo "[serve] serve run ${address:+--address $address }$config" >&2
exec serve run ${address:+--address "$address"} "$config"
