#!/usr/bin/env bash
# scripts/limit-exact.sh checks that a fixed-window rate limit is exact
# across servers sharing one store (cmd/limitexact): 3 `shardcounter serve`
# processes on one store, a limit of 300 per 10 s, 48 clients spread over
# them taking cost 1 from one key through HTTP for 30 s, each take with a
# request id; then the same with one server SIGKILLed mid-run, its clients
# sending their takes in flight again, same request ids, to another
# server. It prints a table of the windows (admitted, refused, duplicates,
# the store's own count, the kill) and fails when a window admitted more
# than 300, when the store's count and the admitted takes disagree, when a
# take sent again is charged again or answers another decision, or when a
# window the run covers whole admitted fewer than 297.
#
# It starts what it needs: a database of its own on the local PostgreSQL
# (scripts/ensure-postgres.sh; SHARDCOUNTER_TEST_POSTGRES as for the tests),
# a Redis Cluster of three masters (scripts/ensure-redis.sh), a Firestore
# emulator (scripts/ensure-firestore.sh checks for it). Not part of
# scripts/test.sh.
#
#   scripts/limit-exact.sh                 # every store, about 4 minutes
#   scripts/limit-exact.sh --page          # and write docs/BENCHMARKS.md's section
#   STORES=postgres scripts/limit-exact.sh
#   STORES='firestore,firestore?shard_write_interval=0' scripts/limit-exact.sh
#                                          # Firestore paced (the default) and not
#
# Environment: STORES (postgres,redis-cluster,firestore), ARGS (more flags
# for cmd/limitexact, e.g. "-duration 60s -clients 96").
set -euo pipefail
cd "$(dirname "$0")/.."
page=""
[ "${1:-}" = "--page" ] && page=1
stores=${STORES:-postgres,redis-cluster,firestore}

case ",$stores," in *,postgres,*) bash scripts/ensure-postgres.sh ;; esac
case ",$stores," in *,redis-cluster,*) bash scripts/ensure-redis.sh ;; esac
case ",$stores," in *,firestore*) bash scripts/ensure-firestore.sh ;; esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/shardcounter" ./cmd/shardcounter
go build -o "$tmp/limitexact" ./cmd/limitexact

command="scripts/limit-exact.sh"
[ "$stores" != "postgres,redis-cluster,firestore" ] && command="STORES='$stores' $command"
[ -n "${ARGS:-}" ] && command="ARGS=\"$ARGS\" $command"
machine="$(nproc) × $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1), $(uname -sr), $(go env GOVERSION), redis $(redis-server --version | awk '{print $3}' | sed 's/^v=//'), $(psql --version | awk '{print $1, $3}')"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
status=0
# shellcheck disable=SC2086
"$tmp/limitexact" -bin "$tmp/shardcounter" -store "$stores" ${ARGS:-} | tee "$tmp/out" || status=$?
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "machine: $machine; load average before $load_before, after $load_after"
[ -z "$page" ] && exit "$status"

# The page's section (scripts/pagesection.py: from its marker to the next
# script's or the end) is this script's, rewritten on each run.
python3 - docs/BENCHMARKS.md "$tmp/out" "$command" "$machine" "$load_before" "$load_after" "$(date -u +%Y-%m-%d)" <<'EOF'
import sys
sys.path.insert(0, "scripts")
import pagesection
page, outfile, command, machine, before, after, day = sys.argv[1:]
marker = pagesection.marker("limit-exact.sh")
text, rest = pagesection.split(open(page).read(), "limit-exact.sh")
body = "\n".join(("#" + l) if l.startswith("## ") or l.startswith("### ") else l for l in open(outfile).read().rstrip("\n").split("\n"))
out = [text, marker, "", "## Rate limits across servers", "",
       f"Measured {day} by `{command}` on {machine}; load average {before} before the run, {after} after.",
       "Three `shardcounter serve` processes share one store; a fixed window of 300 per 10 s (windows at",
       "Unix time multiples of 10 s on the store's clock: docs/LIMITS.md); 48 clients, 16 a server, take",
       "cost 1 from one key over HTTP for 30 s, one request in flight each, every take with a request id of",
       "its own. Each answer is put in the window it was decided in from its `reset_after_ms` (the time",
       "from the decision to its window's end, on the store's clock). In the second run server 0 is",
       "SIGKILLed just after a window starts, while takes are admitted; its clients send the takes they had",
       "in flight again, with the same request ids, to the other servers.",
       "",
       "Columns: *admitted* and *refused* count request ids by their decision (a duplicate answer counts",
       "once, in the window its first attempt was sent in, or the kill's window when the attempt was sent",
       "just before its edge and that window's store count lacks one); *duplicates* are answers marked `duplicate` (the",
       "first attempt was decided, its answer lost with the server), allowed/refused; *sent again* are the",
       "takes sent again after the kill; *store's count* is 300 less the lowest `remaining` an admitted",
       "take answered in the window, what the store had charged, which must equal *admitted* (a take charged",
       "twice, or two takes answered from one count, would part them). After each run every admitted take,",
       "every take sent again and 500 refused ones are sent again with their request ids: each must answer",
       "`duplicate` with its first decision, and a peek must then find all 300 remaining. Firestore paces",
       "each shard document to one commit a second by default (`shard_write_interval`): a hot key then",
       "commits once a second across all servers, which bounds what a window admits; a store written",
       "`firestore?shard_write_interval=0` runs it unpaced.",
       "",
       body]
pagesection.write(page, text, out[1:], rest)
EOF
echo "wrote docs/BENCHMARKS.md"
exit "$status"
