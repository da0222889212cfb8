#!/bin/bash
# Long generations under sparse decode: `keel bench-serve --workload long-decode` against one
# `keel serve` (TinyLlama-1.1B shape, Q8_0 random weights with the llama SPM vocabulary and an
# 8K context, 2 threads, f32 KV, a KV pool of exactly one 8K context so kv_cache_usage_perc is
# the share of the context held). One request per policy — dense, Quest and RaaS at L = BUDGET,
# chosen per request with "sparse" in the body — of a 64-token prompt and OUTPUT generated tokens,
# one after the other against the same server. Prints per-token latency (mean ITL) and KV usage
# by output length, per policy. Figures: docs/benchmarks.md.
#   bench/long_decode.sh [MODEL] [OUTPUT] [BUDGET]
# MODEL defaults to /tmp/tl-q8-8k.gguf, made with
#   keel make-model --shape tinyllama-1.1b --type q8_0 --ctx 8192 \
#        --vocab ../shared/vocab/ggml-vocab-llama-spm.gguf -o /tmp/tl-q8-8k.gguf
set -u
K=${KEEL:-build/release/tools/keel}
MODEL=${1:-/tmp/tl-q8-8k.gguf}
OUTPUT=${2:-4096}
BUDGET=${3:-1024}
PORT=8133
OUT=$(mktemp -d /tmp/longdecode.XXXX)
$K serve -m "$MODEL" --port $PORT -t 2 --max-num-seqs 1 > "$OUT/serve.log" 2>&1 &
for i in $(seq 1 200); do curl -s localhost:$PORT/health | grep -q ok && break; sleep 0.5; done
for policy in dense quest raas; do
  $K bench-serve --base-url http://127.0.0.1:$PORT --workload long-decode --input-len 64 \
    --output-len "$OUTPUT" --num-prompts 1 --max-concurrency 1 --seed 1 --skip-test-request \
    --vocab-size 32000 --length-bucket 512 --kv-poll-interval 0.5 \
    --extra-body "{\"sparse\": {\"policy\": \"$policy\", \"budget\": $BUDGET}}" \
    --save-result "$OUT/$policy.json" > /dev/null 2>&1
  echo "$policy: sparse pages released so far $(curl -s localhost:$PORT/metrics |
    grep '^keel:sparse_pages_released_total' | awk '{print $2}')"
done
kill %1
wait
python3 - "$OUT" <<'PY'
import json, sys
runs = {p: json.load(open(f"{sys.argv[1]}/{p}.json")) for p in ("dense", "quest", "raas")}
print("| output tokens | " + " | ".join(f"{p} ITL (ms) | {p} KV (%)" for p in runs) + " |")
print("|---" * (1 + 2 * len(runs)) + "|")
rows = zip(*(r["by_output_length"] for r in runs.values()))
for row in rows:
    cells = [f"{row[0]['first_token']}-{row[0]['end_token'] - 1}"]
    for b in row:
        kv = "-" if b["kv_usage"] is None else f"{100 * b['kv_usage']:.1f}"
        cells += [f"{b['mean_itl_ms']:.1f}", kv]
    print("| " + " | ".join(cells) + " |")
for p, r in runs.items():
    print(f"{p}: output {r['output_throughput']:.2f} tok/s, mean ITL {r['mean_itl_ms']:.1f} ms, "
          f"generated {r['total_output_tokens']}")
PY
rm -rf "$OUT"
