#!/usr/bin/env bash
# scripts/bench-doors.sh measures the front doors (HTTP, RESP, the drop-in
# commands) each beside its peer in one run, on one disk, 64 clients, and
# prints a table; with --page it also writes that table into
# docs/BENCHMARKS.md (the "Front doors" section at its end):
#
#   - HTTP: wrk -t2 -c64 POST /v1/counters/hot/increment {"by":1} against
#     `shardcounter serve` (Pebble, durable) and against cmd/httpbare (a
#     net/http handler that only adds), each a process of its own
#   - RESP INCR: redis-benchmark -c 64 -P 1 and -P 16 against serve's RESP
#     port, redis-server appendfsync always and redis-server appendonly no
#   - in process: 1,000,000 counters, Zipf 1.1 (shardcounter bench, engine
#     path on Pebble) against INCR on Redis appendfsync always
#   - PFADD of PFADD_N distinct members (scripts/pfadd), the rate-limit
#     transaction MULTI INCR INCR EXPIRE EXEC and HINCRBY with a hash per
#     post over 1,000,000 posts, Zipf 1.1 (cmd/respbench) against Redis
#     always
#   - distinct adds over 1,000,000 counters (Zipf 1.1) against SADD, and the
#     ranking mix against ZINCRBY + ZREVRANGE (shardcounter bench)
#   - the peak resident memory of those two in-process runs (1,000,000
#     counters; 1,000,000 distinct counters of 1,000,000 members), from
#     their reports: a table of its own under the first
#
# For the two servers it loads it also prints, from /proc and /metrics, the
# server's CPU µs a request, allocations a request (serve's Go runtime),
# read and write syscalls a request, and requests a commit: the figures
# that say where a request's cost goes.
#
#   scripts/bench-doors.sh            # about 8 minutes on 2 cores
#   scripts/bench-doors.sh --page     # and write docs/BENCHMARKS.md
#   DURATION=3s PFADD_N=1000000 scripts/bench-doors.sh   # a quicker pass
#   ROWS="http resp" scripts/bench-doors.sh              # some rows only
#
# With PROFILE=DIR it also keeps, for each row of the server's, a CPU
# profile of its run (DIR/ROW.cpu, at most the run's first DURATION) and
# the allocations made during it (DIR/ROW.allocs and DIR/ROW.allocs.base:
# go tool pprof -sample_index=alloc_objects -base DIR/ROW.allocs.base
# DIR/ROW.allocs), from serve's --pprof-listen; the in-process rows (zipf,
# distinct) a CPU profile of the whole bench (DIR/ROW.cpu).
#
# Environment: DURATION (10s, each timed run), CLIENTS (64), PFADD_N
# (3000000: a sketch is dense past some 12,000 members, so more only
# lengthens the run; the issue's 10,000,000 takes minutes a target),
# RANK_DURATION (4s, each of the ranking workload's nine runs), N1 and N16 (redis-benchmark requests at -P 1 and -P 16:
# 300000 and 2000000), COUNTERS (1000000), ROWS (all: http resp zipf pfadd
# tx hincrby distinct ranking). Everything it starts is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
page=""
[ "${1:-}" = "--page" ] && page=1
# The page names every override, so that a partial run never passes for a
# whole one.
command="scripts/bench-doors.sh --page"
for v in DURATION CLIENTS PFADD_N RANK_DURATION N1 N16 COUNTERS ROWS; do
  [ -z "${!v:-}" ] || command="$v=\"${!v}\" $command"
done
DURATION=${DURATION:-10s}
CLIENTS=${CLIENTS:-64}
PFADD_N=${PFADD_N:-3000000}
RANK_DURATION=${RANK_DURATION:-4s}
N1=${N1:-300000}
N16=${N16:-2000000}
COUNTERS=${COUNTERS:-1000000}
ROWS=${ROWS:-http resp zipf pfadd tx hincrby distinct ranking}
PROFILE=${PROFILE:-}
seconds=$(python3 -c 'import re, sys; v, u = re.fullmatch(r"([\d.]+)(ms|s|m)", sys.argv[1]).groups(); print(float(v) * {"ms": 0.001, "s": 1, "m": 60}[u])' "$DURATION")

bash scripts/ensure-redis.sh >/dev/null
bash scripts/ensure-redis-tools.sh >/dev/null
command -v wrk >/dev/null || { echo "bench-doors: wrk is missing: apt-get install wrk" >&2; exit 1; }

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
for cmd in shardcounter httpbare respbench; do go build -o "$tmp/$cmd" "./cmd/$cmd"; done
go build -o "$tmp/pfadd" ./scripts/pfadd

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { # PORT LOG
  for _ in $(seq 150); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done
  echo "bench-doors: nothing answers on port $1: $(tail -3 "$2")" >&2
  exit 1
}
# redis NAME APPENDONLY FSYNC: a redis-server of this run, its files in
# $tmp (the disk serve's Pebble directory is on); sets NAME to its port.
redis() {
  local port
  port=$(freeport)
  mkdir -p "$tmp/$1"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$tmp/$1" --save '' \
    --appendonly "$2" --appendfsync "$3" >"$tmp/$1.log" 2>&1 &
  pids+=($!)
  wait_port "$port" "$tmp/$1.log"
  printf -v "$1" %s "$port"
}
redis always yes always
redis nofsync no always

hport=$(freeport) rport=$(freeport) bport=$(freeport) pport=$(freeport)
profiling=()
if [ -n "$PROFILE" ]; then
  mkdir -p "$PROFILE"
  profiling=(--pprof-listen "127.0.0.1:$pport")
fi
"$tmp/shardcounter" serve --listen "127.0.0.1:$hport" --resp-listen "127.0.0.1:$rport" \
  --store "pebble:$tmp/pebble" --log-level warn "${profiling[@]}" >"$tmp/serve.log" 2>&1 &
serve=$!
pids+=($serve)
"$tmp/httpbare" -listen "127.0.0.1:$bport" >"$tmp/bare.log" 2>&1 &
bare=$!
pids+=($bare)
wait_port "$hport" "$tmp/serve.log"
wait_port "$rport" "$tmp/serve.log"
wait_port "$bport" "$tmp/bare.log"

# snap PID: the process's CPU seconds, read+write syscalls and, for serve,
# its Go allocations, commits and writes committed, on one line.
snap() {
  local cpu io m="- - -"
  cpu=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14+$15)/hz}' "/proc/$1/stat")
  io=$(awk '/^sysc[rw]:/ {n += $2} END {print n}' "/proc/$1/io")
  if [ "$1" = "$serve" ]; then
    m=$(curl -fsS "http://127.0.0.1:$hport/metrics" | awk '
      $1 == "go_memstats_mallocs_total" {a = $2}
      $1 == "shardcounter_flush_duration_seconds_count" {c = $2}
      $1 == "shardcounter_flush_batch_writes_sum" {w = $2}
      END {printf "%d %d %d", a, c, w}')
  fi
  echo "$cpu $io $m"
}
# cost PID BEFORE N: the figures a request of the N served since BEFORE
# (a snap): CPU µs, allocations, syscalls, requests a commit.
cost() {
  python3 - "$3" "$2" "$(snap "$1")" <<'EOF'
import sys
n = float(sys.argv[1])
b, a = sys.argv[2].split(), sys.argv[3].split()
d = lambda i: float(a[i]) - float(b[i])
f = [f"{d(0) / n * 1e6:.1f}", f"{d(2) / n:.1f}" if a[2] != "-" else "-", f"{d(1) / n:.2f}"]
f.append(f"{d(4) / d(3):.1f}" if a[2] != "-" and d(3) else "-")
print(" ".join(f))
EOF
}

# profile_start ROW, profile_end ROW: with PROFILE, serve's CPU profile
# of the run between them (its first DURATION) and its allocations.
profile_start() {
  [ -n "$PROFILE" ] || return 0
  curl -fsS "http://127.0.0.1:$pport/debug/pprof/allocs" >"$PROFILE/$1.allocs.base"
  curl -fsS "http://127.0.0.1:$pport/debug/pprof/profile?seconds=$(python3 -c 'import sys; print(max(1, int(float(sys.argv[1]))))' "$seconds")" >"$PROFILE/$1.cpu" &
  cpuprof=$!
}
profile_end() {
  [ -n "$PROFILE" ] || return 0
  wait "$cpuprof"
  curl -fsS "http://127.0.0.1:$pport/debug/pprof/allocs" >"$PROFILE/$1.allocs"
}

rows="$tmp/rows" # lines: ROW|TARGET|RATE|CPU|ALLOCS|SYSCALLS|REQ/COMMIT
: >"$rows"
memory="$tmp/memory" # lines: memory|ROW|RUN|PEAK MiB|the largest sample's anon and files
: >"$memory"
row() { echo "$1|$2|$3|${4:--}|${5:--}|${6:--}|${7:--}" >>"$rows"; printf '%-34s %-30s %12s %8s %8s %8s %8s\n' "$1" "$2" "$3" "${4:--}" "${5:--}" "${6:--}" "${7:--}"; }
want() { [[ " $ROWS " == *" $1 "* ]]; }
printf '%-34s %-30s %12s %8s %8s %8s %8s\n' row target 'req/s' 'cpu us' allocs syscalls 'req/cmt'

if want http; then
  printf 'wrk.method = "POST"\nwrk.body = %s\nwrk.headers["Content-Type"] = "application/json"\n' "'{\"by\":1}'" >"$tmp/post.lua"
  for t in serve bare; do
    port=$hport pid=$serve name="shardcounter serve (pebble)"
    [ $t = bare ] && port=$bport pid=$bare name="bare net/http handler"
    wrk -t2 -c"$CLIENTS" -d1s -s "$tmp/post.lua" "http://127.0.0.1:$port/v1/counters/hot/increment" >/dev/null # warm
    before=$(snap "$pid")
    out=$(wrk -t2 -c"$CLIENTS" -d"$DURATION" -s "$tmp/post.lua" "http://127.0.0.1:$port/v1/counters/hot/increment")
    if grep -q 'Non-2xx' <<<"$out"; then echo "$out" >&2; exit 1; fi
    n=$(awk '/requests in/ {print $1}' <<<"$out")
    rate=$(awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$out")
    # shellcheck disable=SC2046
    row "HTTP increment, wrk" "$name" "$rate" $(cost "$pid" "$before" "$n")
  done
fi

if want resp; then
  for p in 1 16; do
    n=$N1
    [ $p = 16 ] && n=$N16
    for t in serve always nofsync; do
      port=$rport name="shardcounter serve (pebble)"
      [ $t = always ] && port=$always name="redis appendfsync always"
      [ $t = nofsync ] && port=$nofsync name="redis appendonly no"
      before=$(snap "$serve")
      out=$(redis-benchmark -h 127.0.0.1 -p "$port" -c "$CLIENTS" -n "$n" -P "$p" -t incr -q 2>&1 | tr '\r' '\n' | grep 'requests per second' | tail -1)
      rate=$(awk '{for (i = 1; i < NF; i++) if ($(i+1) == "requests") {printf "%.0f", $i}}' <<<"$out")
      if [ $t = serve ]; then
        # shellcheck disable=SC2046
        row "RESP INCR, redis-benchmark -P $p" "$name" "$rate" $(cost "$serve" "$before" "$n")
      else
        row "RESP INCR, redis-benchmark -P $p" "$name" "$rate"
      fi
    done
  done
fi

# bench ROW FILE ARGS...: shardcounter bench ARGS --json FILE, a row for
# each run it reports.
bench() {
  local name=$1 file=$tmp/$2.json prof=()
  [ -z "$PROFILE" ] || prof=(--cpuprofile "$PROFILE/$2.cpu")
  shift 2
  "$tmp/shardcounter" bench "${prof[@]}" --clients "$CLIENTS" --duration "$DURATION" --keep-counters --json "$file" "$@" >"$tmp/bench.out" 2>&1 ||
    { cat "$tmp/bench.out" >&2; exit 1; }
  python3 - "$file" <<'EOF' | while IFS='|' read -r target rate; do row "$name" "$target" "$rate"; done
import json, sys
for r in json.load(open(sys.argv[1]))["runs"]:
    print(f"{r['name']}|{r['ops_per_sec']:.0f}")
EOF
  # The runs served in this process report its resident memory: a row of
  # the memory table each.
  python3 - "$file" "$name" <<'EOF' | tee -a "$memory"
import json, sys
mib = lambda b: f"{b / (1 << 20):.0f}"
for r in json.load(open(sys.argv[1]))["runs"]:
    m = r.get("memory") or {}
    if m.get("process") == "bench":
        anon, files = m.get("rss_max_anon_bytes"), m.get("rss_max_files_bytes")
        split = f"anon {mib(anon)}, files {mib(files)}" if anon is not None and files is not None else "-"
        print(f"memory|{sys.argv[2]}|{r['name']}|{mib(max(m.get('rss_peak_bytes', 0), m['rss_max_bytes']))}|{split}")
EOF
}
if want zipf; then
  bench "in process, $COUNTERS counters Zipf 1.1" zipf --store "pebble:$tmp/zipf" --path engine --path peer \
    --peer redis-incr --peer-redis "redis://127.0.0.1:$always" --shards 1 --counters "$COUNTERS" --zipf 1.1 --prefill
fi

if want pfadd; then
  for t in serve always; do
    port=$rport name="shardcounter serve (pebble)"
    [ $t = always ] && port=$always name="redis appendfsync always"
    before=$(snap "$serve")
    [ $t = serve ] && profile_start pfadd
    out=$("$tmp/pfadd" -addr "127.0.0.1:$port" -n "$PFADD_N" -c "$CLIENTS" -key "hll:doors")
    [ $t = serve ] && profile_end pfadd
    rate=$(sed -E 's/.* rps=([0-9]+) .*/\1/' <<<"$out")
    if [ $t = serve ]; then
      # shellcheck disable=SC2046
      row "PFADD, $PFADD_N members" "$name" "$rate" $(cost "$serve" "$before" "$PFADD_N")
    else
      row "PFADD, $PFADD_N members" "$name" "$rate"
    fi
  done
fi

# respbench ROW WORKLOAD ARGS...: cmd/respbench against serve and Redis always.
respbench() {
  local name=$1 workload=$2
  shift 2
  for t in serve always; do
    port=$rport target="shardcounter serve (pebble)"
    [ $t = always ] && port=$always target="redis appendfsync always"
    before=$(snap "$serve")
    [ $t = serve ] && profile_start "$workload"
    out=$("$tmp/respbench" -addr "127.0.0.1:$port" -workload "$workload" -clients "$CLIENTS" -duration "$DURATION" -prefix "doors:$workload:" "$@")
    [ $t = serve ] && profile_end "$workload"
    if grep -q 'first error' <<<"$out"; then echo "$out" >&2; exit 1; fi
    rate=$(awk 'NR == 1 {print $3}' <<<"$out")
    n=$(python3 -c 'import sys; print(int(float(sys.argv[1]) * float(sys.argv[2])))' "$rate" "$seconds")
    if [ $t = serve ] && [ -n "$n" ]; then
      # shellcheck disable=SC2046
      row "$name" "$target" "$rate" $(cost "$serve" "$before" "$n")
    else
      row "$name" "$target" "$rate"
    fi
  done
}
want tx && respbench "MULTI INCR INCR EXPIRE EXEC" ratelimit
want tx && respbench "MULTI INCR INCR EXEC" multi
want hincrby && respbench "HINCRBY, a hash per post (1,000,000, Zipf)" hincrby -fields 1000000 -zipf 1.1

if want distinct; then
  bench "distinct adds, $COUNTERS counters Zipf 1.1" distinct --store "pebble:$tmp/distinct" --path engine --path peer \
    --peer redis-sadd --peer-redis "redis://127.0.0.1:$always" --kind distinct --members 1000000 --shards 16 \
    --counters "$COUNTERS" --zipf 1.1 --prefill
fi
if want ranking; then
  # The ranking workload prints its runs (no --json): the mix (90% writes,
  # 10% top 10) and the sorted-set peer are the row.
  "$tmp/shardcounter" bench --workload ranking --store "pebble:$tmp/ranking" --counters 100000 --clients "$CLIENTS" \
    --duration "$RANK_DURATION" --peer redis-zset --peer-redis "redis://127.0.0.1:$always" >"$tmp/ranking.out" 2>&1 ||
    { cat "$tmp/ranking.out" >&2; exit 1; }
  row "ranking mix, 100,000 counters" "pebble, 90% writes, 10% top 10" "$(awk '/^90% writes/ {print $(NF-3)}' "$tmp/ranking.out")"
  row "ranking mix, 100,000 counters" "redis ZINCRBY + ZREVRANGE (always)" "$(awk '/^redis ZINCRBY/ {print $(NF-3)}' "$tmp/ranking.out")"
fi

machine="$(nproc) × $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(uname -sr), $(go env GOVERSION), $(redis-server --version | awk '{print $3}'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "machine: $machine"
[ -z "$page" ] && exit 0

# The page's section (scripts/pagesection.py: from its marker to the next
# script's or the end) is this script's, rewritten on each run, the table
# and then scripts/bench-doors-notes.md, what the profiles say bounds each
# row.
python3 - docs/BENCHMARKS.md "$rows" "$command" "$machine" "$(date -u +%Y-%m-%d)" "$memory" <<'EOF'
import sys
sys.path.insert(0, "scripts")
import pagesection
page, rows, command, machine, day, memory = sys.argv[1:]
marker = pagesection.marker("bench-doors.sh")
heading = "## Front doors: HTTP, RESP and the drop-in commands beside their peers"
text, rest = pagesection.split(open(page).read(), "bench-doors.sh")
out = [text, marker, "", heading, "",
       f"Measured {day} by `{command}` on {machine}. Each row's first target is shardcounter, durable on",
       "Pebble (a write is answered once synced); the ratio is to the row's peers, measured in the same run,",
       "64 clients, every data file on one disk. For shardcounter's server, from /proc and /metrics: CPU µs,",
       "Go allocations and read/write syscalls a request, and requests a commit (one WAL sync).",
       "",
       "| workload | target | req/s | × | server CPU µs/req | allocs/req | syscalls/req | req/commit |",
       "|---|---|---:|---:|---:|---:|---:|---:|"]
groups = {}
for line in open(rows):
    r = line.rstrip("\n").split("|")
    groups.setdefault(r[0], []).append(r)
for name, rs in groups.items():
    base = float(rs[0][2] or 0)
    for r in rs:
        ratio = f"{base / float(r[2]):.2f}×" if r is not rs[0] and float(r[2] or 0) else ""
        out.append(f"| {name} | {r[1]} | {int(float(r[2] or 0)):,} | {ratio} | {r[3]} | {r[4]} | {r[5]} | {r[6]} |")
out.append("")
out.append("× is the row's first target's rate over that peer's.")
out.append("")
mem = [line.rstrip("\n").split("|") for line in open(memory)]
if mem:
    out += ["Resident memory of the in-process rows' shardcounter runs, one process holding the engine, the",
            "Pebble store and the load generator, from before the prefill to the end of the load: the peak is",
            "the kernel's high-water mark (`VmHWM`, reset as the run starts), anon and files the split of the",
            "largest sample (one every 250 ms).", "",
            "| workload | run | peak MiB | largest sample's anon, files MiB |", "|---|---|---:|---|"]
    out += [f"| {m[1]} | {m[2]} | {m[3]} | {m[4]} |" for m in mem]
    out.append("")
out.append(open("scripts/bench-doors-notes.md").read().rstrip("\n"))
pagesection.write(page, text, out[1:], rest)
EOF
