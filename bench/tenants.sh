#!/usr/bin/env bash
# Fair shares between tenants on one `keel serve` (docs/tenants.md): two tenants keep the engine
# backlogged — "heavy" sends 4x the tokens of "light" per request (prompt and max_tokens) — and
# the script reports, per window, each tenant's service (prompt tokens x1 + generated x2, as VTC
# weighs them, counted by the client from each finished request's usage) and Jain's fairness
# index over service / weight. With --fcfs the same load runs without a keys file (one tenant to
# the engine: first come, first served) as the baseline.
#
# --gateways 2 measures instead a quota held across two gateways of one cluster: `keel cluster up`
# (gateway A) and `keel cluster gateway` (gateway B) share one keys file and --responses-dir (so
# the quota windows, <dir>/quotas); one tenant with --rpm requests a minute sends --offered
# requests a minute (default 1.5x the quota, open loop, alternating A and B), and the script
# reports the requests admitted (200) in each minute and in the fullest sliding 60 s window,
# against the quota.
#
#   bench/tenants.sh [--seconds S] [--window W] [--weights "L H"] [--workers N] [--fcfs]
#                    [--model REF] [--max-num-seqs N]
#   bench/tenants.sh --gateways 2 [--rpm R] [--offered O] [--seconds S] [--model REF]
# Defaults: 90 s in 30 s windows, weights 1 1, 8 connections per tenant, the built-in
# stories260K, --max-num-seqs 4 (so requests wait and admission order matters); --gateways 2:
# --rpm 600, --offered 900, 150 s. Needs build/release (make release) and python3. Not part of
# make test. Nothing is left running.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_TOTAL=""
WINDOW=30
WEIGHTS="1 1"
WORKERS=8
FCFS=0
MODEL="builtin:stories260K"
MAX_SEQS=4
GATEWAYS=1
RPM=600
OFFERED=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECONDS_TOTAL="$2"; shift ;;
    --window) WINDOW="$2"; shift ;;
    --weights) WEIGHTS="$2"; shift ;;
    --workers) WORKERS="$2"; shift ;;
    --fcfs) FCFS=1 ;;
    --model) MODEL="$2"; shift ;;
    --max-num-seqs) MAX_SEQS="$2"; shift ;;
    --gateways) GATEWAYS="$2"; shift ;;
    --rpm) RPM="$2"; shift ;;
    --offered) OFFERED="$2"; shift ;;
    *) echo "usage: $0 [--seconds S] [--window W] [--weights \"L H\"] [--workers N] [--fcfs] [--model REF] [--max-num-seqs N] | --gateways 2 [--rpm R] [--offered O] [--seconds S] [--model REF]" >&2
       exit 2 ;;
  esac
  shift
done

KEEL=${KEEL:-build/release/tools/keel}
[ -x "$KEEL" ] || { echo "no $KEEL: run make release first" >&2; exit 1; }
read -r W_LIGHT W_HEAVY <<<"$WEIGHTS"
TMP=$(mktemp -d)
SERVER_PID=""
GATEWAY_PID=""
cleanup() {
  for pid in $GATEWAY_PID $SERVER_PID; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_health() {  # PORT LOG
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  cat "$2" >&2
  exit 1
}

if [ "$GATEWAYS" = 2 ]; then
  SECONDS_TOTAL=${SECONDS_TOTAL:-150}
  OFFERED=${OFFERED:-$((RPM * 3 / 2))}
  echo "{\"key\": \"sk-q\", \"tenant\": \"q\", \"requests_per_minute\": $RPM}" >"$TMP/keys.jsonl"
  PORT_A=$(free_port)
  PORT_B=$(free_port)
  COMMON=(--no-state --api-keys-file "$TMP/keys.jsonl" --responses-dir "$TMP/shared" --host 127.0.0.1)
  KEEL_HOME=${KEEL_HOME:-$TMP/home} "$KEEL" cluster up -m "$MODEL" --colocated 1 --jes 1 \
    --threads-per-te 1 --port "$PORT_A" "${COMMON[@]}" 2>"$TMP/a.log" &
  SERVER_PID=$!
  wait_health "$PORT_A" "$TMP/a.log"
  JE=$(curl -sf -H 'Authorization: Bearer sk-q' "http://127.0.0.1:$PORT_A/v1/cluster/status" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["job_executors"][0]["address"])')
  KEEL_HOME=${KEEL_HOME:-$TMP/home} "$KEEL" cluster gateway -m "$MODEL" --je "$JE" \
    --port "$PORT_B" "${COMMON[@]}" 2>"$TMP/b.log" &
  GATEWAY_PID=$!
  wait_health "$PORT_B" "$TMP/b.log"
  python3 - "$PORT_A" "$PORT_B" "$RPM" "$OFFERED" "$SECONDS_TOTAL" <<'PY'
import json, sys, threading, time, urllib.request, urllib.error
from concurrent.futures import ThreadPoolExecutor
ports, rpm, offered, total = sys.argv[1:3], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
body = json.dumps({"prompt": "Once upon a time", "max_tokens": 1}).encode()
results = []  # (sent at, gateway index, status)
lock = threading.Lock()

def send(i, at):
    req = urllib.request.Request(f"http://127.0.0.1:{ports[i % 2]}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer sk-q"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            r.read(); status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    except Exception:
        status = 0
    with lock: results.append((at, i % 2, status))

start = time.monotonic()
interval = 60.0 / offered
with ThreadPoolExecutor(max_workers=64) as pool:
    i = 0
    while True:
        due = start + i * interval
        if due - start >= total: break
        time.sleep(max(0.0, due - time.monotonic()))
        pool.submit(send, i, time.monotonic() - start)
        i += 1
ok = sorted(at for at, _, s in results if s == 200)
refused = sum(1 for _, _, s in results if s == 429)
other = sum(1 for _, _, s in results if s not in (200, 429))
print(f"quota across 2 gateways: {rpm} requests/min; offered {offered}/min for {total:.0f} s "
      f"(alternating A and B); admitted {len(ok)}, 429 {refused}, other {other}")
print(f"{'minute':>8} {'admitted':>9} {'via A':>6} {'via B':>6} {'vs quota':>9}")
for m in range(int(total // 60)):
    n = [g for at, g, s in results if s == 200 and m * 60 <= at < (m + 1) * 60]
    print(f"{m * 60:>6d}s+ {len(n):>9d} {n.count(0):>6d} {n.count(1):>6d} {100.0 * (len(n) - rpm) / rpm:>+8.1f}%")
j, most = 0, 0
for k, at in enumerate(ok):  # the fullest sliding 60 s window (by the client's send times)
    while ok[j] <= at - 60.0: j += 1
    most = max(most, k - j + 1)
print(f"fullest sliding 60 s window: {most} admitted ({100.0 * (most - rpm) / rpm:+.1f}% of the quota)")
PY
  for p in "$PORT_A" "$PORT_B"; do
    echo "gateway :$p /metrics:"
    curl -s "http://127.0.0.1:$p/metrics" | grep -E '^keel_tenant_(requests_total|rate_limited_total.*requests|quota_dir_errors_total)' || true
  done
  kill "$GATEWAY_PID" 2>/dev/null || true
  wait "$GATEWAY_PID" 2>/dev/null || true
  exit 0
fi

SECONDS_TOTAL=${SECONDS_TOTAL:-90}
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
ARGS=(serve -m "$MODEL" --host 127.0.0.1 --port "$PORT" --max-num-seqs "$MAX_SEQS")
if [ "$FCFS" = 0 ]; then
  cat >"$TMP/keys.jsonl" <<KEYS
{"key": "sk-light", "tenant": "light", "weight": $W_LIGHT}
{"key": "sk-heavy", "tenant": "heavy", "weight": $W_HEAVY}
KEYS
  ARGS+=(--api-keys-file "$TMP/keys.jsonl")
fi
KEEL_HOME=${KEEL_HOME:-$TMP/home} "$KEEL" "${ARGS[@]}" 2>"$TMP/serve.log" &
SERVER_PID=$!
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { cat "$TMP/serve.log" >&2; exit 1; }

python3 - "$PORT" "$SECONDS_TOTAL" "$WINDOW" "$WORKERS" "$W_LIGHT" "$W_HEAVY" "$FCFS" <<'PY'
import json, sys, threading, time, urllib.request, random
port, total, window, workers = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
weights = {"light": float(sys.argv[5]), "heavy": float(sys.argv[6])}
fcfs = sys.argv[7] == "1"
shape = {"light": (32, 32), "heavy": (128, 128)}  # prompt tokens, max_tokens: 4x
start = time.monotonic()
nwin = int(total // window)
served = {t: [0.0] * nwin for t in shape}   # service finished in each window
done = {t: 0 for t in shape}
errors = {t: 0 for t in shape}
lock = threading.Lock()

def worker(tenant):
    rng = random.Random(hash(tenant) ^ threading.get_ident())
    n_prompt, n_gen = shape[tenant]
    while time.monotonic() - start < total:
        body = {"prompt": [rng.randrange(5, 500) for _ in range(n_prompt)], "max_tokens": n_gen,
                "ignore_eos": True}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              **({} if fcfs else {"Authorization": f"Bearer sk-{tenant}"})})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                usage = json.loads(r.read())["usage"]
        except Exception:
            with lock: errors[tenant] += 1
            time.sleep(0.1)
            continue
        w = int((time.monotonic() - start) // window)
        with lock:
            done[tenant] += 1
            if w < nwin: served[tenant][w] += usage["prompt_tokens"] + 2 * usage["completion_tokens"]

threads = [threading.Thread(target=worker, args=(t,)) for t in shape for _ in range(workers)]
for t in threads: t.start()
for t in threads: t.join()

def jain(xs):
    s, q = sum(xs), sum(x * x for x in xs)
    return s * s / (len(xs) * q) if q > 0 else 0.0

mode = "FCFS (no keys file)" if fcfs else f"VTC, weights light {weights['light']:g} : heavy {weights['heavy']:g}"
print(f"tenants: {mode}; heavy sends 4x the tokens per request; {workers} connections each")
print(f"{'window':>8} {'light':>10} {'heavy':>10} {'heavy/light':>12} {'Jain':>6}")
for w in range(nwin):
    l, h = served["light"][w], served["heavy"][w]
    norm = [l / weights["light"], h / weights["heavy"]] if not fcfs else [l, h]
    ratio = h / l if l > 0 else float("inf")
    print(f"{w * window:>6.0f}s+ {l:>10.0f} {h:>10.0f} {ratio:>12.2f} {jain(norm):>6.3f}")
L, H = sum(served["light"]), sum(served["heavy"])
norm = [L / weights["light"], H / weights["heavy"]] if not fcfs else [L, H]
print(f"{'total':>8} {L:>10.0f} {H:>10.0f} {H / max(L, 1):>12.2f} {jain(norm):>6.3f}")
print(f"requests: light {done['light']}, heavy {done['heavy']}; errors: light {errors['light']}, heavy {errors['heavy']}")
PY
if [ "$FCFS" = 0 ]; then
  echo "server-side (keel /metrics):"
  curl -s "http://127.0.0.1:$PORT/metrics" | grep -E '^keel_tenant_(vtc_counter|requests_total|prompt_tokens_total|generation_tokens_total)' || true
fi
