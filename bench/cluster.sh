#!/usr/bin/env bash
# keel cluster benchmarks (docs/benchmarks.md, "keel cluster"), with `keel bench-serve`:
#   1. gateway overhead: `keel serve` direct against `keel cluster up` with one TE, same threads,
#      same client (random prompts, one request at a time): TTFT and TPOT p50, and their difference.
#   2. routing: 4 colocated TEs behind 2 JEs, each TE's KV pool holding about 8 of 32 prefix groups
#      (shared-prefix workload: 32 groups of 256 tokens), once per router policy (deepserve,
#      round_robin, least_load): throughput, TTFT p50, the fleet's prefix-hit rate (cached prompt
#      tokens / prompt tokens, from the gateway's /metrics) and failed requests.
#   3. colocated against 1P1D: 2 TEs of 1 thread either way, short- and long-output.
#   4. fleets (section "fleets"): `keel cluster profile-pd` measures the PD heatmap, then on equal
#      total cores (3 TEs x 1 thread) 3 colocated, 1 prefill + 2 decode, and a mixed fleet of
#      1 colocated + 1 prefill + 1 decode (router deepserve with that heatmap, and the round_robin
#      and least_load baselines), each with a short-output mix (prompts 256 +-50 %, outputs
#      32 +-50 %) and a long-output mix (prompts 64 +-50 %, outputs 256 +-50 %), 8 in flight:
#      throughput, TTFT p50/p99, TPOT p50 and goodput (requests per second meeting TTFT <=
#      SLO_TTFT ms and TPOT <= SLO_TPOT ms, defaults 100 and 2) and the share of jobs the router
#      sent disaggregated.
# Usage: bench/cluster.sh [--quick] [--model GGUF] [--out DIR]
#        [--sections overhead,router,pd,fleets] (default: all)
# Defaults: ../shared/models/stories260K/stories260K.gguf (512-token context, 512-token vocab),
# build/release/tools/keel. Every process started here is stopped by PID on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
KEEL=${KEEL:-build/release/tools/keel}
MODEL=../shared/models/stories260K/stories260K.gguf
OUT=$(mktemp -d /tmp/keel-cluster-bench.XXXXXX)
QUICK=0
SECTIONS=overhead,router,pd,fleets
while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=1 ;;
    --model) MODEL=$2; shift ;;
    --out) OUT=$2; shift ;;
    --sections) SECTIONS=$2; shift ;;
    *) echo "cluster.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$KEEL" ] || { echo "cluster.sh: build keel first (make release)" >&2; exit 1; }
command -v python3 > /dev/null || { echo "cluster.sh: needs python3" >&2; exit 1; }
mkdir -p "$OUT"
source bench/lib/processes.sh  # (the script runs from the repo root)
metric() {  # $1 port, $2 metric name: the sum of its samples
  curl -s "http://127.0.0.1:$1/metrics" |
    awk -v n="$2" 'index($0, n) == 1 { split($0, a, " "); s += a[2] } END { print s + 0 }'
}
want() { [[ ",$SECTIONS," == *",$1,"* ]]; }

n_overhead=48 n_router=512
[ $QUICK = 1 ] && n_overhead=12 n_router=128
common=(--endpoint /v1/completions --prompt-format token-ids --min-token-id 3 --vocab-size 512
  --seed 1 --ignore-eos)

if want overhead; then
echo "== 1. gateway overhead =="
overhead() {  # $1 label, $2 port
  "$KEEL" bench-serve --base-url "http://127.0.0.1:$2" "${common[@]}" --workload random \
    --input-len 128 --output-len 64 --num-prompts "$n_overhead" --max-concurrency 1 \
    --save-result "$OUT/overhead-$1.json" > "$OUT/overhead-$1.log" 2>&1
}
start_keel "$OUT/serve.log" serve -m "$MODEL" -t 1
overhead serve "$port"
stop "$SRV"
start_keel "$OUT/cluster1.log" cluster up -m "$MODEL" --colocated 1 --threads-per-te 1
overhead gateway "$port"
stop "$SRV"
fi

if want router; then
echo "== 2. routing: 4 TEs, 2 JEs, shared prefixes =="
# stories260K: 1,280 bytes of f32 KV per token; 8 groups x 256 tokens plus what 4 running
# requests need (4 x 304) is about 3,300 tokens.
kv_bytes=${KV_BYTES:-4300000}
for policy in ${POLICIES:-deepserve round_robin least_load}; do
  start_keel "$OUT/cluster-$policy.log" cluster up -m "$MODEL" --colocated 4 --jes 2 \
    --threads-per-te 1 --max-num-seqs 4 --kv-cache-bytes "$kv_bytes" --router "$policy" \
    --balance-threshold "${BALANCE:-0.25}" --balance-abs-tokens "${BALANCE_ABS:-4096}"
  q0=$(metric "$port" keel:prefix_cache_queries_total)
  h0=$(metric "$port" keel:prefix_cache_hits_total)
  "$KEEL" bench-serve --base-url "http://127.0.0.1:$port" "${common[@]}" \
    --workload shared-prefix --num-groups 32 --prefix-len 256 --suffix-len 32 --output-len 16 \
    --num-prompts "$n_router" --max-concurrency 16 \
    --save-result "$OUT/router-$policy.json" > "$OUT/router-$policy.log" 2>&1
  sleep 0.5  # the TEs' last reports
  q1=$(metric "$port" keel:prefix_cache_queries_total)
  h1=$(metric "$port" keel:prefix_cache_hits_total)
  python3 -c "import json,sys; d=json.load(open('$OUT/router-$policy.json')); d['prefix_hit_rate']=($h1-$h0)/max($q1-$q0,1); json.dump(d,open('$OUT/router-$policy.json','w'))"
  stop "$SRV"
done
fi

if want pd; then
echo "== 3. colocated against 1P1D on equal cores =="
# Two TEs of one thread each either way: 2 colocated, or 1 prefill + 1 decode; random 256-token
# prompts, a short-output (32) and a long-output (256) mix, 8 in flight.
n_pd=96
[ $QUICK = 1 ] && n_pd=24
for fleet in colocated pd; do
  tes=(--colocated 2)
  [ $fleet = pd ] && tes=(--prefill 1 --decode 1)
  start_keel "$OUT/cluster-$fleet.log" cluster up -m "$MODEL" "${tes[@]}" --threads-per-te 1
  for out_len in 32 256; do
    "$KEEL" bench-serve --base-url "http://127.0.0.1:$port" "${common[@]}" --workload random \
      --input-len 256 --output-len "$out_len" --num-prompts "$n_pd" --max-concurrency 8 \
      --save-result "$OUT/pd-$fleet-$out_len.json" > "$OUT/pd-$fleet-$out_len.log" 2>&1
  done
  stop "$SRV"
done
fi

if want fleets; then
echo "== 4. fleets on equal cores: colocated, disaggregated, mixed; short and long outputs =="
n_fl=96 k_prof=8
[ $QUICK = 1 ] && n_fl=24 k_prof=2
slo=(--goodput "ttft:${SLO_TTFT:-100}" "tpot:${SLO_TPOT:-2}")
"$KEEL" cluster profile-pd -m "$MODEL" -o "$OUT/pd_heatmap.json" --threads-per-te 1 \
  --prefill-lengths 32,64,128 --ratios 0.125,0.5,1,3 --requests-per-cell "$k_prof" \
  > "$OUT/profile-pd.log" 2>&1
for fleet in colocated3 disagg mixed-deepserve mixed-round_robin mixed-least_load; do
  case $fleet in
    colocated3) tes=(--colocated 3) ;;
    disagg) tes=(--prefill 1 --decode 2) ;;
    mixed-*) tes=(--colocated 1 --prefill 1 --decode 1 --router "${fleet#mixed-}"
      --pd-heatmap "$OUT/pd_heatmap.json") ;;
  esac
  start_keel "$OUT/cluster-$fleet.log" cluster up -m "$MODEL" "${tes[@]}" --threads-per-te 1
  for mix in short long; do
    lens=(--input-len 256 --output-len 32)
    [ $mix = long ] && lens=(--input-len 64 --output-len 256)
    r0=$(curl -s "http://127.0.0.1:$port/v1/cluster/status")
    "$KEEL" bench-serve --base-url "http://127.0.0.1:$port" "${common[@]}" --workload random \
      "${lens[@]}" --range-ratio 0.5 --num-prompts "$n_fl" --max-concurrency 8 "${slo[@]}" \
      --save-result "$OUT/fleet-$fleet-$mix.json" > "$OUT/fleet-$fleet-$mix.log" 2>&1
    r1=$(curl -s "http://127.0.0.1:$port/v1/cluster/status")
    python3 - "$OUT/fleet-$fleet-$mix.json" "$r0" "$r1" <<'PY'
import json, sys
path, r0, r1 = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
d = json.load(open(path))
def n(s, k):
    return sum(je.get("router", {}).get(k, 0) for je in s.get("jes", [s]))
dis = n(r1, "pd_disaggregated") - n(r0, "pd_disaggregated")
col = n(r1, "pd_colocated") - n(r0, "pd_colocated")
d["disaggregated_share"] = dis / max(dis + col, 1)
json.dump(d, open(path, "w"))
PY
  done
  stop "$SRV"
done
fi

python3 - "$OUT" "$SECTIONS" <<'PY'
import json, os, sys
out, sections = sys.argv[1], sys.argv[2].split(",")
def load(name):
    return json.load(open(f"{out}/{name}.json"))
if "overhead" in sections:
    s, g = load("overhead-serve"), load("overhead-gateway")
    print("\n| 1 TE, c=1, 128/64 | keel serve | gateway | difference |")
    print("|---|---|---|---|")
    for key, label in (("median_ttft_ms", "TTFT p50 (ms)"), ("median_tpot_ms", "TPOT p50 (ms)"),
                       ("median_itl_ms", "ITL p50 (ms)")):
        print(f"| {label} | {s[key]:.2f} | {g[key]:.2f} | {g[key] - s[key]:+.2f} |")
if "router" in sections:
    print("\n| router (4 TEs, 2 JEs) | req/s | output tok/s | TTFT p50 (ms) | prefix-hit rate | failed |")
    print("|---|---|---|---|---|---|")
    rr = load("router-round_robin")
    for p in os.environ.get("POLICIES", "deepserve round_robin least_load").split():
        d = load(f"router-{p}")
        print(f"| {p} | {d['request_throughput']:.2f} ({d['request_throughput'] / rr['request_throughput']:.2f}x rr) "
              f"| {d['output_throughput']:.1f} | {d['median_ttft_ms']:.1f} | {d['prefix_hit_rate']:.3f} "
              f"({d['prefix_hit_rate'] / max(rr['prefix_hit_rate'], 1e-9):.2f}x rr) | {d['failed']} |")
if "pd" in sections:
    print("\n| 2 TEs x 1 thread, 256-token prompts, c=8 | output | req/s | TTFT p50 (ms) | TPOT p50 (ms) | failed |")
    print("|---|---|---|---|---|---|")
    for fleet in ("colocated", "pd"):
        for out_len in (32, 256):
            d = load(f"pd-{fleet}-{out_len}")
            name = "2 colocated" if fleet == "colocated" else "1 prefill + 1 decode"
            print(f"| {name} | {out_len} | {d['request_throughput']:.2f} | {d['median_ttft_ms']:.1f} "
                  f"| {d['median_tpot_ms']:.2f} | {d['failed']} |")
if "fleets" in sections:
    h = load("pd_heatmap")
    print("\nPD heatmap (JCT colocated / JCT disaggregated - 1), rows prefill", h["prefill_bins"],
          "columns ratio", h["ratio_bins"])
    for p, row in zip(h["prefill_bins"], h["values"]):
        print(f"  {p:>5}: " + "  ".join(f"{v:+.3f}" for v in row))
    names = {"colocated3": "3 colocated", "disagg": "1 prefill + 2 decode",
             "mixed-deepserve": "1C+1P+1D, deepserve + heatmap",
             "mixed-round_robin": "1C+1P+1D, round_robin", "mixed-least_load": "1C+1P+1D, least_load"}
    slo = f"TTFT<={os.environ.get('SLO_TTFT', '100')} ms, TPOT<={os.environ.get('SLO_TPOT', '2')} ms"
    for mix in ("short", "long"):
        base = load(f"fleet-colocated3-{mix}")
        print(f"\n| 3 TEs x 1 thread, {mix}-output mix, c=8 | req/s | output tok/s | TTFT p50 / p99 (ms) "
              f"| TPOT p50 (ms) | goodput ({slo}) req/s | disaggregated | failed |")
        print("|---|---|---|---|---|---|---|---|")
        for fleet, name in names.items():
            d = load(f"fleet-{fleet}-{mix}")
            g = d["request_goodput"] or 0.0
            print(f"| {name} | {d['request_throughput']:.2f} ({d['request_throughput'] / base['request_throughput']:.2f}x) "
                  f"| {d['output_throughput']:.0f} | {d['median_ttft_ms']:.1f} / {d['p99_ttft_ms']:.1f} "
                  f"| {d['median_tpot_ms']:.2f} | {g:.2f} | {d['disaggregated_share']:.2f} | {d['failed']} |")
PY
echo "(raw results in $OUT)"
