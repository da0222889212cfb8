#!/bin/bash
# RAG with position-independent caching (EPIC): `keel bench-serve --workload rag` against
# `keel serve` (TinyLlama-1.1B shape, Q8_0 random weights with the llama SPM vocabulary, 2 threads):
# 8 documents of 256 words, each request 4 of them in random order plus a 16-word question,
# 16 output tokens, one request at a time. Server configurations: prefix cache only (--pic off),
# full recompute (--pic off --no-prefix-cache), and PIC linking (LegoLink-16, LegoLink-2, naive,
# CacheBlend-15).
# Prints mean TTFT over all requests and over the last ones (after every document was compiled
# once), and output throughput. Figures: docs/benchmarks.md.
#   bench/rag_ttft.sh [MODEL] [NUM_PROMPTS]
# MODEL defaults to /tmp/tl-q8-spm.gguf, made with
#   keel make-model --shape tinyllama-1.1b --type q8_0 \
#        --vocab ../shared/vocab/ggml-vocab-llama-spm.gguf -o /tmp/tl-q8-spm.gguf
set -u
K=${KEEL:-build/release/tools/keel}
MODEL=${1:-/tmp/tl-q8-spm.gguf}
N=${2:-24}
PORT=8132
OUT=$(mktemp -d /tmp/ragbench.XXXX)
run() {  # $1 = label, rest = serve flags
  local label=$1
  shift
  $K serve -m "$MODEL" --port $PORT -t 2 "$@" > "$OUT/$label.log" 2>&1 &
  for i in $(seq 1 200); do curl -s localhost:$PORT/health | grep -q ok && break; sleep 0.5; done
  $K bench-serve --base-url http://127.0.0.1:$PORT --endpoint /v1/chat/completions \
    --workload rag --rag-num-docs 8 --rag-docs-per-request 4 --rag-doc-len 256 \
    --rag-question-len 16 --output-len 16 --num-prompts "$N" --max-concurrency 1 --seed 1 \
    --skip-test-request --save-result "$OUT/$label.json" --save-detailed > /dev/null 2>&1
  local linked
  linked=$(curl -s localhost:$PORT/metrics | grep '^keel:pic_tokens_linked_total' | awk '{print $2}')
  kill %1
  wait
  python3 - "$OUT/$label.json" "$label" "$linked" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = [x * 1000 for x in r["ttfts"] if x]
tail = t[len(t) // 3:]
print(f"{sys.argv[2]:<22} mean TTFT {sum(t)/len(t):8.1f} ms   last {len(tail)}: "
      f"{sum(tail)/len(tail):8.1f} ms   output {r['output_throughput']:6.2f} tok/s   "
      f"prompt tokens/req {r['total_input_tokens']/r['completed']:.0f}   linked {sys.argv[3]}")
PY
}
run prefix-only --pic off
run full-recompute --pic off --no-prefix-cache
run legolink-16 --pic marked --pic-link legolink-16
run legolink-2 --pic marked --pic-link legolink-2
run naive --pic marked --pic-link naive
run cacheblend-15 --pic marked --pic-link cacheblend-15
rm -rf "$OUT"
