# scripts/bench-lib.sh is what scripts/bench-all.sh (and scripts/bench-ab.sh)
# use; they source it after cd-ing to the repository's root. It checks
# that PostgreSQL and redis-server are there, builds shardcounter into a
# temporary directory, and stops and removes everything it started on exit.
#
#   bench_redis FSYNC VAR   start a redis-server, AOF fsynced FSYNC (always,
#                           everysec), on a free loopback port; VAR gets its URL
#   bench_database VAR      create a database of this run's on the local
#                           PostgreSQL; VAR gets its DSN, whose pool has
#                           CLIENTS connections
#   bench_cluster VAR       start a 3-master Redis Cluster; VAR gets its DSN
#   bench_run WORKLOAD TITLE FILE SHOWN ARGS...
#                           run shardcounter bench ARGS --json for one store
#                           of a workload and record it; SHOWN is the command
#                           as the page shows it
#   bench_page COMMAND      write docs/BENCHMARKS.md from the runs recorded
#
# Environment: CLIENTS (64), SHARDCOUNTER_TEST_POSTGRES (the server, as for
# the tests).

clients=${CLIENTS:-64}
pg_server=${SHARDCOUNTER_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}

bash scripts/ensure-postgres.sh
bash scripts/ensure-redis.sh

tmp=$(mktemp -d)
pids=()
databases=()
bench_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for db in "${databases[@]}"; do
    psql -X -q -d "$pg_server" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap bench_cleanup EXIT

go build -o "$tmp/shardcounter" ./cmd/shardcounter

bench_freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# bench_clusterport prints a free loopback port whose cluster bus port
# (10,000 above it) is free too and within range.
bench_clusterport() {
  python3 -c '
import random, socket
while True:
    p = random.randint(20000, 50000)
    try:
        for q in (p, p + 10000):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
        print(p); break
    except OSError:
        pass'
}

# Not in a $(...) subshell: the server's pid must reach bench_cleanup.
bench_redis() {
  local port dir
  port=$(bench_freeport)
  dir="$tmp/redis-$port"
  mkdir -p "$dir"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly yes --appendfsync "$1" \
    --protected-mode no --logfile "$dir/redis.log" >/dev/null 2>&1 </dev/null &
  pids+=($!)
  for _ in $(seq 100); do
    if redis-cli -p "$port" ping >/dev/null 2>&1; then
      printf -v "$2" 'redis://127.0.0.1:%s' "$port"
      return
    fi
    sleep 0.1
  done
  echo "$0: redis-server (appendfsync $1) did not start: see $dir/redis.log" >&2
  exit 1
}

bench_database() {
  local db="shardcounter_bench_${#databases[@]}_$$"
  psql -X -q -d "$pg_server" -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db"
  databases+=("$db")
  printf -v "$1" '%s' "$(python3 -c 'import sys, urllib.parse as u; p=u.urlsplit(sys.argv[1]); q=u.parse_qsl(p.query); q=[kv for kv in q if kv[0]!="pool_max_conns"]+[("pool_max_conns",sys.argv[3])]; print(u.urlunsplit(p._replace(path="/"+sys.argv[2], query=u.urlencode(q))))' "$pg_server" "$db" "$clients")"
}

# bench_cluster VAR starts a Redis Cluster of three masters (append-only
# file on, appendfsync always) on free loopback ports; VAR gets its
# redis+cluster:// DSN. Not in a $(...) subshell: the pids must reach
# bench_cleanup.
cluster_ports=()
bench_cluster() {
  local port dir addrs=() i
  for i in 1 2 3; do
    port=$(bench_clusterport)
    dir="$tmp/cluster-$port"
    mkdir -p "$dir"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly yes --appendfsync always \
      --cluster-enabled yes --cluster-config-file nodes.conf --protected-mode no --logfile "$dir/redis.log" >/dev/null 2>&1 </dev/null &
    pids+=($!)
    cluster_ports+=("$port")
    addrs+=("127.0.0.1:$port")
  done
  for port in "${cluster_ports[@]}"; do
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-yes >/dev/null
  # Every node must agree, or a client's first view of the slots may be
  # one a node is still changing.
  for port in "${cluster_ports[@]}"; do
    for _ in $(seq 150); do
      redis-cli -p "$port" cluster info 2>/dev/null | grep -q cluster_state:ok && break
      sleep 0.2
    done
  done
  printf -v "$1" 'redis+cluster://%s?addr=%s&addr=%s' "${addrs[0]}" "${addrs[1]}" "${addrs[2]}"
}

bench_cluster_flush() {
  local port
  for port in "${cluster_ports[@]}"; do redis-cli -p "$port" flushall >/dev/null; done
}

# bench_run WORKLOAD TITLE FILE SHOWN ARGS... runs shardcounter bench ARGS
# --json for one store (or the peers) of a workload and records it in the
# manifest benchdoc reads; SHOWN is the command as the page shows it.
manifest=$tmp/manifest.tsv
failures=$tmp/failures.tsv
touch "$failures"
bench_run() {
  local workload=$1 title=$2 file=$3 shown=$4
  shift 4
  echo "== $title: $file" >&2
  # A run that fails is named on the page, with its error, and the others
  # go on: one store's failure should not cost the session's figures.
  if ! "$tmp/shardcounter" bench "$@" --json "$tmp/$file.json" --title "$title" 2>"$tmp/$file.err"; then
    cat "$tmp/$file.err" >&2
    printf '%s\t%s\t%s\t%s\n' "$workload" "$title" "shardcounter bench $shown" "$(tail -1 "$tmp/$file.err")" >>"$failures"
    return 0
  fi
  cat "$tmp/$file.err" >&2
  printf '%s\t%s\t%s\t%s\n' "$workload" "$title" "shardcounter bench $shown" "$tmp/$file.json" >>"$manifest"
}

# bench_page COMMAND writes docs/BENCHMARKS.md and docs/bench/*.svg from the
# runs recorded, with the fsync latency of the disk the stores ran on.
bench_page() {
  rm -f docs/bench/*.svg
  go run ./cmd/benchdoc -manifest "$manifest" -doc docs/BENCHMARKS.md -charts docs/bench -fsync-dir "$tmp" -failures "$failures" -command "$1"
  echo "$0: docs/BENCHMARKS.md and docs/bench/*.svg written" >&2
}
