#!/bin/bash
# TTFT of one 512-token prompt served by `keel serve` (TinyLlama-1.1B shape, Q8_0, 2 threads):
# cold; from the host tier (T1) after other prompts evicted it from a small KV pool; from the disk
# tier (T2) after a server restart; and cold again without tiers. Figures: docs/benchmarks.md.
#   bench/kv_tiers_ttft.sh [MODEL]    (default /tmp/tl-q8.gguf from `keel make-model`)
set -u
K=${KEEL:-build/release/tools/keel}
MODEL=${1:-/tmp/tl-q8.gguf}
D=$(mktemp -d /tmp/kvdisk.XXXX)
PORT=8131
start() {
  $K serve -m $MODEL --port $PORT -t 2 --kv-cache-bytes 40000000 $@ > /dev/null 2>&1 &
  for i in $(seq 1 200); do curl -s localhost:$PORT/health | grep -q ok && break; sleep 0.5; done
}
one() {  # $1 = seed, $2 = label
  $K bench-serve --base-url http://127.0.0.1:$PORT --num-prompts 1 --input-len 512 --output-len 4 \
     --max-concurrency 1 --vocab-size 32000 --skip-test-request --seed $1 2>&1 | grep -i "mean ttft" | sed "s/^/$2 /"
}
start --kv-host-bytes 2000000000 --kv-disk-dir $D --kv-disk-bytes 4000000000
one 1 "cold(seed1)"
for s in 2 3 4; do one $s "other(seed$s)"; done
one 1 "T1-hit(seed1)"
curl -s localhost:$PORT/metrics | grep -E "kv_tier_(hits|decisions|blocks)" | grep -v "^#"
kill %1; wait
start --kv-disk-dir $D --kv-disk-bytes 4000000000
one 1 "T2-after-restart(seed1)"
curl -s localhost:$PORT/metrics | grep -E "kv_tier_(hits|decisions|blocks)" | grep -v "^#"
kill %1; wait
start
one 1 "no-tiers-cold(seed1)"
kill %1; wait
rm -rf $D
echo done
