#!/usr/bin/env bash
# One part of the GPU head-to-head, for one device call (<= 10 min): this project and
# `vllm serve` up at once, on fresh variable texts at 25 users, each round A B B A or B A A B
# on its two halves (journey's --design abba: a drift over the call weighs on both alike),
# after 300 warm-up requests each.
#   bench/gpu/headtohead.sh ORDER OUT [ROUNDS] [REQUESTS] [EXTRA journey flags...]
# ORDER: ours (this project first), vllm (`vllm serve` first), or control (two `vllm serve`
# up at once: what start order alone does to the ratio); --stream for the TTFT run.
# Runs through bench/gpu/run.sh (bundles unpacked, $BENCH_MODEL built).
set -euo pipefail
order=${1:?usage: headtohead.sh ours|vllm|control OUT [ROUNDS] [REQUESTS] [flags...]}
out=${2:?}
rounds=${3:-3}
requests=${4:-1000}
shift $(($# < 4 ? $# : 4))
case $order in
  ours) pair=ray_serve,vllm_serve ;;
  vllm) pair=vllm_serve,ray_serve ;;
  control) pair=vllm_serve,vllm_serve@2 ;;
  *) echo "ORDER is ours, vllm or control" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/run.sh" bash -c 'python3 -m bench.journey --model "$BENCH_MODEL" --load-format dummy \
  --systems "" --head-to-head '"$pair"' --rounds '"$rounds"' --requests '"$requests"' \
  --warmup 300 --concurrency 25 --out '"$out"' "$@"' _ "$@"
