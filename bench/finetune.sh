#!/usr/bin/env bash
# Fine-tuning's cost and its effect on serving (docs/finetune.md, issue 38):
#  1. training tokens/s of `keel finetune` (rank 8, 2 threads) on stories260K and on the
#     TinyLlama-shape pay-off fixture (bench/payoff.sh makes it; skipped with a line when absent);
#  2. a TinyLlama-shape inference stream's TPOT (p50/p99, c = 1) on `keel serve`, alone and while a
#     fine-tuning job (the API, /v1/fine_tuning/jobs) trains a LoRA on the same model in the same
#     process at idle priority — the issue's target: p99 while training <= 1.25x alone — once with
#     `--fine-tuning-yield false` (the trainer runs beside the requests) and once with the default
#     `true` (it pauses while requests run or wait).
#
#   bench/finetune.sh [--epochs N] [--streams N] [--tokens N] [--no-rates]
# --no-rates skips part 1.
set -euo pipefail
cd "$(dirname "$0")/.."
EPOCHS=2 STREAMS=4 TOKENS=64 RATES=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-rates) RATES=0 ;;
    --epochs) EPOCHS="$2"; shift ;;
    --streams) STREAMS="$2"; shift ;;
    --tokens) TOKENS="$2"; shift ;;
    *) echo "usage: $0 [--epochs N] [--streams N] [--tokens N] [--no-rates]" >&2; exit 2 ;;
  esac
  shift
done
KEEL=${KEEL:-build/release/tools/keel}
SMALL=${SMALL:-models/stories260K/stories260K.gguf}
FIX=${FIX:-/tmp/keel-payoff/fixture-tinyllama-1.1b-q4_0.gguf}
TEMPLATE=tests/sdk/fixtures/qa_template.jinja
OUT=${OUT:-$(mktemp -d /tmp/keel-finetune.XXXX)}
mkdir -p "$OUT"
source bench/lib/processes.sh

# Ten short question/answer conversations (the learning test's kind of data).
python3 - "$OUT/train.jsonl" <<'PY'
import json, sys
pairs = [("Who found the ball?", "Tom found the red ball under the big tree in the park."),
         ("What did the cat eat?", "The little cat ate a fish and then went to sleep in the sun."),
         ("Where is the dog?", "The dog is in the garden. He is digging a hole to hide his bone."),
         ("Why was Lily sad?", "Lily was sad because her kite flew away into the sky."),
         ("What did Ben build?", "Ben built a tall tower with blue blocks, and it did not fall."),
         ("Who has a new hat?", "Mom has a new hat. It is pink and has a yellow flower on it."),
         ("What is in the box?", "There is a small toy car in the box. It is shiny and fast."),
         ("How did the bird feel?", "The bird was happy. It sang a song to all of its friends."),
         ("What did Sue see?", "Sue saw a big fish jump out of the water in the lake."),
         ("Where did they go?", "They went to the beach and made a castle out of sand.")]
with open(sys.argv[1], "w") as f:
    for q, a in pairs:
        f.write(json.dumps({"messages": [{"role": "user", "content": q},
                                         {"role": "assistant", "content": a}]}) + "\n")
PY

train_rate() {  # MODEL NAME: the last progress line's tok/s of keel finetune
  "$KEEL" finetune -m "$1" --train "$OUT/train.jsonl" --chat-template-file "$TEMPLATE" \
    --rank 8 --epochs "$EPOCHS" -t 2 -o "$OUT/$2.adapter.gguf" > "$OUT/$2.finetune.log" 2>&1
  local rate
  rate=$(tr '\r' '\n' < "$OUT/$2.finetune.log" | grep -o '[0-9.]* tok/s' | tail -1)
  echo "training $2: $rate ($(tr '\r' '\n' < "$OUT/$2.finetune.log" | grep -c 'step ') progress lines)"
}
if [ "$RATES" = 1 ]; then
  train_rate "$SMALL" stories260K | tee "$OUT/summary.txt"
  if [ -e "$FIX" ]; then train_rate "$FIX" tinyllama-fixture | tee -a "$OUT/summary.txt"; else
    echo "training tinyllama-fixture: skipped ($FIX absent; bench/payoff.sh makes it)" \
      | tee -a "$OUT/summary.txt"; fi
fi

MODEL=$FIX
[ -e "$MODEL" ] || MODEL=$SMALL
file_and_job() {  # uploads the data and starts a 50-epoch job; sets job
  local file
  file=$(curl -sf "http://127.0.0.1:$port/v1/files" -F purpose=fine-tune -F "file=@$OUT/train.jsonl" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  job=$(curl -sf "http://127.0.0.1:$port/v1/fine_tuning/jobs" -H 'Content-Type: application/json' \
    -d "{\"model\": \"$(basename "$MODEL" .gguf)\", \"training_file\": \"$file\", \"hyperparameters\": {\"n_epochs\": 50}}" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
}
status() {
  curl -sf "http://127.0.0.1:$port/v1/fine_tuning/jobs/$job" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])'
}
# One server per setting of --fine-tuning-yield: TPOT alone, then while a job trains.
for YIELD in false true; do
  start_keel "$OUT/serve-yield-$YIELD.log" serve -m "$MODEL" -t 2 --chat-template-file "$TEMPLATE" \
    --state-dir "$OUT/state-$YIELD" --fine-tuning-yield "$YIELD"
  python3 bench/lib/tpot.py "$port" 1 8 > /dev/null  # warm-up
  alone=$(python3 bench/lib/tpot.py "$port" "$STREAMS" "$TOKENS")
  echo "--fine-tuning-yield $YIELD: TPOT alone ($(basename "$MODEL")): $alone" \
    | tee -a "$OUT/summary.txt"
  file_and_job
  for _ in $(seq 1 120); do [ "$(status)" = running ] && break; sleep 0.5; done
  sleep 2  # into its steps
  training=$(python3 bench/lib/tpot.py "$port" "$STREAMS" "$TOKENS")
  still=$(status)
  echo "--fine-tuning-yield $YIELD: TPOT while training (job $still): $training" \
    | tee -a "$OUT/summary.txt"
  curl -sf -X POST "http://127.0.0.1:$port/v1/fine_tuning/jobs/$job/cancel" > /dev/null
  steps=$(curl -sf "http://127.0.0.1:$port/v1/fine_tuning/jobs/$job/events?limit=100" \
    | python3 -c 'import json,sys; d=json.load(sys.stdin)["data"]; print(sum(1 for e in d if e.get("type")=="metrics"))')
  echo "--fine-tuning-yield $YIELD: training steps taken (metrics events, up to 100 read): $steps" \
    | tee -a "$OUT/summary.txt"
  python3 - "$alone" "$training" "$YIELD" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
a, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ratio = lambda k: f"{t[k] / a[k]:.2f}x" if a[k] > 0 else "n/a (tokens arrive together)"
print(f"--fine-tuning-yield {sys.argv[3]}: p99 TPOT while training / alone: {ratio('p99_ms')} "
      f"(median {ratio('median_ms')}; target p99 <= 1.25x)")
PY
  stop "$SRV"
done
echo "out: $OUT"
