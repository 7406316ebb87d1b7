#!/bin/sh
# ensure-redis.sh makes redis-server available for the Redis store's tests:
# it installs the Debian package redis-server when the binary is not on
# PATH. Idempotent, and instant when redis-server is already there. The
# tests start their own servers; the package's service is not needed.
set -eu
if command -v redis-server >/dev/null 2>&1; then
	exit 0
fi
SUDO=
if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends redis-server
command -v redis-server >/dev/null 2>&1 || { echo "ensure-redis.sh: redis-server still not on PATH after install" >&2; exit 1; }
# The package starts a system service on port 6379; the tests do not use it.
