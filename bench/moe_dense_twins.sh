#!/usr/bin/env bash
# An MoE model's decode against its two dense twins, side by side in one run (issue 35's targets:
# MoE decode ≥ 0.8× the dense model with the same ACTIVE parameters, ≥ 2.5× the one with the same
# TOTAL parameters): `keel make-model` writes qwen3moe-small and its twins
# qwen3moe-small-dense-active (FFN 4 × 512) and qwen3moe-small-dense-total (FFN 32 × 512) at
# TYPE (random weights, llama SPM vocabulary), then `keel bench` runs the three in turn
# (A B C A B C …) for pp512 and tg128 at 2 threads; prints the best avg_ts of each with the
# ratios, and keeps the raw JSON in OUT. Also llama.cpp's llama-bench on the same three files in
# the same rounds when LLAMA=1, for its own MoE/dense ratios.
#
#   bench/moe_dense_twins.sh [--type q4_0] [--rounds 2] [--reps 2] [--out DIR]
# Needs build/release (make release) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

TYPE=q4_0
ROUNDS=2
REPS=2
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --type) TYPE="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --reps) REPS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    *) echo "usage: $0 [--type T] [--rounds N] [--reps N] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done

KEEL=${KEEL:-build/release/tools/keel}
LLAMA=${LLAMA:-0}
LLAMA_DIR=${LLAMA_DIR:-../shared/reference/llama.cpp/bin}
VOCAB=${VOCAB:-../shared/vocab/ggml-vocab-llama-spm.gguf}
MODELS=${MODELS:-/tmp/keel-moe-vs-llama}
OUT=${OUT:-$(mktemp -d /tmp/keel-moe-twins.XXXX)}
mkdir -p "$MODELS" "$OUT"
for f in "$KEEL" "$VOCAB"; do
  [ -e "$f" ] || { echo "moe_dense_twins: missing $f" >&2; exit 1; }
done
SHAPES=(qwen3moe-small qwen3moe-small-dense-active qwen3moe-small-dense-total)
for s in "${SHAPES[@]}"; do
  m="$MODELS/$s-$TYPE.gguf"
  [ -e "$m" ] || "$KEEL" make-model --shape "$s" --type "$TYPE" --vocab "$VOCAB" -o "$m"
done

for r in $(seq 1 "$ROUNDS"); do
  for s in "${SHAPES[@]}"; do
    m="$MODELS/$s-$TYPE.gguf"
    echo "round $r: keel $s" >&2
    "$KEEL" bench -m "$m" -t 2 -p 512 -n 128 -r "$REPS" -o json > "$OUT/keel-$s-r$r.json" \
      2> "$OUT/keel-$s-r$r.log"
    if [ "$LLAMA" = 1 ]; then
      echo "round $r: llama.cpp $s" >&2
      "$LLAMA_DIR/llama-bench" -m "$m" -t 2 -p 512 -n 128 -r "$REPS" -lm none -o json \
        > "$OUT/llama-$s-r$r.json" 2> "$OUT/llama-$s-r$r.log"
    fi
  done
done

PYTHONPATH=bench/lib python3 - "$OUT" "$TYPE" "${SHAPES[@]}" <<'PY'
import glob, os, sys
from best_ts import best_ts
out, typ, moe, active, total = sys.argv[1:6]
def best(pattern, test):
    return best_ts(out, pattern, test)
for engine in ["keel", "llama"]:
    if not glob.glob(os.path.join(out, f"{engine}-*.json")):
        continue
    print(f"| {engine}, {typ}, 2 threads | {moe} t/s | {active} t/s | {total} t/s | MoE / active | MoE / total |")
    print("|---|---:|---:|---:|---:|---:|")
    for test in ["pp512", "tg128"]:
        m, a, t = (best(f"{engine}-{s}-r*.json", test) for s in (moe, active, total))
        f = lambda x: "-" if x is None else f"{x:.1f}"
        ra = f"{m / a:.2f}x" if m and a else "-"
        rt = f"{m / t:.2f}x" if m and t else "-"
        print(f"| {test} | {f(m)} | {f(a)} | {f(t)} | {ra} | {rt} |")
print(f"raw results: {out}")
PY
