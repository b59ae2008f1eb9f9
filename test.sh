#!/usr/bin/env bash
# Runs the checks and the whole test suite: installs into .venv if needed, then ruff, mypy and
# pytest (unit, integration with the real vLLM engine on the CPU, end-to-end through
# `serve run`). Extra arguments go to pytest, e.g. `./test.sh -m unit`.
set -euo pipefail
root=$(cd "$(dirname "$0")" && pwd)
cd "$root"
bash scripts/setup_venv.sh test,bench
venv=${VENV:-$root/.venv}
export PATH="$venv/bin:$PATH"

ruff check serve_app bench tests
ruff format --check serve_app bench tests
mypy
exec python -m pytest "$@"
