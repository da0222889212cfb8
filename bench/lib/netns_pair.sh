# Sourced by the benches that put a process on another "host": make_netns_pair NS_PREFIX
# NET_PREFIX creates a network namespace joined to this one by a veth pair and sets NS (its
# name), VA / VB (the pair's ends here and there) and NET (a /24 prefix: ${NET}1 here, ${NET}2
# there). The namespace and the link are removed on exit, after processes.sh's cleanup (source
# it first).
make_netns_pair() {  # NS_PREFIX NET_PREFIX (e.g. keel-epb 10.214)
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
}
