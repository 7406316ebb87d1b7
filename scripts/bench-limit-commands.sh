#!/usr/bin/env bash
# scripts/bench-limit-commands.sh counts what a group commit of takes costs
# the Redis Cluster store's masters (scripts/bench-limit-notes.md): it
# starts bench-lib.sh's 3-master cluster (appendfsync always), resets each
# master's command statistics, runs shardcounter bench --workload limit on
# it (CL.THROTTLE, then HTTP takes; the peers run on a redis-server of
# their own), and prints each master's INFO commandstats: the EVALSHA
# calls are the commits (one round trip each), the commands a script ran
# (HMGET, HSET, HINCRBY, GET, SET, TIME) are counted beside them.
#
# Environment: CLIENTS (64), DURATION (5s).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
duration=${DURATION:-5s}
bench_cluster cluster_store
for port in "${cluster_ports[@]}"; do redis-cli -p "$port" config resetstat >/dev/null; done
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "\$ shardcounter bench --workload limit --clients $clients --duration $duration --store \$REDIS_CLUSTER"
"$tmp/shardcounter" bench --workload limit --clients "$clients" --duration "$duration" --store "$cluster_store"
for port in "${cluster_ports[@]}"; do
  echo "## master :$port, INFO commandstats (calls, µs a call)"
  redis-cli -p "$port" info commandstats | tr -d '\r' |
    sed -n 's/^cmdstat_\([^:]*\):calls=\([0-9]*\),usec=[0-9]*,usec_per_call=\([0-9.]*\).*/\1 \2 \3/p' |
    grep -Ev '^(config\|resetstat|ping|hello|script\|load|cluster\|slots|monitor|info) ' | sort -k2,2nr | awk '{printf "  %-14s %8d %10s\n", $1, $2, $3}'
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
