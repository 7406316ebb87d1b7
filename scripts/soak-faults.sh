#!/usr/bin/env bash
# scripts/soak-faults.sh restarts each networked store again and again
# under load, through a running serve, and checks every write: none
# internal, none lost, none doubled; on PostgreSQL and Redis none
# outcome_unknown either (every batch in flight at a restart is settled by
# its marker). It is TestStoreRestartUnderLoad (cmd/shardcounter) run for
# minutes rather than once; it is not part of scripts/test.sh.
#
#   scripts/soak-faults.sh [RESTARTS [EVERY [WRITERS [SUBTESTS]]]]
#   scripts/soak-faults.sh 8 15s 32                # the default: 2 minutes each
#   scripts/soak-faults.sh 8 15s 32 Postgres       # one store only
#
# PostgreSQL is restarted with pg_ctl restart -m fast, Redis SIGKILLed and
# started again on its append-only file (appendfsync always), and on a
# Cluster with wait_replicas=1 a master is SIGKILLed, its replica promoted
# and the old master restarted as its replica. Each subtest logs its
# counts and, per restart, how long writes kept failing after it began.
set -euo pipefail
cd "$(dirname "$0")/.."
restarts=${1:-8} every=${2:-15s} writers=${3:-32} sub=${4:-}
for s in scripts/ensure-postgres.sh scripts/ensure-redis.sh; do bash "$s" >/dev/null; done
run='TestStoreRestartUnderLoad'
[ -n "$sub" ] && run="$run/$sub"
SOAK_RESTARTS=$restarts SOAK_EVERY=$every SOAK_WRITERS=$writers \
  go test ./cmd/shardcounter -run "^$run\$" -count=1 -v -timeout 30m 2>&1 |
  grep -E '^(=== RUN|--- |\s+restart_test.go|ok|FAIL|PASS)'
