#!/usr/bin/env bash
# Installs what the web page's browser test (tests/e2e/test_web_page.py) needs: Debian's
# chromium (Playwright drives it; Playwright's own browser download needs the internet) and
# fonts for it to render text with. Idempotent: does nothing when both are there.
set -euo pipefail

packages=(chromium fonts-dejavu-core fonts-liberation)
log() { printf '[browser] %s\n' "$*" >&2; }

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ] && [ -x /usr/bin/chromium ]; then
  exit 0
fi

sudo=()
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || { log "not root and no sudo: install ${missing[*]} by hand"; exit 1; }
  sudo=(sudo)
fi
log "installing ${missing[*]:-chromium}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
/usr/bin/chromium --version >&2
