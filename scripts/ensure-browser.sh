#!/bin/sh
# ensure-browser.sh makes the dashboard's browser test (tests/browser)
# runnable: Debian's Chromium at /usr/bin/chromium, Node.js 20 or later
# with npm, and playwright-core in tests/browser/node_modules exactly as
# tests/browser/package-lock.json pins it. Idempotent, and quick when all
# are there. The test drives Debian's Chromium: Playwright's own browser
# download (npx playwright install) does not work on a machine without
# general network access, and is never used.
set -eu
cd "$(dirname "$0")/.."
SUDO=
if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
fi

need=
[ -x /usr/bin/chromium ] || need="$need chromium"
command -v node >/dev/null 2>&1 || need="$need nodejs"
command -v npm >/dev/null 2>&1 || need="$need npm"
if [ -n "$need" ]; then
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
	# shellcheck disable=SC2086 # a list of package names
	$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $need
fi
[ -x /usr/bin/chromium ] || { echo "ensure-browser.sh: /usr/bin/chromium still missing after install" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
	echo "ensure-browser.sh: node $(node --version) is too old for playwright-core: install Node.js 20 or later" >&2
	exit 1
fi

# playwright-core as locked; npm ci again only when the lock file changed.
cd tests/browser
stamp=node_modules/.ensure-browser-lock
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then
	exit 0
fi
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
cp package-lock.json "$stamp"
