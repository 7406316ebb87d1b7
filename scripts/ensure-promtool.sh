#!/bin/sh
# ensure-promtool.sh makes promtool available, for the test of deploy/
# that checks the Prometheus alert rules (promtool check rules). It
# installs Debian's prometheus package, which carries promtool, when
# promtool is not on PATH; the package's own server is left stopped and
# disabled, since only the tool is wanted. Idempotent, and instant when
# promtool is there.
set -eu
command -v promtool >/dev/null 2>&1 && exit 0
SUDO=
if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends prometheus
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	$SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
command -v promtool >/dev/null 2>&1 || { echo "ensure-promtool.sh: promtool still not on PATH after installing prometheus" >&2; exit 1; }
