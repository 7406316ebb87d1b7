# scripts/firestore-emulator.sh, sourced by the scripts that measure the
# Firestore store (bench-firestore.sh, bench-firestore-pace.sh): each
# starts an emulator of its own, so that a run never meets another's
# documents.
#
# freeport prints a free loopback TCP port.
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_firestore_emulator DIR starts the emulator on a free loopback
# port, its log in DIR/emulator.log, waits until it serves, and exports
# FIRESTORE_EMULATOR_HOST. It sets emulator to the pid of the emulator's
# process group: `kill -- -$emulator` stops it and its Java process.
start_firestore_emulator() {
  local dir=$1 port
  port=$(freeport)
  setsid gcloud emulators firestore start --host-port="127.0.0.1:$port" >"$dir/emulator.log" 2>&1 </dev/null &
  emulator=$!
  for _ in $(seq 120); do
    grep -q "Dev App Server is now running" "$dir/emulator.log" && break
    sleep 0.5
  done
  if ! grep -q "Dev App Server is now running" "$dir/emulator.log"; then
    cat "$dir/emulator.log" >&2
    echo "$0: the emulator did not start" >&2
    return 1
  fi
  export FIRESTORE_EMULATOR_HOST=127.0.0.1:$port
}
