#!/usr/bin/env bash
# One part of the documents-vs-live-traffic measurement (issue 16), for one device call
# (<= 10 min): this project started once, 25 users of variable texts in alternated rounds
# without / with a 200-paragraph document (20k tokens) translating through /documents (bench/document_load.py).
#   bench/gpu/docload.sh SCHEDULING OUT [ROUNDS] [REQUESTS] [EXTRA document_load flags...]
# SCHEDULING: priority (the default config: documents at vLLM priority 1) or fcfs (off).
# e.g. documents admitted whatever the live load, so that only the engine's priority guards
# live traffic:  bench/gpu/docload.sh priority $OUT/prio-open 3 800 --documents '{"idle_in_flight": 64}'
# Runs through bench/gpu/run.sh (bundles unpacked, $BENCH_MODEL built).
set -euo pipefail
sched=${1:?usage: docload.sh priority|fcfs OUT [ROUNDS] [REQUESTS] [flags...]}
out=${2:?}
rounds=${3:-3}
requests=${4:-800}
shift $(($# < 4 ? $# : 4))
case $sched in
  priority | fcfs) ;;
  *) echo "SCHEDULING is priority or fcfs" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/run.sh" bash -c 'python3 -m bench.document_load --model "$BENCH_MODEL" \
  --load-format dummy --serve-config serve_config.yaml --scheduling '"$sched"' --users 25 \
  --rounds '"$rounds"' --requests '"$requests"' --warmup 50 --doc-paragraphs 200 \
  --out '"$out"' "$@"' _ "$@"
