#!/usr/bin/env bash
# scripts/redis-tests.sh runs Redis's own tests of the commands shardcounter
# serves against shardcounter's RESP port, in the test suite's external-server
# mode, and prints each test's result. It fetches nothing: it takes the
# directory of a checkout of Redis's 7.2 line (the last under the BSD
# licence), whose test files it runs in place; nothing of them is copied
# into this repository.
#
#   scripts/redis-tests.sh REDIS_DIR [UNIT...]
#
# UNIT is a test file under REDIS_DIR/tests without .tcl; the default is
# unit/type/incr, unit/multi, unit/expire and unit/hyperloglog. Get a checkout with, for example:
#
#   git clone --branch 7.2 --depth 1 https://github.com/redis/redis.git /tmp/redis-7.2
#
# It builds shardcounter, serves a fresh bolt store in a temporary directory
# with --resp-listen and --resp-allow-flush (the suite starts every file with
# FLUSHALL), and runs, from REDIS_DIR (Debian's tcl package gives tclsh):
#
#   tclsh tests/test_helper.tcl --host H --port P --singledb --single UNIT --tags -needs:debug --durable
#
# --durable makes the suite go on after a test that fails with an error rather
# than an assertion (an unknown command), so that every test of a file runs.
# The suite shares one connection between a file's tests, so a test that
# stops inside MULTI (its next command unknown) leaves the next ones in the
# transaction: each test that fails in that run is run again alone (--only
# NAME, a connection of its own), and the summary says which pass so.
#
# Output: the suite's own log for each run in $OUT_DIR (default a temporary
# directory), then one line per test, tab-separated: ok, ok-alone (passes
# when run on its own), err (with the first line of its error when run on
# its own) or ignore (the suite skipped it: a tag, or not supported on an
# external server); the unit; the test's name; the reason.
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}
[ $# -ge 1 ] || usage
redis_dir=$(cd "$1" && pwd) || usage
shift
units=("$@")
[ ${#units[@]} -gt 0 ] || units=(unit/type/incr unit/multi unit/expire unit/hyperloglog)

if [ ! -f "$redis_dir/tests/test_helper.tcl" ]; then
  echo "redis-tests.sh: $redis_dir has no tests/test_helper.tcl: give the directory of a Redis checkout (git clone --branch 7.2 --depth 1 https://github.com/redis/redis.git)" >&2
  exit 2
fi
if ! grep -q 'REDIS_VERSION "7\.2\.' "$redis_dir/src/version.h" 2>/dev/null; then
  echo "redis-tests.sh: warning: $redis_dir is not on Redis's 7.2 line (src/version.h); the results in docs/RESP.md are of 7.2" >&2
fi
for u in "${units[@]}"; do
  [ -f "$redis_dir/tests/$u.tcl" ] || { echo "redis-tests.sh: no tests/$u.tcl in $redis_dir" >&2; exit 2; }
done
command -v tclsh >/dev/null || { echo "redis-tests.sh: tclsh is not on PATH: install Debian's tcl package" >&2; exit 1; }

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
out_dir=${OUT_DIR:-$work/logs}
mkdir -p "$out_dir"
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work/data" "$work/shardcounter"
}
trap cleanup EXIT

(cd "$repo" && go build -o "$work/shardcounter" ./cmd/shardcounter)
"$work/shardcounter" serve --store "bolt:$work/data/shardcounter.db" --listen 127.0.0.1:0 \
  --resp-listen 127.0.0.1:0 --resp-allow-flush >"$work/serve.log" 2>&1 &
server_pid=$!
addr=
for _ in $(seq 100); do
  addr=$(sed -n 's/.*msg="serving the Redis protocol" addr=\([^ ]*\).*/\1/p' "$work/serve.log")
  [ -n "$addr" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$addr" ] || { echo "redis-tests.sh: serve did not start:" >&2; cat "$work/serve.log" >&2; exit 1; }
host=${addr%:*}
port=${addr##*:}

# suite runs the suite on one unit with extra options, its log (without
# colours) in file $1.
suite() {
  local log=$1
  shift
  (cd "$redis_dir" && tclsh tests/test_helper.tcl --host "$host" --port "$port" --singledb \
    --tags -needs:debug --durable "$@") 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >"$log" || true
}

# results prints "STATUS<TAB>NAME<TAB>REASON" for each test of a log.
results() {
  awk '
    /^\[ok\]: /     { name = substr($0, 7); sub(/ \([0-9]+ ms\)$/, "", name); print "ok\t" name "\t"; next }
    /^\[ignore\]: / {
      line = substr($0, 11); i = index(line, ": ")
      if (i == 0) print "ignore\t(the tests of a start_server block)\t" line  # skipped whole
      else print "ignore\t" substr(line, 1, i - 1) "\t" substr(line, i + 2)
      next
    }
    /^\[err\]: /    { name = substr($0, 8); sub(/ in tests\/.*$/, "", name); pending = name; want = 2; reason = ""; next }
    pending != "" {
      # The line after [err] is the error, clipped at the front; the one
      # after it, when it holds that text whole, is better.
      if (want == 2) { reason = $0; want = 1; next }
      if (length($0) > length(reason) && index($0, reason) > 0) reason = $0
      print "err\t" pending "\t" reason; pending = ""; next
    }
  ' "$1"
}

status=0
for u in "${units[@]}"; do
  log="$out_dir/$(echo "$u" | tr / _).log"
  suite "$log" --single "$u"
  if ! grep -q "^\[ok\]\|^\[err\]" "$log"; then
    echo "redis-tests.sh: the suite ran no test of $u; its log:" >&2
    cat "$log" >&2
    status=1
    continue
  fi
  while IFS=$'\t' read -r st name reason; do
    if [ "$st" = err ]; then
      alone="$out_dir/alone.log"
      suite "$alone" --single "$u" --only "$name"
      if grep -qF "[ok]: $name (" "$alone"; then
        st=ok-alone
      else
        # Its own failure, not one an earlier test left it.
        reason=$(results "$alone" | awk -F '\t' -v n="$name" '$1 == "err" && $2 == n { print $3; exit }')
      fi
    fi
    printf '%s\t%s\t%s\t%s\n' "$st" "$u" "$name" "$reason"
  done < <(results "$log")
done
echo "logs: $out_dir" >&2
exit $status
