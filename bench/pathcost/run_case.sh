#!/bin/bash
# The serving path's cost, one case: a fresh Ray, `serve run` of this project's app over an
# instant engine (bench/pathcost/instant.py), the load generator at 25 users x NREQ (2000)
# variable texts; with PROFILE=1, py-spy samples the replica and the proxy for 15 s.
# usage: bench/pathcost/run_case.sh NAME [ENV=VAL ...]   (results in $PATHCOST_OUT/NAME,
# default .cache/pathcost/NAME; ENV=VAL pairs are exported, e.g. RAY_SERVE_THROUGHPUT_OPTIMIZED=1;
# PATHCOST_STEP_MS=10 paces the engine like a GPU's step loop; LOADGEN_ARGS=--stream: TTFT)
# The config's own RAY_SERVE_* settings are exported too (NO_RAY_ENV=1: not). cpu.txt gets the
# CPU microseconds per request of the translator replica, the proxy and the store's deployment
# (/proc utime+stime over the run), and HAProxy's (RAY_SERVE_ENABLE_HA_PROXY=1): Ray replaces
# its HAProxy process at each reload of its config, so this is the live HAProxy processes'
# utime+stime plus the CPU of the ones Ray's HAProxyManager has reaped (its cutime+cstime).
# PATHCOST_ROOT=DIR measures the code of another checkout (e.g. a `git worktree` of an older
# commit) with this script.
set -u
NAME=$1; shift
root=${PATHCOST_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"
export PYTHONPATH=$root PATH=${VENV:-$root/.venv}/bin:$PATH
for kv in "$@"; do export "$kv"; done
OUT=${PATHCOST_OUT:-$root/.cache/pathcost}/$NAME; mkdir -p "$OUT"
config=$(python -m bench.pathcost.instant "$OUT/serve_config.instant.yaml")
if [ -z "${NO_RAY_ENV:-}" ] && python -m serve_app.tools.launcher ray-env "$config" >$OUT/ray_env.sh 2>/dev/null; then
  . $OUT/ray_env.sh
fi
env | grep '^RAY_SERVE_' > $OUT/env.txt
ray stop --force >/dev/null 2>&1
ray start --head --num-cpus=2 --disable-usage-stats >$OUT/ray_start.log 2>&1
serve run --address auto "$config" >$OUT/serve.log 2>&1 &
SP=$!
for i in $(seq 120); do
  curl -sf http://127.0.0.1:8000/readyz >/dev/null 2>&1 && break; sleep 1
done
curl -s -i -X POST http://127.0.0.1:8000/translate -H 'content-type: application/json' \
  -d '{"text":"hello world, how are you","source_lang":"en","target_lang":"de"}' > $OUT/smoke.txt 2>&1
cpu_ticks() { awk '{print $14 + $15}' /proc/$1/stat; }
REP=$(pgrep -f "ServeReplica:.*:Translator" | head -1); PRX=$(pgrep -f ProxyActor | head -1)
STO=$(pgrep -f "ServeReplica:.*:Store" | head -1)
r0=$(cpu_ticks $REP); p0=$(cpu_ticks $PRX); s0=$(cpu_ticks ${STO:-$PRX})
MGR=$(pgrep -f "HAProxyManager" | head -1)
haproxy_ticks() {  # live HAProxy processes + those the manager has reaped
  local t=$(awk '{print $16 + $17}' /proc/$MGR/stat) h
  for h in $(pgrep -x haproxy); do t=$((t + $(cpu_ticks $h 2>/dev/null || echo 0))); done
  echo $t
}
[ -n "$MGR" ] && h0=$(haproxy_ticks)
python -m bench.loadgen --url http://127.0.0.1:8000 --workload variable --requests ${NREQ:-2000} \
  --concurrency 25 --out $OUT --no-progress ${LOADGEN_ARGS:-} > $OUT/loadgen.log 2>&1 &
LP=$!
if [ -n "${PROFILE:-}" ]; then
  sleep 6
  echo "replica=$REP proxy=$PRX" > $OUT/pids.txt
  top -b -n 2 -d 5 > $OUT/top.txt
  py-spy record --pid $REP --duration 15 --rate 100 --format raw -o $OUT/replica.txt > $OUT/pyspy_r.log 2>&1
  py-spy record --pid $PRX --duration 15 --rate 100 --format raw -o $OUT/proxy.txt > $OUT/pyspy_p.log 2>&1
fi
wait $LP
r1=$(cpu_ticks $REP); p1=$(cpu_ticks $PRX); s1=$(cpu_ticks ${STO:-$PRX}); hz=$(getconf CLK_TCK); n=${NREQ:-2000}
echo "replica_us_per_request $(( (r1 - r0) * 1000000 / hz / n ))" > $OUT/cpu.txt
echo "proxy_us_per_request $(( (p1 - p0) * 1000000 / hz / n ))" >> $OUT/cpu.txt
[ -n "$STO" ] && echo "store_us_per_request $(( (s1 - s0) * 1000000 / hz / n ))" >> $OUT/cpu.txt
[ -n "$MGR" ] && echo "haproxy_us_per_request $(( ($(haproxy_ticks) - h0) * 1000000 / hz / n ))" >> $OUT/cpu.txt
cat $OUT/cpu.txt
kill -INT $SP; sleep 3
ray stop --force >/dev/null 2>&1
# The HAProxy ingress outlives a cluster stopped this way: free its ports for the next case.
python -c "from serve_app.tools.launcher import stop_orphaned_haproxies; stop_orphaned_haproxies()"
kill -9 $SP 2>/dev/null  # `serve run` may keep waiting for the cluster it just lost
wait $SP 2>/dev/null
tail -30 $OUT/loadgen.log
