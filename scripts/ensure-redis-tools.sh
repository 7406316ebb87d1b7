#!/bin/sh
# ensure-redis-tools.sh makes the command-line clients available: redis-cli
# and redis-benchmark for the RESP front end's tests (resp/server) and
# scripts/bench-resp.sh, and curl, and all three for the README's examples,
# which tests/readme runs as written. It installs Debian's redis-tools and
# curl when one of them is not on PATH. Idempotent, and instant when all
# are there.
set -eu
need=
command -v redis-cli >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1 || need="$need redis-tools"
command -v curl >/dev/null 2>&1 || need="$need curl"
if [ -z "$need" ]; then
	exit 0
fi
SUDO=
if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
# shellcheck disable=SC2086 # a list of package names
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $need
for b in redis-cli redis-benchmark curl; do
	command -v "$b" >/dev/null 2>&1 || { echo "ensure-redis-tools.sh: $b still not on PATH after installing$need" >&2; exit 1; }
done
