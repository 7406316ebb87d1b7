#!/bin/sh
# ensure-python-redis.sh makes redis-py, Python's Redis client, available
# for the RESP front end's client tests (resp/server's TestRedisPy): Debian's
# python3-redis for Debian's python3 (/usr/bin/python3, or
# $SHARDCOUNTER_PYTHON), installed when the interpreter cannot import it.
# Idempotent, and instant when it can. -I keeps the current directory off
# Python's path: the repository's redis/ directory would shadow the package.
set -eu
PY=${SHARDCOUNTER_PYTHON:-/usr/bin/python3}
if [ -x "$PY" ] && "$PY" -I -c 'import redis' >/dev/null 2>&1; then
	exit 0
fi
SUDO=
if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends python3 python3-redis
"$PY" -I -c 'import redis' || { echo "ensure-python-redis.sh: $PY still cannot import redis after installing python3-redis" >&2; exit 1; }
