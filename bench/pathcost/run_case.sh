#!/bin/bash
# The serving path's cost, one case: a fresh Ray, `serve run` of this project's app over an
# instant engine (bench/pathcost/instant.py), the load generator at 25 users x NREQ (2000)
# variable texts; with PROFILE=1, py-spy samples the replica and the proxy for 15 s.
# usage: bench/pathcost/run_case.sh NAME [ENV=VAL ...]   (results in $PATHCOST_OUT/NAME,
# default .cache/pathcost/NAME; ENV=VAL pairs are exported, e.g. RAY_SERVE_THROUGHPUT_OPTIMIZED=1)
set -u
NAME=$1; shift
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export PYTHONPATH=$root PATH=${VENV:-$root/.venv}/bin:$PATH
for kv in "$@"; do export "$kv"; done
OUT=${PATHCOST_OUT:-$root/.cache/pathcost}/$NAME; mkdir -p "$OUT"
config=$(python -m bench.pathcost.instant "$OUT/serve_config.instant.yaml")
ray stop --force >/dev/null 2>&1
ray start --head --num-cpus=2 --disable-usage-stats >$OUT/ray_start.log 2>&1
serve run --address auto "$config" >$OUT/serve.log 2>&1 &
SP=$!
for i in $(seq 120); do
  curl -sf http://127.0.0.1:8000/readyz >/dev/null 2>&1 && break; sleep 1
done
curl -s -i -X POST http://127.0.0.1:8000/translate -H 'content-type: application/json' \
  -d '{"text":"hello world, how are you","source_lang":"en","target_lang":"de"}' > $OUT/smoke.txt 2>&1
python -m bench.loadgen --url http://127.0.0.1:8000 --workload variable --requests ${NREQ:-2000} \
  --concurrency 25 --out $OUT --no-progress > $OUT/loadgen.log 2>&1 &
LP=$!
if [ -n "${PROFILE:-}" ]; then
  sleep 6
  REP=$(pgrep -f ServeReplica | head -1); PRX=$(pgrep -f ProxyActor | head -1)
  echo "replica=$REP proxy=$PRX" > $OUT/pids.txt
  top -b -n 2 -d 5 > $OUT/top.txt
  py-spy record --pid $REP --duration 15 --rate 100 --format raw -o $OUT/replica.txt > $OUT/pyspy_r.log 2>&1
  py-spy record --pid $PRX --duration 15 --rate 100 --format raw -o $OUT/proxy.txt > $OUT/pyspy_p.log 2>&1
fi
wait $LP
kill -INT $SP; sleep 3
ray stop --force >/dev/null 2>&1
wait $SP 2>/dev/null
tail -30 $OUT/loadgen.log
