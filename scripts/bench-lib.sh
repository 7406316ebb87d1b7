# scripts/bench-lib.sh is what the scripts that regenerate docs/BENCHMARKS.md
# share; they source it after cd-ing to the repository's root. It checks
# that PostgreSQL and redis-server are there, builds shardcounter into a
# temporary directory, and stops and removes everything it started on exit.
#
#   bench_redis FSYNC VAR   start a redis-server, AOF fsynced FSYNC (always,
#                           everysec), on a free loopback port; VAR gets its URL
#   bench_database VAR      create a database of this run's on the local
#                           PostgreSQL; VAR gets its DSN, whose pool has
#                           CLIENTS connections
#   bench_doc SECTION ARGS  regenerate SECTION of docs/BENCHMARKS.md with
#                           benchdoc from the workloads recorded by bench_run
#   bench_run NAME TITLE SHOWN ARGS...
#                           run shardcounter bench ARGS --json --svg for one
#                           workload and record it; SHOWN is the command as the
#                           doc shows it
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

# svg_dir is where bench_run writes the charts: docs, or $tmp for a run
# that does not regenerate the doc.
svg_dir=docs
titles=() jsons=() svgs=() cmds=()
bench_run() {
  local name=$1 title=$2 shown=$3
  shift 3
  echo "== $title" >&2
  "$tmp/shardcounter" bench "$@" --json "$tmp/$name.json" --svg "$svg_dir/bench-$name.svg" --title "$title"
  titles+=("$title") jsons+=("$tmp/$name.json") svgs+=("bench-$name.svg")
  cmds+=("shardcounter bench $shown --json $name.json --svg bench-$name.svg")
}

bench_doc() {
  local section=$1 script=$2
  local args=(-doc docs/BENCHMARKS.md -section "$section" -script "$script")
  for i in "${!titles[@]}"; do
    args+=(-title "${titles[$i]}" -json "${jsons[$i]}" -svg "${svgs[$i]}" -cmd "${cmds[$i]}")
  done
  go run ./internal/cmd/benchdoc "${args[@]}"
  echo "$script: docs/BENCHMARKS.md ($section) and its charts regenerated" >&2
}
