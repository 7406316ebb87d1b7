#!/usr/bin/env bash
# scripts/bench-firestore-pace.sh measures, on the Firestore emulator with
# the store's pace on (one commit a second per shard document), the figure
# Firestore bills and a document's one write a second limits: shard
# documents committed per acknowledged increment (bench's "shard
# commits/write" column), for the engine path against the naive path
# (the seed's way through the store: each increment its own commit of
# one random shard document, 1.0), measured in the same run:
#
#   1. 100,000 counters picked with Zipf s=1.1, 64 clients (a counter's
#      creation by its first write is counted as the one shard document
#      that write needed: see bench's ShardCommits);
#   2. one hot counter of 16 shards, 64 clients.
#
#   scripts/bench-firestore-pace.sh          # 15 s runs; DURATION=3s for a quick look
#   scripts/bench-firestore-pace.sh --page   # and write the output into docs/BENCHMARKS.md
#
# It starts its own emulator on a free loopback port and stops it at the
# end; scripts/ensure-firestore.sh says how to install it. The hot
# counter through three servers is TestPaceAcrossServers's figures mode
# (docs/FIRESTORE.md): bench drives one process.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${DURATION:-15s}
page=""
[ "${1:-}" = "--page" ] && page=1
bash scripts/ensure-firestore.sh >/dev/null

tmp=$(mktemp -d)
emulator=
cleanup() {
  [ -z "$emulator" ] || kill -- "-$emulator" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
source scripts/firestore-emulator.sh
start_firestore_emulator "$tmp"
go build -o "$tmp/shardcounter" ./cmd/shardcounter
sc=$tmp/shardcounter
common=(--clients 64 --duration "$duration" --shards 16 --path naive --path engine --keep-counters)
out=$tmp/out.txt

{
  echo "# Model name: $(lscpu | sed -n 's/^Model name: *//p'); $(nproc) cores; $(go env GOVERSION); $(java -version 2>&1 | head -1)"
  echo "## 1. 100,000 counters, Zipf s=1.1, pacing 1 s; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "\$ shardcounter bench --store firestore://bench-pace-zipf ${common[*]} --counters 100000 --zipf 1.1"
  "$sc" bench --store firestore://bench-pace-zipf "${common[@]}" --counters 100000 --zipf 1.1
  echo
  echo "## 2. one hot counter, 16 shards, pacing 1 s; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "\$ shardcounter bench --store firestore://bench-pace-hot ${common[*]} --counters 1"
  "$sc" bench --store firestore://bench-pace-hot "${common[@]}" --counters 1
  echo
  echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out"
[ -z "$page" ] && exit 0

# The page's section (scripts/pagesection.py: from its marker to the next
# script's or the end) is this script's, rewritten on each run.
python3 - docs/BENCHMARKS.md "$out" "$(date -u +%Y-%m-%d)" <<'PY'
import sys
sys.path.insert(0, "scripts")
import pagesection
page, out, day = sys.argv[1:]
pagesection.rewrite(page, "bench-firestore-pace.sh", [
    "", "## Firestore, paced: shard-document commits per increment", "",
    f"Measured {day} by `scripts/bench-firestore-pace.sh --page` on the Firestore emulator (its own,",
    "on a free port), the store's pace on (one commit a second per shard document, as `serve` keeps",
    "it): the engine path against the naive one, which is the seed's way through the store (each",
    "increment its own commit of one random shard document). `shard commits/write` is the figure",
    "Firestore bills and a document's one write a second limits: shard documents committed during",
    "the load per acknowledged increment (a counter the engine creates with its first write counts",
    "as the one document that write needed). The emulator is not production: read the ratios.",
    "", *pagesection.fenced(out)])
PY
