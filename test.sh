#!/usr/bin/env bash
# Runs the checks and the whole test suite: installs into .venv if needed, then ruff, mypy and
# pytest (unit, integration with the real vLLM engine on the CPU, end-to-end through
# `serve run`). Extra arguments go to pytest, e.g. `./test.sh -m unit`.
# Without arguments, two pytest runs go side by side (docs/development.md, "Where CI's
# minutes go"): the unit and integration tiers and the benchmark tests that start no Ray
# (marked no_ray) beside the end-to-end and other benchmark tests, which spend about half
# their time waiting on engines and Ray clusters starting.
set -euo pipefail
root=$(cd "$(dirname "$0")" && pwd)
cd "$root"
bash scripts/setup_venv.sh test,bench
venv=${VENV:-$root/.venv}
export PATH="$venv/bin:$PATH"

ruff check serve_app bench tests
ruff format --check serve_app bench tests
mypy
if [ $# -gt 0 ]; then
  exec python -m pytest "$@"
fi
beside_dir=$(mktemp -d)
trap 'rm -rf "$beside_dir"' EXIT
log=$beside_dir/unit.log
# Its own --basetemp: two pytest runs must not clean up each other's numbered temp folders.
python -m pytest -m "not (e2e or bench) or no_ray" -p no:cacheprovider --basetemp "$beside_dir/tmp" \
  >"$log" 2>&1 &
beside=$!
status=0
python -m pytest -m "(e2e or bench) and not no_ray" || status=$?
wait "$beside" || status=$((status ? status : $?))
echo "---- unit and integration tiers (run beside the above) ----"
cat "$log"
exit "$status"
