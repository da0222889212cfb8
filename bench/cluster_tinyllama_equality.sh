#!/usr/bin/env bash
# Greedy outputs through a 1P1D fleet equal colocated outputs token for token, on a TinyLlama-shaped
# model (random q4_0 weights in TinyLlama-1.1B's shape with the llama SPM vocabulary; ~0.6 GB,
# cached under /tmp). Outside CI. For each of a few token-id prompts it asks
# `keel cluster up --colocated 1` and `keel cluster up --prefill 1 --decode 1` for a greedy
# completion with logprobs, and compares the generated tokens (logprobs.tokens: one piece per
# generated token id — the API exposes no ids) and the texts; it prints the largest logprob
# difference too, and how many prompt tokens the decode TE found cached (usage's cached_tokens:
# the KV the prefill TE pushed; the rest it recomputed). Exit 0 when every prompt matches, 1 otherwise.
# Usage: bench/cluster_tinyllama_equality.sh [--model GGUF] [--prompts N] [--max-tokens N]
# Every process started here is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
KEEL=${KEEL:-build/release/tools/keel}
MODEL=/tmp/keel-tinyllama-1.1b-q4_0.gguf
NPROMPTS=4
MAXTOK=32
while [ $# -gt 0 ]; do
  case $1 in
    --model) MODEL=$2; shift ;;
    --prompts) NPROMPTS=$2; shift ;;
    --max-tokens) MAXTOK=$2; shift ;;
    *) echo "cluster_tinyllama_equality.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$KEEL" ] || { echo "cluster_tinyllama_equality.sh: build keel first (make release)" >&2; exit 1; }
OUT=$(mktemp -d /tmp/keel-tl-equality.XXXXXX)
if [ ! -f "$MODEL" ]; then
  "$KEEL" make-model --shape tinyllama-1.1b --type q4_0 \
    --vocab ../shared/vocab/ggml-vocab-llama-spm.gguf -o "$MODEL.part" > "$OUT/make.log" 2>&1
  mv "$MODEL.part" "$MODEL"
fi
HEALTH_TRIES=600
source bench/lib/processes.sh  # (the script runs from the repo root)

# Token-id prompts of 8..64 tokens, seeded, from [3, 32000).
python3 - "$NPROMPTS" > "$OUT/prompts.json" <<'PY'
import json, random, sys
rng = random.Random(12)
n = int(sys.argv[1])
print(json.dumps([[rng.randrange(3, 32000) for _ in range(8 + 56 * i // max(n - 1, 1))]
                  for i in range(n)]))
PY

for fleet in colocated pd; do
  tes=(--colocated 1)
  [ $fleet = pd ] && tes=(--prefill 1 --decode 1)
  start_keel "$OUT/cluster-$fleet.log" cluster up -m "$MODEL" "${tes[@]}" --threads-per-te 1
  python3 - "$port" "$OUT/prompts.json" "$MAXTOK" > "$OUT/$fleet.json" <<'PY'
import json, sys, urllib.request
port, prompts, max_tokens = int(sys.argv[1]), json.load(open(sys.argv[2])), int(sys.argv[3])
out = []
for p in prompts:
    body = {"prompt": p, "max_tokens": max_tokens, "temperature": 0, "logprobs": 1,
            "ignore_eos": True}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    r = json.load(urllib.request.urlopen(req, timeout=600))
    c = r["choices"][0]
    out.append({"text": c["text"], "tokens": c["logprobs"]["tokens"],
                "logprobs": c["logprobs"]["token_logprobs"], "prompt_tokens": len(p),
                "cached": r["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)})
print(json.dumps(out))
PY
  stop "$SRV"
done

python3 - "$OUT" "$MODEL" <<'PY'
import json, sys
out, model = sys.argv[1], sys.argv[2]
a, b = json.load(open(f"{out}/colocated.json")), json.load(open(f"{out}/pd.json"))
ok = True
print(f"model {model}")
print("| prompt | prompt tokens | 1P1D cached (KV from the prefill TE) | generated | "
      "colocated == 1P1D (tokens) | (text) | max |Δ logprob| |")
print("|---|---|---|---|---|---|---|")
for i, (x, y) in enumerate(zip(a, b)):
    same_tokens = x["tokens"] == y["tokens"]
    same_text = x["text"] == y["text"]
    dlp = max((abs(p - q) for p, q in zip(x["logprobs"], y["logprobs"])), default=0.0)
    ok = ok and same_tokens and same_text
    print(f"| {i} | {y['prompt_tokens']} | {y['cached']} | {len(x['tokens'])} | {same_tokens} "
          f"| {same_text} | {dlp:.2e} |")
print("EQUAL" if ok else "DIFFERENT")
sys.exit(0 if ok else 1)
PY
echo "(raw results in $OUT)"
