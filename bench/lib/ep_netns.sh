# Sourced by the expert-parallel benches (moe_ep.sh, moe_ep_prefill.sh) for their --remote mode:
# start_netns_member NS_PREFIX NET_PREFIX starts `keel ep-expert --listen` for shard 1/2 of $M in a
# network namespace joined to this one by a veth pair (another "host"), waits for its ready line
# and sets REMOTE_ADDR (HOST:PORT) and REMOTE_PID; the namespace and the link are removed on exit.
# Needs root, $KEEL, $M, $OUT, and processes.sh sourced first (cleanup, PIDS).
start_netns_member() {  # NS_PREFIX NET_PREFIX (e.g. keel-epb 10.214)
  NS=$1-$$ VA=k${1: -1}a$$ VB=k${1: -1}b$$ NET=$2.$(($$ % 200)).
  net_cleanup() {
    cleanup
    ip netns del "$NS" 2> /dev/null || true
    ip link del "$VA" 2> /dev/null || true
  }
  trap net_cleanup EXIT
  ip netns add "$NS"
  ip link add "$VA" type veth peer name "$VB"
  ip link set "$VB" netns "$NS"
  ip addr add "${NET}1/24" dev "$VA" && ip link set "$VA" up
  ip netns exec "$NS" ip link set lo up
  ip netns exec "$NS" ip addr add "${NET}2/24" dev "$VB"
  ip netns exec "$NS" ip link set "$VB" up
  ip netns exec "$NS" "$KEEL" ep-expert -m "$M" --shard 1/2 --listen "${NET}2:0" -t 1 \
    > "$OUT/remote-member.log" 2>&1 &
  REMOTE_PID=$!
  PIDS+=("$REMOTE_PID")
  for _ in $(seq 1 240); do grep -q KEEL_READY "$OUT/remote-member.log" && break; sleep 0.5; done
  REMOTE_ADDR="${NET}2:$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$OUT/remote-member.log" | head -1)"
}
