#!/bin/sh
# ensure-postgres.sh makes the PostgreSQL server that the tests use by
# default available on a Debian machine:
#
#   postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
#
# Run it as root. It installs the postgresql package if absent, creates the
# cluster if there is none, starts it if it is not running, lets user
# postgres in from 127.0.0.1 without a password (trust: for a test
# machine only), and waits until the server answers. It is idempotent and
# returns at once when the server already answers.
#
# Tests use $SHARDCOUNTER_TEST_POSTGRES instead when it is set; this script
# is for the default.
set -eu

PORT=5432

log() { echo "ensure-postgres: $*" >&2; }

answers() {
	command -v pg_isready >/dev/null 2>&1 &&
		pg_isready -q -h 127.0.0.1 -p "$PORT" &&
		psql -X -q -w -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -c 'SELECT 1' >/dev/null 2>&1
}

if answers; then
	log "PostgreSQL answers on 127.0.0.1:$PORT as user postgres"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	log "PostgreSQL does not answer on 127.0.0.1:$PORT and this script must run as root to install or start it: sudo $0"
	exit 1
fi

if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ -z "$(ls /usr/lib/postgresql 2>/dev/null)" ]; then
	log "installing the postgresql package"
	export DEBIAN_FRONTEND=noninteractive
	apt-get -o DPkg::Lock::Timeout=600 update -q
	apt-get -o DPkg::Lock::Timeout=600 install -y -q postgresql
fi

# The newest installed server version, and its cluster "main".
VERSION=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
if [ ! -d "/etc/postgresql/$VERSION/main" ]; then
	log "creating cluster $VERSION/main"
	pg_createcluster --port "$PORT" "$VERSION" main
fi

# Trust user postgres from 127.0.0.1 so the passwordless default URL works.
# The line goes first: pg_hba.conf is read top down.
HBA=/etc/postgresql/$VERSION/main/pg_hba.conf
RULE="host all postgres 127.0.0.1/32 trust"
if ! grep -Eq '^host[[:space:]]+all[[:space:]]+(all|postgres)[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust' "$HBA"; then
	log "allowing user postgres from 127.0.0.1 without a password in $HBA"
	{ echo "$RULE # added by shardcounter's ensure-postgres.sh"; cat "$HBA"; } >"$HBA.new"
	chown --reference="$HBA" "$HBA.new"
	chmod --reference="$HBA" "$HBA.new"
	mv "$HBA.new" "$HBA"
	RELOAD=1
fi

CLUSTER_PORT=$(sed -n 's/^[[:space:]]*port[[:space:]]*=[[:space:]]*\([0-9]*\).*/\1/p' "/etc/postgresql/$VERSION/main/postgresql.conf")
if [ "${CLUSTER_PORT:-5432}" != "$PORT" ]; then
	log "cluster $VERSION/main listens on port $CLUSTER_PORT, not $PORT: set SHARDCOUNTER_TEST_POSTGRES=postgres://postgres@127.0.0.1:$CLUSTER_PORT/postgres?sslmode=disable"
	PORT=$CLUSTER_PORT
fi

# pg_ctlcluster without systemd: containers and CI machines have none.
if pg_ctlcluster --skip-systemctl-redirect "$VERSION" main status >/dev/null 2>&1; then
	if [ "${RELOAD:-0}" = 1 ]; then
		pg_ctlcluster --skip-systemctl-redirect "$VERSION" main reload
	fi
else
	log "starting cluster $VERSION/main"
	pg_ctlcluster --skip-systemctl-redirect "$VERSION" main start
fi

for _ in $(seq 1 60); do
	if answers; then
		log "PostgreSQL $VERSION answers on 127.0.0.1:$PORT as user postgres"
		exit 0
	fi
	sleep 1
done
log "PostgreSQL $VERSION did not answer on 127.0.0.1:$PORT within 60s: see /var/log/postgresql/postgresql-$VERSION-main.log"
exit 1
