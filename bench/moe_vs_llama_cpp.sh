#!/usr/bin/env bash
# keel against llama.cpp on a mixture-of-experts GGUF, side by side in one run on the same file:
# `keel make-model --shape SHAPE --type TYPE` (random weights, llama SPM vocabulary), then
# `keel bench` and `llama-bench -lm none` alternating (A B A B) for pp512 and tg128 at 2 threads;
# prints the best avg_ts of each side and the ratio, and keeps the raw JSON in OUT.
#
#   bench/moe_vs_llama_cpp.sh [--shape qwen3moe-small] [--type q4_0] [--rounds 2] [--reps 2]
#                             [--out DIR]
# qwen3-30b-a3b at Q4_0 is ~17 GB: it needs that much free memory (the file is read, not mapped).
# Needs build/release (make release) and python3.
# The peer: llama.cpp's llama-bench by default; PEER=ik runs ik_llama.cpp's instead
# (../shared/reference/ik_llama.cpp/bin) with its strongest CPU settings: its defaults (flash
# attention, fused MoE) and run-time repacking (-rtr 1).
set -euo pipefail
cd "$(dirname "$0")/.."

SHAPE=qwen3moe-small
TYPE=q4_0
ROUNDS=2
REPS=2
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --shape) SHAPE="$2"; shift ;;
    --type) TYPE="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --reps) REPS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    *) echo "usage: $0 [--shape S] [--type T] [--rounds N] [--reps N] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done

KEEL=${KEEL:-build/release/tools/keel}
PEER=${PEER:-llama}
case "$PEER" in
  llama) LLAMA_DIR=${LLAMA_DIR:-../shared/reference/llama.cpp/bin}; PEER_FLAGS=(-lm none)
         PEER_NAME=llama.cpp ;;
  ik) LLAMA_DIR=${LLAMA_DIR:-../shared/reference/ik_llama.cpp/bin}; PEER_FLAGS=(-rtr 1)
      PEER_NAME=ik_llama.cpp ;;
  *) echo "moe_vs_llama_cpp: PEER must be llama or ik" >&2; exit 2 ;;
esac
VOCAB=${VOCAB:-../shared/vocab/ggml-vocab-llama-spm.gguf}
MODELS=${MODELS:-/tmp/keel-moe-vs-llama}
OUT=${OUT:-$(mktemp -d /tmp/keel-moe-vs-llama.XXXX)}
mkdir -p "$MODELS" "$OUT"
for f in "$KEEL" "$LLAMA_DIR/llama-bench" "$VOCAB"; do
  [ -e "$f" ] || { echo "moe_vs_llama_cpp: missing $f" >&2; exit 1; }
done

M="$MODELS/$SHAPE-$TYPE.gguf"
[ -e "$M" ] || "$KEEL" make-model --shape "$SHAPE" --type "$TYPE" --vocab "$VOCAB" -o "$M"

for r in $(seq 1 "$ROUNDS"); do
  echo "round $r: keel" >&2
  "$KEEL" bench -m "$M" -t 2 -p 512 -n 128 -r "$REPS" -o json > "$OUT/keel-r$r.json" \
    2> "$OUT/keel-r$r.log"
  echo "round $r: $PEER_NAME" >&2
  "$LLAMA_DIR/llama-bench" -m "$M" -t 2 -p 512 -n 128 -r "$REPS" "${PEER_FLAGS[@]}" -o json \
    > "$OUT/llama-r$r.json" 2> "$OUT/llama-r$r.log"
done

PYTHONPATH=bench/lib python3 - "$OUT" "$SHAPE" "$TYPE" "$PEER_NAME" <<'PY'
import glob, os, sys
from best_ts import best_ts
out, shape, typ, peer = sys.argv[1:5]
def best(pattern, test):
    return best_ts(out, pattern, test)
print(f"| {shape} {typ}, 2 threads | keel t/s | {peer} t/s | keel / {peer} |")
print("|---|---|---|---|")
for test in ["pp512", "tg128"]:
    k, l = best("keel-r*.json", test), best("llama-r*.json", test)
    ratio = f"{k / l:.2f}x" if k and l else "-"
    print(f"| {test} | {k if k is None else round(k, 1)} | {l if l is None else round(l, 1)} | {ratio} |")
print(f"raw results: {out}")
PY
