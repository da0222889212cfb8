#!/usr/bin/env bash
# Long context in one process: keel against llama.cpp side by side on the same GGUF files
# (random weights in real long-window shapes: llama-3.2-1b and qwen3-0.6b, Q4_0, f16 KV cache,
# llama.cpp with its defaults: flash attention auto, f16 cache), interleaved keel / llama-bench.
#
#   1. prefill: pp<P> (default 8192), each engine's best of --rounds rounds;
#   2. decode at depth: tg128 after <D> tokens prefilled untimed (llama-bench -d; keel bench -d);
#   3. --deep N: tg128 at depth N (e.g. 32768) once per engine (a long run: the depth's prefill);
#   4. attention's share of keel's pp<P> time (perf, the attention kernels' symbols) when perf is
#      installed; KV bytes per token from the file's shape, and each keel run's peak RSS.
#
#   bench/long_context.sh [--rounds N] [--prompt P] [--depth D | --no-depth] [--deep N]
#                         [--models "a b"] [--out DIR] [--quick]
# --quick: pp2048 / depth 2048, one round (a smoke run, not for docs). Needs build/release
# (make release) and python3. Nothing is left running: every run is a foreground child.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=2
PROMPT=8192
DEPTH=8192
DEEP=0
SHAPES="llama-3.2-1b qwen3-0.6b"
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift ;;
    --prompt) PROMPT="$2"; shift ;;
    --depth) DEPTH="$2"; shift ;;
    --no-depth) DEPTH=0 ;;
    --deep) DEEP="$2"; shift ;;
    --models) SHAPES="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --quick) ROUNDS=1; PROMPT=2048; DEPTH=2048 ;;
    *) echo "usage: $0 [--rounds N] [--prompt P] [--depth D] [--deep N] [--models \"a b\"] [--out DIR] [--quick]" >&2
       exit 2 ;;
  esac
  shift
done

KEEL=${KEEL:-build/release/tools/keel}
LLAMA_DIR=${LLAMA_DIR:-../shared/reference/llama.cpp/bin}
MODELS=${MODELS:-/tmp/keel-long}
THREADS=${THREADS:-2}
OUT=${OUT:-$(mktemp -d /tmp/keel-long-context.XXXX)}
mkdir -p "$MODELS" "$OUT"
for f in "$KEEL" "$LLAMA_DIR/llama-bench"; do
  [ -e "$f" ] || { echo "long_context: missing $f" >&2; exit 1; }
done
command -v python3 >/dev/null || { echo "long_context: needs python3" >&2; exit 1; }

keel_bench() {  # $1 model, $2 out json, then bench flags
  local m=$1 o=$2
  shift 2
  /usr/bin/env time -f "%M" -o "$o.rss" "$KEEL" bench -m "$m" -t "$THREADS" -r 1 --kv-type f16 \
    -o json "$@" > "$o" 2> "$o.log"
}
llama_bench() {  # $1 model, $2 out json, then bench flags
  local m=$1 o=$2
  shift 2
  "$LLAMA_DIR/llama-bench" -m "$m" -t "$THREADS" -r 1 -o json "$@" > "$o" 2> "$o.log"
}

for shape in $SHAPES; do
  m="$MODELS/$shape-q4_0.gguf"
  if [ ! -e "$m" ]; then
    echo "== making $m"
    "$KEEL" make-model --shape "$shape" --type q4_0 -o "$m" > /dev/null
  fi
  "$KEEL" info "$m" > "$OUT/$shape-info.txt"
  for r in $(seq 1 "$ROUNDS"); do
    echo "== $shape round $r: pp$PROMPT, tg128 @ d$DEPTH (0: none)"
    keel_bench "$m" "$OUT/keel-$shape-pp-r$r.json" -p "$PROMPT" -n 0
    llama_bench "$m" "$OUT/llama-$shape-pp-r$r.json" -p "$PROMPT" -n 0
    if [ "$DEPTH" -gt 0 ]; then
      keel_bench "$m" "$OUT/keel-$shape-tg-r$r.json" -p 0 -n 128 -d "$DEPTH"
      llama_bench "$m" "$OUT/llama-$shape-tg-r$r.json" -p 0 -n 128 -d "$DEPTH"
    fi
  done
  if [ "$DEEP" -gt 0 ]; then
    echo "== $shape: tg128 @ d$DEEP (once)"
    keel_bench "$m" "$OUT/keel-$shape-deep-r1.json" -p 0 -n 128 -d "$DEEP"
    llama_bench "$m" "$OUT/llama-$shape-deep-r1.json" -p 0 -n 128 -d "$DEEP"
  fi
  if command -v perf >/dev/null && perf record -q -o "$OUT/perf-probe.data" true 2>/dev/null; then
    echo "== $shape: attention's share of keel pp$PROMPT (perf)"
    perf record -q -o "$OUT/$shape-perf.data" "$KEEL" bench -m "$m" -t "$THREADS" -r 1 \
      --kv-type f16 -p "$PROMPT" -n 0 > /dev/null 2>&1
    perf report -i "$OUT/$shape-perf.data" --stdio --sort symbol 2> /dev/null \
      > "$OUT/$shape-perf.txt" || true
  fi
done

python3 - "$OUT" "$SHAPES" "$PROMPT" "$DEPTH" "$DEEP" <<'EOF'
import glob, json, os, re, sys
out, shapes, prompt, depth, deep = sys.argv[1], sys.argv[2].split(), *map(int, sys.argv[3:6])

def best(engine, shape, kind):
    """Best avg_ts and the largest peak RSS (MiB) over the rounds of one engine's test."""
    ts, rss = None, None
    for path in sorted(glob.glob(f"{out}/{engine}-{shape}-{kind}-r*.json")):
        try:
            rows = json.load(open(path))
        except (OSError, ValueError):
            continue
        for row in rows:
            ts = row["avg_ts"] if ts is None else max(ts, row["avg_ts"])
        if os.path.exists(path + ".rss"):
            kb = int(open(path + ".rss").read().split()[-1])
            rss = kb / 1024 if rss is None else max(rss, kb / 1024)
    return ts, rss

def kv_bytes_per_token(shape):
    info = open(f"{out}/{shape}-info.txt").read()
    key = lambda k: int(re.search(r"\." + k + r"\s+(\d+)", info).group(1))
    heads, kv_heads = key("attention.head_count"), key("attention.head_count_kv")
    m = re.search(r"\.attention\.key_length\s+(\d+)", info)
    head_dim = int(m.group(1)) if m else key("embedding_length") // heads
    return 2 * key("block_count") * kv_heads * head_dim  # elements: K and V of every layer

def attention_share(shape):
    path = f"{out}/{shape}-perf.txt"
    if not os.path.exists(path):
        return None
    share = 0.0
    for line in open(path):
        m = re.match(r"\s*([\d.]+)%\s+\S+\s+(.*)", line)
        if m and re.search(r"attention|attend|score_block|pv_block|softmax_row|transpose|"
                           r"fold_chunk|widen", m.group(2)):
            share += float(m.group(1))
    return share

print(f"\n| model | test | keel t/s | llama.cpp t/s | keel / llama.cpp | keel peak RSS |")
print("|---|---|---:|---:|---:|---:|")
tests = ([("pp", f"pp{prompt}")] + ([("tg", f"tg128 @ d{depth}")] if depth else [])
         + ([("deep", f"tg128 @ d{deep}")] if deep else []))
for shape in shapes:
    for kind, label in tests:
        k, rss = best("keel", shape, kind)
        l, _ = best("llama", shape, kind)
        if k is None or l is None:
            print(f"| {shape} | {label} | {k} | {l} | — | — |")
            continue
        rss_s = f"{rss:.0f} MiB" if rss else "—"
        print(f"| {shape} | {label} | {k:.2f} | {l:.2f} | {k / l:.2f}x | {rss_s} |")
print()
for shape in shapes:
    per_tok = kv_bytes_per_token(shape)
    share = attention_share(shape)
    share_s = f"{share:.0f} %" if share is not None else "not measured (no perf)"
    print(f"- {shape}: KV per token {per_tok * 2 / 1024:.0f} KiB f16, "
          f"{per_tok * 34 / 32 / 1024:.0f} KiB q8_0; attention's share of keel pp{prompt}: {share_s}")
print(f"\nraw results: {out}")
EOF
