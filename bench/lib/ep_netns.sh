# Sourced by the expert-parallel benches (moe_ep.sh, moe_ep_prefill.sh) for their --remote mode:
# start_netns_member NS_PREFIX NET_PREFIX starts `keel ep-expert --listen` for shard 1/2 of $M in a
# network namespace joined to this one by a veth pair (another "host"), waits for its ready line
# and sets REMOTE_ADDR (HOST:PORT) and REMOTE_PID; the namespace and the link are removed on exit.
# Needs root, $KEEL, $M, $OUT, and processes.sh sourced first (cleanup, PIDS).
source "$(dirname "${BASH_SOURCE[0]}")/netns_pair.sh"
start_netns_member() {  # NS_PREFIX NET_PREFIX (e.g. keel-epb 10.214)
  make_netns_pair "$1" "$2"
  ip netns exec "$NS" "$KEEL" ep-expert -m "$M" --shard 1/2 --listen "${NET}2:0" -t 1 \
    > "$OUT/remote-member.log" 2>&1 &
  REMOTE_PID=$!
  PIDS+=("$REMOTE_PID")
  for _ in $(seq 1 240); do grep -q KEEL_READY "$OUT/remote-member.log" && break; sleep 0.5; done
  REMOTE_ADDR="${NET}2:$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$OUT/remote-member.log" | head -1)"
}
