#!/bin/sh
# ensure-node-deps.sh makes the Node.js clients of the RESP front end's
# tests available: node and npm (Debian's nodejs and npm packages, when
# missing), and the packages of tests/node installed from its committed
# package-lock.json with npm ci. Idempotent, and quick when everything is
# in place already. node_modules is never committed.
set -eu
cd "$(dirname "$0")/../tests/node"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	SUDO=
	if [ "$(id -u)" != 0 ]; then
		SUDO=sudo
	fi
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
	$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends nodejs npm
fi
# npm ls fails when a package is missing or does not match the lock file.
if [ -d node_modules ] && npm ls --offline >/dev/null 2>&1; then
	exit 0
fi
npm ci --no-audit --no-fund
