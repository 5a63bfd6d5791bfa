#!/usr/bin/env bash
# Install what the explorer's browser test (tests/e2e/test_explorer_e2e.py) needs: Debian's Chromium
# and the npm module playwright-core (no browser download: Playwright drives /usr/bin/chromium).
# The README's test command runs it before pytest. Idempotent and quick when everything is already
# there. Run from anywhere; needs root (or sudo) only to install Chromium, node and npm.
set -euo pipefail
cd "$(dirname "$0")/../.."

export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "setup-browser: need root to run: $*" >&2; exit 1; fi
}

apt_install=()
if [ ! -x /usr/bin/chromium ]; then apt_install+=(chromium); fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then apt_install+=(nodejs npm); fi
if [ ${#apt_install[@]} -gt 0 ]; then
  echo "setup-browser: installing ${apt_install[*]} with apt-get"
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${apt_install[@]}"
else
  echo "setup-browser: chromium and node already installed"
fi

want=$(node -p "require('./package.json').devDependencies['playwright-core']")
have=$(node -p "try { require('./node_modules/playwright-core/package.json').version } catch (e) { '' }")
if [ "$have" != "$want" ]; then
  echo "setup-browser: installing playwright-core $want with npm"
  if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
else
  echo "setup-browser: playwright-core $have already installed"
fi

/usr/bin/chromium --version 2>/dev/null || true
node --version
