#!/usr/bin/env bash
# Weights fork across hosts (issue 14, targets): `keel cluster bench-scale --modes fork` with the
# fork's source TE in one network namespace and the targets (and the bench, which receives the
# transfer probe) in another, joined by a veth pair — two hosts as far as the network goes, on
# this machine. Each run reports the fork's bandwidth against the probe's over the same path.
#   bench/fork_hosts.sh [--model GGUF] [--tes N] [--tls LIST] [--rate RATE] [--runs N]
# --tls: UCX_TLS values to run, one run set each (default "tcp all": tcp forces the network path;
#        all lets UCX pick, which between namespaces of one kernel may still be shared memory).
# --rate: a tc token-bucket limit on both veth ends (e.g. 10gbit) to stand for a NIC; default none.
# The model defaults to the 1.1B Q4_0 shape keel make-model writes (made on first use in /tmp).
# Needs root (ip netns). Namespaces are made with this PID in their names and deleted on exit,
# whatever happens; the bench stops the TEs it started by PID. Figures: docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
KEEL=${KEEL:-build/release/tools/keel}
MODEL=/tmp/keel-store-tinyllama-1.1b-q4_0.gguf
TES=1
TLS_LIST="tcp all"
RATE=
RUNS=1
while [ $# -gt 0 ]; do
  case $1 in
    --model) MODEL=$2; shift ;;
    --tes) TES=$2; shift ;;
    --tls) TLS_LIST=$2; shift ;;
    --rate) RATE=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    *) echo "fork_hosts.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$KEEL" ] || { echo "fork_hosts.sh: build keel first (make release)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "fork_hosts.sh: needs root for ip netns" >&2; exit 1; }
KEEL=$(realpath "$KEEL")
if [ ! -f "$MODEL" ]; then
  "$KEEL" make-model --shape tinyllama-1.1b --type q4_0 -o "$MODEL" >/dev/null 2>&1
fi

A=keel-fork-a-$$
B=keel-fork-b-$$
cleanup() {
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$A"
ip netns add "$B"
ip link add "va$$" type veth peer name "vb$$"
ip link set "va$$" netns "$A"
ip link set "vb$$" netns "$B"
ip -n "$A" addr add 10.77.0.1/24 dev "va$$"
ip -n "$B" addr add 10.77.0.2/24 dev "vb$$"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "va$$" up
ip -n "$B" link set "vb$$" up
if [ -n "$RATE" ]; then
  ip netns exec "$A" tc qdisc add dev "va$$" root tbf rate "$RATE" burst 1mbit latency 50ms
  ip netns exec "$B" tc qdisc add dev "vb$$" root tbf rate "$RATE" burst 1mbit latency 50ms
fi


echo "fork across hosts: source in $A (10.77.0.1), $TES target TE(s) and the probe receiver in" \
  "$B (10.77.0.2); veth${RATE:+, tc rate $RATE}; model $MODEL"
for tls in $TLS_LIST; do
  for run in $(seq 1 "$RUNS"); do
    echo "== UCX_TLS=$tls run $run"
    UCX_TLS=$tls ip netns exec "$B" "$KEEL" cluster bench-scale -m "$MODEL" --tes "$TES" \
      --modes fork --host 10.77.0.2 --source-netns "$A" --source-host 10.77.0.1 |
      grep -E "fork|probe" || echo "(no fork line: run with --verbose by hand)"
  done
done
