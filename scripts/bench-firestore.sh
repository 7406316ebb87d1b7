#!/usr/bin/env bash
# scripts/bench-firestore.sh measures the Firestore store on the emulator
# against seed 000's own way of writing (bench's firestore-increment peer:
# an Increment transform on a random shard document per write, each its
# own commit), with the same 64 clients, in one session. The emulator is
# not production, so read the ratios, not the figures:
#
#   1. one hot counter of 16 shards, the engine's pacing off;
#   2. the same with the store's pace (one commit a second per shard
#      document), through a server, whose /metrics then shows the most
#      commits any one shard document received a second;
#   3. 100,000 counters picked with Zipf s=1.1, pacing off;
#   4. strong reads of a 16-shard counter (p50 and p99 of one read).
#
#   scripts/bench-firestore.sh          # 10 s runs; DURATION=2s for a quick look
#
# It starts its own emulator (gcloud emulators firestore start) on a free
# loopback port and stops it at the end; scripts/ensure-firestore.sh says
# how to install it.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${DURATION:-10s}
bash scripts/ensure-firestore.sh

tmp=$(mktemp -d)
emulator=
server=
cleanup() {
  [ -z "$server" ] || kill "$server" 2>/dev/null || true
  [ -z "$emulator" ] || kill -- "-$emulator" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
source scripts/firestore-emulator.sh
start_firestore_emulator "$tmp"
go build -o "$tmp/shardcounter" ./cmd/shardcounter
sc=$tmp/shardcounter
common=(--clients 64 --duration "$duration" --keep-counters --shards 16)

echo "== machine: $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1 /proc/loadavg), $(java -version 2>&1 | head -1)"
echo "== 1. one hot counter, 16 shards, pacing off, against the seed's way"
"$sc" bench --store firestore://bench-hot --path engine --shard-write-interval 0 "${common[@]}" --peer firestore-increment

echo "== 2. the same paced (1 s a shard document), through a server"
api=$(freeport)
"$sc" serve --store firestore://bench-paced --listen "127.0.0.1:$api" --log-level warn &
server=$!
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$api/readyz" >/dev/null && break; sleep 0.2; done
"$sc" bench --server "http://127.0.0.1:$api" --path http "${common[@]}" --peer firestore-increment --peer-firestore firestore://bench-paced
curl -fs "http://127.0.0.1:$api/metrics" | python3 -c '
import re, sys
took = float(sys.argv[1].rstrip("s"))
counts = [float(m.group(1)) for m in re.finditer(r"^shardcounter_store_shard_document_commits_total\{[^}]*\} (\S+)$", sys.stdin.read(), re.M)]
if not counts:
    sys.exit("no shardcounter_store_shard_document_commits_total in /metrics")
print(f"shard documents committed: {len(counts)}; the most commits of one: {max(counts):.0f} in {took:.1f} s, {max(counts)/took:.2f} a second over the run (an upper bound: set-up and read-back commit too)")
' "$duration"
kill "$server"; wait "$server" 2>/dev/null || true; server=

echo "== 3. 100,000 counters, Zipf s=1.1, pacing off"
# Two invocations, one after the other: the engine's, then the seed's way.
"$sc" bench --store firestore://bench-zipf --path engine --shard-write-interval 0 "${common[@]}" --counters 100000 --zipf 1.1
"$sc" bench --store firestore://bench-zipf-direct --path peer --peer firestore-increment "${common[@]}" --counters 100000 --zipf 1.1

echo "== 4. strong reads of one 16-shard counter"
"$sc" bench --store firestore://bench-reads --path engine --shard-write-interval 0 "${common[@]}" --read-ratio 1 --read-consistency strong
