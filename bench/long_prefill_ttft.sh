#!/usr/bin/env bash
# A short request's TTFT while a long prompt prefills on `keel serve` (issue 36 item 3: "a
# 128-token request's TTFT while a 16K prefill runs ≤ 2× its idle value plus one long-prefill
# chunk's time"). The long prompt is prefilled in chunks of --max-batched-tokens at step
# boundaries, and a waiting short request joins the next step.
#
#   bench/long_prefill_ttft.sh [--shape S | --model GGUF] [--long N] [--short N] [--budget N]
# Default: llama-3.2-1b Q4_0 random weights, a 16384-token prompt, 128-token shorts, budget 512.
# Prints the JSON line of bench/lib/long_prefill_ttft.py. The server is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
SHAPE=llama-3.2-1b
MODEL=""
LONG=16384
SHORT=128
BUDGET=512
while [ $# -gt 0 ]; do
  case "$1" in
    --shape) SHAPE="$2"; shift ;;
    --model) MODEL="$2"; shift ;;
    --long) LONG="$2"; shift ;;
    --short) SHORT="$2"; shift ;;
    --budget) BUDGET="$2"; shift ;;
    *) echo "usage: $0 [--shape S | --model GGUF] [--long N] [--short N] [--budget N]" >&2; exit 2 ;;
  esac
  shift
done
KEEL=${KEEL:-build/release/tools/keel}
[ -x "$KEEL" ] || { echo "long_prefill_ttft: missing $KEEL (make release)" >&2; exit 1; }
if [ -z "$MODEL" ]; then
  MODEL=/tmp/keel-long/$SHAPE-q4_0.gguf
  mkdir -p /tmp/keel-long
  [ -e "$MODEL" ] || "$KEEL" make-model --shape "$SHAPE" --type q4_0 -o "$MODEL" > /dev/null
fi
OUT=$(mktemp -d /tmp/keel-long-ttft.XXXX)
source bench/lib/processes.sh
VOCAB=$("$KEEL" info "$MODEL" | sed -n 's/.*tokenizer.ggml.tokens *\[string × \([0-9]*\)\].*/\1/p' | head -1)
VOCAB=${VOCAB:-32000}
start_keel "$OUT/serve.log" serve -m "$MODEL" -t 2 -c $((LONG + 1024)) --max-batched-tokens "$BUDGET"
echo "== $MODEL: $SHORT-token TTFT idle, then beside a $LONG-token prefill (budget $BUDGET)"
python3 bench/lib/long_prefill_ttft.py "$port" "$LONG" "$SHORT" "$VOCAB" "$BUDGET"
