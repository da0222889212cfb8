#!/usr/bin/env bash
# keel against llama.cpp, side by side in one run on the same GGUF files (TinyLlama-1.1B shape,
# random weights, llama SPM vocabulary), with llama.cpp's reference binaries from
# ../shared/reference/llama.cpp. Prints ratio tables (markdown) and keeps every raw result.
#
#   1. engine: `keel bench` and `llama-bench -lm none` alternating (A B A B), pp512 and tg128 at
#      2 threads and tg64 at 1 thread for Q4_0, Q8_0 and Q4_K; best run of each; keel's roofline
#      (read bandwidth at the same thread count, measured in the same run) gives the decode bound.
#   2. shared cores: tg64 at 2 threads quiet, then with a busy-loop process pinned to CPU 1,
#      both engines alternating; the loss of each.
#   3. serving: `keel serve` and `llama-server -np 16` in turn on Q4_0, `keel bench-serve` as the
#      client: random 256-token prompts / 64 output tokens, streaming, at concurrency 1, 4, 16,
#      and shared-prefix (224-token prefix + 32 unique) at concurrency 4; byte tokens banned
#      (logit_bias) in both, see serve_run.
#
#   bench/vs_llama_cpp.sh [--quick] [--out DIR] [--skip-engine] [--skip-serving]
# --quick: one round and fewer requests (a smoke run, not for docs). Needs build/release (make
# release) and python3. Every process started here is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=2
QUICK=0
OUT=""
DO_ENGINE=1
DO_SERVING=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1; ROUNDS=1 ;;
    --out) OUT="$2"; shift ;;
    --skip-engine) DO_ENGINE=0 ;;
    --skip-serving) DO_SERVING=0 ;;
    *) echo "usage: $0 [--quick] [--out DIR] [--skip-engine] [--skip-serving]" >&2; exit 2 ;;
  esac
  shift
done

KEEL=${KEEL:-build/release/tools/keel}
LLAMA_DIR=${LLAMA_DIR:-../shared/reference/llama.cpp/bin}
VOCAB=${VOCAB:-../shared/vocab/ggml-vocab-llama-spm.gguf}
MODELS=${MODELS:-/tmp/keel-vs-llama}
OUT=${OUT:-$(mktemp -d /tmp/keel-vs-llama.XXXX)}
mkdir -p "$MODELS" "$OUT"
for f in "$KEEL" "$LLAMA_DIR/llama-bench" "$LLAMA_DIR/llama-server" "$VOCAB"; do
  [ -e "$f" ] || { echo "vs_llama_cpp: missing $f" >&2; exit 1; }
done
command -v python3 >/dev/null || { echo "vs_llama_cpp: needs python3" >&2; exit 1; }

PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  return 0
}
trap cleanup EXIT INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

model_path() { echo "$MODELS/tl-$1.gguf"; }
for t in q4_0 q8_0 q4_k; do
  m=$(model_path $t)
  [ -s "$m" ] || "$KEEL" make-model --arch llama --shape tinyllama-1.1b --type $t --vocab "$VOCAB" \
    -o "$m" > /dev/null
done

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
} | tee "$OUT/machine.txt"

keel_bench() {  # $1 model, $2 threads, $3 pp, $4 tg, $5 out json; extra args after
  local m=$1 t=$2 p=$3 n=$4 o=$5
  shift 5
  "$KEEL" bench -m "$m" -t "$t" -p "$p" -n "$n" -r 3 -o json "$@" > "$o" 2> "$o.log"
}
llama_bench() {
  "$LLAMA_DIR/llama-bench" -m "$1" -t "$2" -p "$3" -n "$4" -r 3 -lm none -o json > "$5" 2> "$5.log"
}

if [ $DO_ENGINE = 1 ]; then
  echo "== engine (A B A B, $ROUNDS rounds) =="
  for r in $(seq 1 $ROUNDS); do
    for t in q4_0 q8_0 q4_k; do
      m=$(model_path $t)
      keel_bench "$m" 2 512 128 "$OUT/keel-$t-2t-r$r.json" --roofline
      llama_bench "$m" 2 512 128 "$OUT/llama-$t-2t-r$r.json"
      keel_bench "$m" 1 0 64 "$OUT/keel-$t-1t-r$r.json" --roofline
      llama_bench "$m" 1 0 64 "$OUT/llama-$t-1t-r$r.json"
    done
  done
  echo "== decode with a busy process on CPU 1 =="
  m=$(model_path q8_0)
  for r in $(seq 1 $ROUNDS); do
    keel_bench "$m" 2 0 64 "$OUT/keel-quiet-r$r.json"
    llama_bench "$m" 2 0 64 "$OUT/llama-quiet-r$r.json"
    taskset -c 1 sh -c 'while :; do :; done' &
    HOG=$!
    PIDS+=("$HOG")
    sleep 0.5
    keel_bench "$m" 2 0 64 "$OUT/keel-hog-r$r.json"
    llama_bench "$m" 2 0 64 "$OUT/llama-hog-r$r.json"
    kill "$HOG"
    wait "$HOG" 2> /dev/null || true
  done
fi

serve_run() {  # $1 label (keel|llama), $2 port; runs the client mix into $OUT/serve-$1-*.json
  local label=$1 port=$2 n1=16 n4=48 n16=96
  [ $QUICK = 1 ] && n1=4 n4=8 n16=16
  local url="http://127.0.0.1:$port"
  for i in $(seq 1 600); do
    curl -sf "$url/health" > /dev/null 2>&1 && break
    sleep 0.5
  done
  # logit_bias bans the 256 byte tokens (ids 3..258) for both servers: random weights otherwise
  # emit lone bytes that are not UTF-8, and llama-server ends such a stream with "The model
  # produced output that does not match the expected Content-only format".
  local bias
  bias=$(python3 -c 'import json; print(json.dumps({"logit_bias": {str(i): -100 for i in range(3, 259)}}))')
  local common=(--base-url "$url" --endpoint /v1/completions --prompt-format token-ids
    --min-token-id 100 --vocab-size 32000 --output-len 64 --seed 1 --ignore-eos
    --extra-body "$bias")
  for c in 1 4 16; do
    local n=$n1
    [ $c = 4 ] && n=$n4
    [ $c = 16 ] && n=$n16
    "$KEEL" bench-serve "${common[@]}" --workload random --input-len 256 --num-prompts "$n" \
      --max-concurrency "$c" --save-result "$OUT/serve-$label-c$c.json" \
      > "$OUT/serve-$label-c$c.log" 2>&1 || echo "bench-serve $label c=$c failed (see its log)"
  done
  "$KEEL" bench-serve "${common[@]}" --workload shared-prefix --num-groups 1 --prefix-len 224 \
    --suffix-len 32 --num-prompts "$n4" --max-concurrency 4 \
    --save-result "$OUT/serve-$label-prefix.json" > "$OUT/serve-$label-prefix.log" 2>&1 ||
    echo "bench-serve $label shared-prefix failed (see its log)"
}

if [ $DO_SERVING = 1 ]; then
  echo "== serving (Q4_0) =="
  m=$(model_path q4_0)
  port=$(free_port)
  "$KEEL" serve -m "$m" --host 127.0.0.1 --port "$port" -t 2 > "$OUT/keel-serve.log" 2>&1 &
  SRV=$!
  PIDS+=("$SRV")
  serve_run keel "$port"
  kill "$SRV"
  wait "$SRV" 2> /dev/null || true
  port=$(free_port)
  # --no-jinja: /v1/completions needs no chat template.
  "$LLAMA_DIR/llama-server" -m "$m" --host 127.0.0.1 --port "$port" -t 2 -np 16 -c 8192 \
    -lm none --no-jinja > "$OUT/llama-server.log" 2>&1 &
  SRV=$!
  PIDS+=("$SRV")
  serve_run llama "$port"
  kill "$SRV"
  wait "$SRV" 2> /dev/null || true
fi

python3 - "$OUT" "$ROUNDS" <<'PY'
import glob, json, os, sys

out, rounds = sys.argv[1], int(sys.argv[2])

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def best_ts(pattern, test):
    """Best avg_ts of `test` over the rounds' JSON files (keel and llama-bench both)."""
    best, bound = None, None
    for path in sorted(glob.glob(os.path.join(out, pattern))):
        for row in load(path) or []:
            name = row.get("test") or (f"pp{row['n_prompt']}" if row.get("n_gen", 0) == 0
                                       else f"tg{row['n_gen']}")
            if name != test:
                continue
            if best is None or row["avg_ts"] > best:
                best = row["avg_ts"]
                bound = row.get("bound_ts", bound)
    return best, bound

def fmt(v, spec=".1f"):
    return "—" if v is None else format(v, spec)

def ratio(a, b):
    return "—" if a is None or b is None or b == 0 else f"{a / b:.2f}×"

rows = []
for t in ["q4_0", "q8_0", "q4_k"]:
    for test, threads in [("pp512", 2), ("tg128", 2), ("tg64", 1)]:
        k, bound = best_ts(f"keel-{t}-{threads}t-r*.json", test)
        l, _ = best_ts(f"llama-{t}-{threads}t-r*.json", test)
        if k is None and l is None:
            continue
        eff = "—"
        if test.startswith("tg") and bound:
            eff = f"{100 * k / bound:.0f} %"
        rows.append(f"| {test} {t.upper()} | {threads} | {fmt(k)} | {fmt(l)} | {ratio(k, l)} | "
                    f"{fmt(bound) if test.startswith('tg') else '—'} | {eff} |")
if rows:
    print("\n### Engine (t/s, best of the rounds)\n")
    print("| test | threads | keel | llama.cpp | keel / llama.cpp | decode bound | keel / bound |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))

kq, _ = best_ts("keel-quiet-r*.json", "tg64")
lq, _ = best_ts("llama-quiet-r*.json", "tg64")
kh, _ = best_ts("keel-hog-r*.json", "tg64")
lh, _ = best_ts("llama-hog-r*.json", "tg64")
if kq and lq:
    print("\n### Decode with one core busy (Q8_0 tg64, 2 threads)\n")
    print("| | quiet | one core busy | kept |")
    print("|---|---:|---:|---:|")
    print(f"| keel | {fmt(kq)} | {fmt(kh)} | {fmt(100 * kh / kq if kh else None, '.0f')} % |")
    print(f"| llama.cpp | {fmt(lq)} | {fmt(lh)} | {fmt(100 * lh / lq if lh else None, '.0f')} % |")

runs = [("c=1", "c1"), ("c=4", "c4"), ("c=16", "c16"), ("shared prefix c=4", "prefix")]
srows = []
for label, key in runs:
    k = load(os.path.join(out, f"serve-keel-{key}.json"))
    l = load(os.path.join(out, f"serve-llama-{key}.json"))
    if not k and not l:
        continue
    def g(r, name):
        return r.get(name) if r else None
    srows.append(
        f"| {label} | {fmt(g(k, 'output_throughput'))} | {fmt(g(l, 'output_throughput'))} | "
        f"{ratio(g(k, 'output_throughput'), g(l, 'output_throughput'))} | "
        f"{fmt(g(k, 'median_ttft_ms'), '.0f')} / {fmt(g(l, 'median_ttft_ms'), '.0f')} | "
        f"{fmt(g(k, 'median_tpot_ms'), '.0f')} / {fmt(g(l, 'median_tpot_ms'), '.0f')} | "
        f"{fmt(g(k, 'p99_itl_ms'), '.0f')} / {fmt(g(l, 'p99_itl_ms'), '.0f')} | "
        f"{g(k, 'completed') or 0}+{g(k, 'failed') or 0} / {g(l, 'completed') or 0}+{g(l, 'failed') or 0} |")
if srows:
    print("\n### Serving (Q4_0, 256 prompt / 64 output tokens, streaming; keel / llama-server)\n")
    print("| load | keel tok/s | llama-server tok/s | ratio | TTFT p50 ms | TPOT p50 ms | ITL p99 ms | ok+failed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(srows))
print(f"\nraw results: {out}")
PY
