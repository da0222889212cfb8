#!/usr/bin/env bash
# Soak run: mixed load at about 80 % of capacity against one `keel serve` for 30 minutes (or
# --minutes N), then checks that nothing leaked. Not part of `make test`; figures in
# docs/benchmarks.md. What runs, all against 127.0.0.1 on a port the server picks itself:
#   probe   bench-serve at an unbounded rate (concurrency 32) for ~20 s: the capacity C in req/s
#           (load A's shape; the whole mix's capacity differs a little, hence "about")
#   load A  bench-serve /v1/completions, random token-id prompts, 60 % of 0.8·C, 10 % of the
#           requests hang up mid-stream (--disconnect-prob)
#   load B  bench-serve /v1/chat/completions, shared-prefix text prompts (prefix caching),
#           40 % of 0.8·C, 10 % hang-ups
#   caches  a loop that creates a context cache (POST /v1/caches), sends completions and chats
#           that extend it, and deletes it — or leaves it to expire (ttl 5 s) one time in four
#   sampler every 5 s: the server's RSS and its /metrics gauges
# Checks at the end: 0 failed requests (hang-ups are counted apart), 0 cache-loop errors, 0
# requests finished with an engine error, the server alive; RSS drift from the end of warm-up
# (the first 20 % of the run) to the end; and exact KV block accounting — once the load has
# stopped and every context cache is gone, keel:kv_blocks_used must equal the blocks pinned by
# context caches and the PIC chunk index (0 here), as before the load.
# Usage: bench/soak.sh [--minutes N] [--model GGUF] [--vocab-size V] [--keel BIN] [--out DIR]
#        [--threads T] [--serve-args "ARGS"]   (defaults: 30, stories260K from ../shared, 512)
# Exit status: 0 when every check passes. Needs curl. Everything it starts it stops (by PID).
set -uo pipefail
cd "$(dirname "$0")/.."

minutes=30
keel=build/release/tools/keel
model="${KEEL_SHARED_DIR:-../shared}/models/stories260K/stories260K.gguf"
out=""
threads=1  # one compute thread: on 2 shared vCPUs, -t 2 was 18x slower for stories260K
vocab=512  # stories260K's; token-id prompts are drawn below it
serve_args=""
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --keel) keel="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --vocab-size) vocab="$2"; shift 2 ;;
    --serve-args) serve_args="$2"; shift 2 ;;
    *) echo "soak: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$keel" ] || { echo "soak: $keel not found (make release)" >&2; exit 2; }
[ -f "$model" ] || { echo "soak: model $model not found (--model)" >&2; exit 2; }
command -v curl >/dev/null || { echo "soak: needs curl" >&2; exit 2; }
duration=$((minutes * 60))
out="${out:-$(mktemp -d /tmp/keel-soak.XXXXXX)}"
mkdir -p "$out"
echo "soak: $minutes min against $model; logs in $out"

pids=()
server_pid=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the server ---
# shellcheck disable=SC2086
"$keel" serve -m "$model" --host 127.0.0.1 --port 0 -t "$threads" $serve_args \
  >"$out/serve.log" 2>&1 &
server_pid=$!
port=""
for _ in $(seq 1 600); do
  port="$(sed -n 's/.*ready: listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out/serve.log" |
    head -1)"
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || { echo "soak: keel serve exited" >&2; cat "$out/serve.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "soak: keel serve did not start" >&2; exit 1; }
base="http://127.0.0.1:$port"
echo "soak: keel serve (pid $server_pid) on $base"

metric() {  # metric NAME: the value of an unlabelled keel: series, from a fresh /metrics read
  curl -s --max-time 5 "$base/metrics" | awk -v n="keel:$1" '$1 ~ "^"n"({|$)" { print $2; exit }'
}
engine_errors() {
  curl -s --max-time 5 "$base/metrics" |
    awk '/^keel:request_success_total/ && /finished_reason="error"/ { print $2; exit }'
}
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$server_pid/status" 2>/dev/null; }
blocks_before="$(metric kv_blocks_used)"
errors_before="$(engine_errors)"

bench() {  # bench NAME ARGS...: one bench-serve run, result in $out/NAME.json
  local name="$1"
  shift
  "$keel" bench-serve --base-url "$base" --seed 7 --request-timeout 120 \
    --save-result "$out/$name.json" "$@" >"$out/$name.txt" 2>"$out/$name.log"
}
json_number() { sed -n "s/^  \"$2\": \([-0-9.eE+]*\),*$/\1/p" "$1" | head -1; }

# --- capacity probe ---
common_a=(--endpoint /v1/completions --dataset-name random --input-len 96 --output-len 48
          --range-ratio 0.5 --vocab-size "$vocab")
# A short probe to size the real one, which then runs for about 20 s.
bench probe0 "${common_a[@]}" --num-prompts 100 --max-concurrency 32 || {
  echo "soak: the capacity probe failed:" >&2; tail -5 "$out/probe0.log" >&2; exit 1; }
n_probe="$(awk -v r="$(json_number "$out/probe0.json" request_throughput)" \
  'BEGIN { n = int(20 * r); print (n < 100 ? 100 : n) }')"
bench probe "${common_a[@]}" --num-prompts "$n_probe" --max-concurrency 32 || {
  echo "soak: the capacity probe failed:" >&2; tail -5 "$out/probe.log" >&2; exit 1; }
capacity="$(json_number "$out/probe.json" request_throughput)"
rate_a="$(awk -v c="$capacity" 'BEGIN { printf "%.3f", 0.8 * c * 0.6 }')"
rate_b="$(awk -v c="$capacity" 'BEGIN { printf "%.3f", 0.8 * c * 0.4 }')"
n_a="$(awk -v r="$rate_a" -v d="$duration" 'BEGIN { printf "%d", r * d + 1 }')"
n_b="$(awk -v r="$rate_b" -v d="$duration" 'BEGIN { printf "%d", r * d + 1 }')"
echo "soak: capacity $capacity req/s; load A $rate_a req/s ($n_a requests), B $rate_b req/s ($n_b)"

# --- sampler ---
sampler() {
  echo "t_s rss_kib kv_blocks_used running waiting context_caches" >"$out/samples.txt"
  local t0=$SECONDS
  while kill -0 "$server_pid" 2>/dev/null; do
    local m
    m="$(curl -s --max-time 5 "$base/metrics")"
    echo "$((SECONDS - t0)) $(rss_kib) $(awk '
      /^keel:kv_blocks_used[{ ]/ { u = $2 } /^keel:num_requests_running[{ ]/ { r = $2 }
      /^keel:num_requests_waiting[{ ]/ { w = $2 } /^keel:context_caches[{ ]/ { c = $2 }
      END { print u, r, w, c }' <<<"$m")" >>"$out/samples.txt"
    sleep 5
  done
}
sampler &
pids+=($!)

# --- context-cache loop ---
cache_loop() {
  local end=$((SECONDS + duration)) i=0 ok=0 bad=0
  while [ $SECONDS -lt $end ]; do
    i=$((i + 1))
    local ttl=300 body id code
    [ $((i % 4)) -eq 0 ] && ttl=5  # left to expire
    if [ $((i % 2)) -eq 0 ]; then
      body="{\"prompt\": \"Once upon a time there was a little cat number $i\", \"ttl\": $ttl}"
    else
      body="{\"messages\": [{\"role\": \"system\", \"content\": \"Story $i.\"}], \"ttl\": $ttl}"
    fi
    id="$(curl -s --max-time 60 "$base/v1/caches" -H 'Content-Type: application/json' -d "$body" |
      sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')"
    if [ -z "$id" ]; then bad=$((bad + 1)); continue; fi
    ok=$((ok + 1))
    for _ in 1 2; do
      if [ $((i % 2)) -eq 0 ]; then
        code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 60 "$base/v1/completions" \
          -H 'Content-Type: application/json' \
          -d "{\"cache_id\": \"$id\", \"prompt\": \" and a dog\", \"max_tokens\": 8}")"
      else
        code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 60 "$base/v1/chat/completions" \
          -H 'Content-Type: application/json' \
          -d "{\"cache_id\": \"$id\", \"messages\": [{\"role\": \"user\", \"content\": \"Go on.\"}], \"max_tokens\": 8}")"
      fi
      if [ "$code" = 200 ]; then ok=$((ok + 1)); else bad=$((bad + 1)); echo "cache request $id: HTTP $code"; fi
    done
    if [ "$ttl" -ne 5 ]; then
      code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X DELETE "$base/v1/caches/$id")"
      if [ "$code" = 200 ]; then ok=$((ok + 1)); else bad=$((bad + 1)); echo "delete $id: HTTP $code"; fi
    fi
    sleep 1
  done
  echo "cache loop: $i caches, $ok requests ok, $bad errors"
}
cache_loop >"$out/caches.txt" 2>&1 &
cache_pid=$!
pids+=($cache_pid)

# --- the load ---
t_load=$SECONDS
bench load_a "${common_a[@]}" --num-prompts "$n_a" --request-rate "$rate_a" \
  --disconnect-prob 0.1 --skip-test-request &
a_pid=$!
pids+=($a_pid)
bench load_b --endpoint /v1/chat/completions --dataset-name shared-prefix --num-groups 4 \
  --prefix-len 40 --suffix-len 20 --output-len 32 --range-ratio 0.5 --num-prompts "$n_b" \
  --request-rate "$rate_b" --disconnect-prob 0.1 --skip-test-request &
b_pid=$!
pids+=($b_pid)
# Bounded: the load ends on its own near the duration; past 1.5x it is a failure.
status=0
deadline=$((SECONDS + duration * 3 / 2 + 120))
for p in $a_pid $b_pid $cache_pid; do
  while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 2; done
  if kill -0 "$p" 2>/dev/null; then echo "soak: load process $p overran; stopping it" >&2; kill "$p"; status=1; fi
  wait "$p" || { echo "soak: load process $p failed" >&2; status=1; }
done
load_s=$((SECONDS - t_load))
rss_end="$(rss_kib)"

# --- quiescence: no request left, every context cache deleted or expired (ttl 5 s) ---
for _ in $(seq 1 60); do
  [ "$(metric num_requests_running)" = 0 ] && [ "$(metric num_requests_waiting)" = 0 ] &&
    [ "$(metric context_caches)" = 0 ] && break
  sleep 1
done
blocks_after="$(metric kv_blocks_used)"
pinned="$(awk -v a="$(metric context_cache_blocks)" -v b="$(metric pic_index_blocks)" \
  'BEGIN { print a + b }')"
errors_after="$(engine_errors)"

# --- report ---
failed_a="$(json_number "$out/load_a.json" failed)"
failed_b="$(json_number "$out/load_b.json" failed)"
cancelled=$(( $(json_number "$out/load_a.json" cancelled) + $(json_number "$out/load_b.json" cancelled) ))
completed=$(( $(json_number "$out/load_a.json" completed) + $(json_number "$out/load_b.json" completed) ))
cache_line="$(tail -1 "$out/caches.txt")"
cache_errors="$(sed -n 's/.*, \([0-9]*\) errors$/\1/p' <<<"$cache_line")"
warm_t=$((duration / 5))
rss_warm="$(awk -v w="$warm_t" 'NR > 1 && $1 >= w && $2 != "" { print $2; exit }' "$out/samples.txt")"
rss_max="$(awk 'NR > 1 && $2 > m { m = $2 } END { print m }' "$out/samples.txt")"
engine_err=$(( ${errors_after%.*} - ${errors_before%.*} ))
alive=yes
kill -0 "$server_pid" 2>/dev/null || alive=no
{
  echo "soak: $minutes min requested, load ran ${load_s} s; capacity probe $capacity req/s"
  echo "requests: $completed completed, $cancelled cancelled by client hang-ups," \
    "failed: A ${failed_a:-?} + B ${failed_b:-?}; $cache_line"
  echo "engine errors (request_success_total{finished_reason=\"error\"}): $engine_err"
  awk -v w="${rss_warm:-0}" -v e="${rss_end:-0}" -v m="${rss_max:-0}" 'BEGIN {
    pct = (w > 0) ? 100 * (e - w) / w : 0
    printf "RSS: %.1f MiB after warm-up, %.1f MiB at the end (drift %+.1f MiB, %+.2f %%), max %.1f MiB\n",
      w / 1024, e / 1024, (e - w) / 1024, pct, m / 1024 }'
  echo "KV blocks in use: $blocks_before before the load, $blocks_after after it" \
    "(expected $pinned: pinned by context caches + PIC index)"
  echo "server alive at the end: $alive"
} | tee "$out/summary.txt"
[ "${failed_a:-1}" = 0 ] && [ "${failed_b:-1}" = 0 ] || status=1
[ "${cache_errors:-1}" = 0 ] || status=1
[ "$engine_err" = 0 ] || status=1
[ "$blocks_after" = "$pinned" ] && [ "$blocks_before" = 0 ] || status=1
[ "$alive" = yes ] || status=1
echo "soak: $([ $status -eq 0 ] && echo PASS || echo FAIL) ($out/summary.txt)"
exit $status
