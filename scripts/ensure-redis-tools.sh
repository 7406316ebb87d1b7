#!/bin/sh
# ensure-redis-tools.sh makes redis-cli and redis-benchmark available for
# the RESP front end's tests (resp/server) and scripts/bench-resp.sh: it
# installs Debian's redis-tools when either is not on PATH. Idempotent, and
# instant when both are there.
set -eu
if command -v redis-cli >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1; then
	exit 0
fi
SUDO=
if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends redis-tools
for b in redis-cli redis-benchmark; do
	command -v "$b" >/dev/null 2>&1 || { echo "ensure-redis-tools.sh: $b still not on PATH after installing redis-tools" >&2; exit 1; }
done
