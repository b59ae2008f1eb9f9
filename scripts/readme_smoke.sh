#!/usr/bin/env bash
# Runs the README's own demo, as written, so that a demo broken for new users turns CI red.
#
# README.md marks two fenced code blocks, each on the line after an HTML comment:
#   <!-- ci: demo-serve -->   the command that starts the demo (`./serve.sh --demo`)
#   <!-- ci: demo-curl -->    one or more curl commands
# This script starts the first block in the background (in a process group of its own), waits
# until /readyz answers, runs the second block, checks that every curl's answer is JSON with a
# non-empty "translation", then stops the service (SIGINT to its group, then `ray stop
# --force`). It exits non-zero on any failure and then prints the tail of the service's log.
# Run it from a clean clone: the serve command installs .venv (or $VENV) itself.
#   scripts/readme_smoke.sh
# Environment: SMOKE_URL (http://127.0.0.1:8000), SMOKE_START_TIMEOUT_S (600), VENV.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
url=${SMOKE_URL:-http://127.0.0.1:8000}
start_timeout_s=${SMOKE_START_TIMEOUT_S:-600}
venv=${VENV:-$root/.venv}
work=$(mktemp -d -t readme-smoke.XXXXXX)
log=$work/serve.log
pgid=""

say() { printf '[readme-smoke] %s\n' "$*" >&2; }

# The fenced block that directly follows the line "<!-- ci: NAME -->" (blank lines between
# are allowed); fails if there is none.
block_after() {
  awk -v marker="<!-- ci: $1 -->" '
    function trim(s) { gsub(/^[ \t]+|[ \t\r]+$/, "", s); return s }
    state == 0 { if (trim($0) == marker) state = 1; next }
    state == 1 { if (trim($0) == "") next; if ($0 ~ /^```/) { state = 2; next } exit 1 }
    state == 2 && /^```/ { state = 3; exit 0 }
    state == 2 { print }
    END { exit state == 3 ? 0 : 1 }
  ' README.md
}

stop_service() {
  [ -n "$pgid" ] || return 0
  if kill -0 -- "-$pgid" 2>/dev/null; then
    say "stopping the service (SIGINT to process group $pgid)"
    kill -INT -- "-$pgid" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 -- "-$pgid" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$pgid" 2>/dev/null || true
  fi
  pgid=""
  if [ -x "$venv/bin/ray" ]; then
    "$venv/bin/ray" stop --force >/dev/null 2>&1 || true
  fi
}

finish() {
  local rc=$?
  stop_service
  if [ "$rc" -ne 0 ]; then
    say "FAILED (exit $rc); the service's log ends with:"
    tail -n 80 "$log" >&2 2>/dev/null || true
  fi
  rm -rf "$work"
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT TERM

serve_block=$(block_after demo-serve) || { say "README.md has no block after <!-- ci: demo-serve -->"; exit 2; }
curl_block=$(block_after demo-curl) || { say "README.md has no block after <!-- ci: demo-curl -->"; exit 2; }

if curl -fsS -o /dev/null "$url/readyz" 2>/dev/null; then
  say "something already answers on $url: stop it first"
  exit 2
fi

say "starting: $serve_block"
# In a session and process group of its own (what it starts, serve run and Ray, too), with
# SIGINT as Ctrl-C sends it: a shell starts background commands with SIGINT ignored (and a
# shell cannot undo that), so `serve run` would not shut down on it.
python3 -c '
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.setsid()
os.execvp("bash", ["bash", "-euo", "pipefail", "-c", sys.argv[1]])
' "$serve_block" >"$log" 2>&1 </dev/null &
pgid=$!

say "waiting for $url/readyz (up to ${start_timeout_s}s)"
deadline=$((SECONDS + start_timeout_s))
until curl -fsS -o /dev/null --max-time 5 "$url/readyz" 2>/dev/null; do
  if ! kill -0 "$pgid" 2>/dev/null; then
    wait "$pgid" && rc=0 || rc=$?
    say "the serve command exited (code $rc) before the service was ready"
    exit 1
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    say "not ready within ${start_timeout_s}s"
    exit 1
  fi
  sleep 2
done
say "ready after ${SECONDS}s"

# Each curl of the block goes through check_answer: its output is printed and must be JSON
# with a non-empty "translation".
check_answer() {
  local out
  out=$(command curl "$@")
  printf '%s\n' "$out"
  echo >>"$SMOKE_ANSWERS"
  "$SMOKE_PYTHON" -c '
import json, sys
try:
    answer = json.loads(sys.argv[1])
except ValueError:
    sys.exit("[readme-smoke] the answer is not JSON")
translation = answer.get("translation") if isinstance(answer, dict) else None
if not isinstance(translation, str) or not translation.strip():
    sys.exit("[readme-smoke] the answer has no non-empty \"translation\"")
' "$out"
}
export -f check_answer
export SMOKE_PYTHON=$venv/bin/python
export SMOKE_ANSWERS=$work/answers
: >"$SMOKE_ANSWERS"
say "running the README's curl block"
bash -euo pipefail -c "curl() { check_answer \"\$@\"; }; $curl_block"
answers=$(wc -l <"$SMOKE_ANSWERS")
if [ "$answers" -lt 1 ]; then
  say "the demo-curl block ran no curl"
  exit 1
fi
say "OK: $answers answer(s) with a non-empty translation"
