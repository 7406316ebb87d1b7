#!/usr/bin/env bash
# scripts/bench-limit.sh measures rate-limit takes on one hot key
# (docs/BENCHMARKS.md, "Rate limits on a hot key"): shardcounter bench
# --workload limit on Pebble (the default store, in a temporary
# directory), then on a 3-master Redis Cluster (bench-lib.sh's, append-only
# file fsynced always); each run measures CL.THROTTLE over RESP and HTTP
# takes against the sorted-set sliding window and envoyproxy/ratelimit's
# fixed window on a redis-server of its own (appendfsync always), all of
# their files in the same temporary directory. With --page it also writes
# its output into docs/BENCHMARKS.md (the "Rate limits on a hot key"
# section at its end), followed by scripts/bench-limit-notes.md.
#
# The header also gives the disk's fdatasync latency, and the ceiling it
# sets a hot key on Pebble (CLIENTS takes a sync).
#
# Environment: CLIENTS (64), DURATION (10s).
set -euo pipefail
cd "$(dirname "$0")/.."
page=""
[ "${1:-}" = "--page" ] && page=1
source scripts/bench-lib.sh
duration=${DURATION:-10s}
bench_cluster cluster_store

# fsync_latency prints the disk's fdatasync latency for a 4 KiB append
# in $tmp, where the stores keep their files: a durable commit on Pebble
# is one WAL sync, one at a time, so with CLIENTS clients each waiting for
# its take a hot key's takes are at most CLIENTS / that latency a second.
fsync_latency() {
  python3 - "$tmp/fsync-probe" "$clients" <<'PY'
import os, statistics, sys, time
path, clients = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
took = []
for i in range(200):
    os.pwrite(fd, b"x" * 4096, i * 4096)
    t = time.perf_counter()
    os.fdatasync(fd)
    took.append(time.perf_counter() - t)
os.close(fd)
os.remove(path)
med = statistics.median(took)
p90 = sorted(took)[int(len(took) * 0.9)]
print(f"# fdatasync of a 4 KiB append here: median {med * 1e3:.2f} ms, p90 {p90 * 1e3:.2f} ms (200 syncs);"
      f" one sync a round of {clients} takes caps a hot key at {clients / med:,.0f} takes/s")
PY
}

out=$tmp/limit.txt
{
  echo "# $(lscpu | grep 'Model name' | sed 's/ \{2,\}/ /g'); $(nproc) cores; $(go env GOVERSION); redis $(redis-server --version | awk '{print $3}')"
  fsync_latency
  echo "## store: Pebble; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "\$ shardcounter bench --workload limit --clients $clients --duration $duration"
  "$tmp/shardcounter" bench --workload limit --clients "$clients" --duration "$duration"
  echo
  echo "## store: Redis Cluster, 3 masters, appendfsync always; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "\$ shardcounter bench --workload limit --clients $clients --duration $duration --store \$REDIS_CLUSTER"
  "$tmp/shardcounter" bench --workload limit --clients "$clients" --duration "$duration" --store "$cluster_store"
  echo
  echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out"
[ -z "$page" ] && exit 0

# The page's section (scripts/pagesection.py: from its marker to the next
# script's or the end) is this script's, rewritten on each run: the
# output, then scripts/bench-limit-notes.md, which says which targets it
# meets.
python3 - docs/BENCHMARKS.md "$out" "$(date -u +%Y-%m-%d)" <<'PY'
import sys
sys.path.insert(0, "scripts")
import pagesection
page, out, day = sys.argv[1:]
pagesection.rewrite(page, "bench-limit.sh", [
    "", "## Rate limits on a hot key", "",
    f"Measured {day} by `scripts/bench-limit.sh --page`: takes of cost 1 from one key by 64 clients,",
    "under limits far above the load, so that every take is admitted and every side does the whole",
    "work of an admitted take; `verified` says every take was admitted and the key's state",
    "afterwards counts them all. Pebble, the Redis Cluster and the peers' redis-server keep their",
    "files in one temporary directory, on one disk; every Redis fsyncs its append-only file always.",
    "", *pagesection.fenced(out), "",
    open("scripts/bench-limit-notes.md").read().rstrip("\n")])
PY
