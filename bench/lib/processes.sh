# Sourced by the bench scripts that run keel servers (cluster.sh, kv_handoff.sh,
# cluster_tinyllama_equality.sh): free loopback ports, waiting for /health, and starting and
# stopping `keel` processes by PID — every one started through start_keel is stopped on exit.
# Needs $KEEL (the keel binary); HEALTH_TRIES (default 240) bounds the wait in 0.5 s steps.
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2> /dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2> /dev/null || true; done
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_health() {  # $1 port
  for _ in $(seq 1 "${HEALTH_TRIES:-240}"); do
    curl -sf "http://127.0.0.1:$1/health" > /dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "$(basename "$0"): server on port $1 did not come up" >&2
  return 1
}
# start_keel LOG ARGS...: runs `$KEEL ARGS --port P` in the background (output to LOG) on a free
# port P and waits for its /health; sets port and SRV (its PID).
start_keel() {
  local log=$1
  shift
  port=$(free_port)
  "$KEEL" "$@" --port "$port" > "$log" 2>&1 &
  SRV=$!
  PIDS+=("$SRV")
  wait_health "$port"
}
stop() {  # $1 PID
  kill "$1" 2> /dev/null || true
  wait "$1" 2> /dev/null || true
}
