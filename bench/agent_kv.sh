#!/usr/bin/env bash
# KV kept across tool calls on one `keel serve` (docs/agent-kv.md; issue 39's measurement): an
# agent's turn 1 — a ~2K-token history ending in a forced tool call — then a tool call of
# --tool-seconds during which other traffic computes at least twice the KV pool, then turn 2: the
# history, the call and a ~128-token tool result. Reported per scenario, each on a fresh server:
#   resident  turn 2 sent at once after turn 1 (its history still in the pool): the floor
#   pin       after the tool call and the traffic, with pins on (--kv-pin-ttl 300, so that a slow
#             machine's traffic phase cannot outlast the pin)
#   no-pin    the same with --kv-pin-ttl 0
# turn 2's TTFT (first streamed chunk), its cached prompt tokens and their share of turn 1's
# prompt, and the tokens the traffic computed.
#
#   bench/agent_kv.sh [--model REF] [--history N] [--result N] [--tool-seconds S]
#                     [--pool-tokens N] [--threads T]
# Defaults: TinyLlama-1.1B's shape with stories260K embedded (keel make-model --embed ...
# --shape tinyllama-1.1b --type q4_0, written to /tmp/agent-kv-tinyllama-q4_0.gguf if missing),
# 2048-token history, 128-token tool result, 30 s, a 4096-token pool (pins may hold 60 % of it),
# 2 threads. Needs build/release (make release) and python3. Not part of make test. Nothing is
# left running.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=""
HISTORY=2048
RESULT=128
TOOL_SECONDS=30
POOL_TOKENS=4096
THREADS=2
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL="$2"; shift ;;
    --history) HISTORY="$2"; shift ;;
    --result) RESULT="$2"; shift ;;
    --tool-seconds) TOOL_SECONDS="$2"; shift ;;
    --pool-tokens) POOL_TOKENS="$2"; shift ;;
    --threads) THREADS="$2"; shift ;;
    *) echo "usage: $0 [--model REF] [--history N] [--result N] [--tool-seconds S] [--pool-tokens N] [--threads T]" >&2
       exit 2 ;;
  esac
  shift
done

KEEL=${KEEL:-build/release/tools/keel}
[ -x "$KEEL" ] || { echo "no $KEEL: run make release first" >&2; exit 1; }
if [ -z "$MODEL" ]; then
  MODEL=/tmp/agent-kv-tinyllama-q4_0.gguf
  if [ ! -f "$MODEL" ]; then
    "$KEEL" make-model --embed models/stories260K/stories260K.gguf --shape tinyllama-1.1b \
      --type q4_0 -o "$MODEL" >/dev/null
  fi
fi
TMP=$(mktemp -d)
SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  SERVER_PID=""
}
trap 'stop_server; rm -rf "$TMP"' EXIT

start_server() {  # $1 = --kv-pin-ttl
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  KEEL_HOME="$TMP/home" "$KEEL" serve -m "$MODEL" --host 127.0.0.1 --port "$PORT" -t "$THREADS" \
    -c $((HISTORY + RESULT + 512)) --kv-cache-bytes "$POOL_BYTES" --kv-pin-ttl "$1" \
    --kv-pin-max-fraction 0.6 --max-num-seqs 4 2>"$TMP/serve.log" &
  SERVER_PID=$!
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  cat "$TMP/serve.log" >&2
  exit 1
}

# KV bytes per token from a first start's log ("KV cache: ... (f32, 1280 bytes per token)"), then
# the pool's size in bytes.
POOL_BYTES=$((64 << 20))
start_server 0
PER_TOKEN=$(grep -oE '[0-9]+ bytes per token' "$TMP/serve.log" | head -1 | grep -oE '^[0-9]+')
stop_server
POOL_BYTES=$((POOL_TOKENS * PER_TOKEN))

run_scenario() {  # $1 = name, $2 = --kv-pin-ttl, $3 = 1 to wait out the tool call
  start_server "$2"
  python3 - "$PORT" "$1" "$HISTORY" "$RESULT" "$TOOL_SECONDS" "$POOL_TOKENS" "$3" <<'PY'
import json, sys, threading, time, urllib.request
port, name, history, result, tool_s, pool, wait = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
    int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), sys.argv[7] == "1"
base = f"http://127.0.0.1:{port}"

def post(path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=600).read())

def tokens(text):
    return len(post("/tokenize", {"prompt": text})["tokens"])

def text_of(n, word):
    unit = f"The {word} walked to the river and saw a big fish. "
    per = tokens(unit * 8) / 8
    return unit * max(1, int(n / per))

tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object",
          "properties": {"query": {"type": "string", "maxLength": 12}}, "required": ["query"]}}}]
# The tools and the template add ~200 tokens to the system text.
messages = [{"role": "system", "content": text_of(history - 200, "agent")},
            {"role": "user", "content": "Find the fish."}]
t1 = post("/v1/chat/completions", {"messages": messages, "tools": tools, "tool_choice": "required",
                                    "max_tokens": 48, "temperature": 0})
assert t1["choices"][0]["finish_reason"] == "tool_calls", t1
call = t1["choices"][0]["message"]["tool_calls"]
computed = 0
t_tool = time.monotonic()
tool_elapsed = 0.0
if wait:  # other traffic until twice the pool is computed, for the tool call's length at least
    lock = threading.Lock()
    def traffic(w):
        global computed
        i = 0
        while True:
            with lock:
                if computed >= 2 * pool:
                    return
            u = post("/v1/completions", {"prompt": f"Story {w}-{i}. " + text_of(480, f"cat{w}{i}"),
                                         "max_tokens": 1})["usage"]
            with lock:
                computed += u["prompt_tokens"] - u["prompt_tokens_details"]["cached_tokens"]
            i += 1
    workers = [threading.Thread(target=traffic, args=(w,)) for w in range(2)]
    for w in workers: w.start()
    for w in workers: w.join()
    time.sleep(max(0.0, tool_s - (time.monotonic() - t_tool)))
tool_elapsed = time.monotonic() - t_tool
messages = messages + [{"role": "assistant", "content": None, "tool_calls": call},
                       {"role": "tool", "tool_call_id": call[0]["id"],
                        "content": text_of(result, "tool")}]
req = urllib.request.Request(base + "/v1/chat/completions", json.dumps(
    {"messages": messages, "tools": tools, "max_tokens": 8, "temperature": 0, "stream": True,
     "stream_options": {"include_usage": True}}).encode(), {"Content-Type": "application/json"})
start = time.monotonic()
ttft, usage = None, None
with urllib.request.urlopen(req, timeout=600) as resp:
    for line in resp:
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        if ttft is None:
            ttft = time.monotonic() - start
        event = json.loads(line[6:])
        if event.get("usage"):
            usage = event["usage"]
p1 = t1["usage"]["prompt_tokens"]
cached = usage["prompt_tokens_details"]["cached_tokens"]
print(f"{name:9s} turn1 {p1:5d}  turn2 {usage['prompt_tokens']:5d}  cached {cached:5d} "
      f"({100.0 * cached / p1:5.1f} % of turn 1)  TTFT {1000 * ttft:8.1f} ms  "
      f"tool call {tool_elapsed:5.1f} s, traffic {computed} tokens")
PY
  curl -s "http://127.0.0.1:$PORT/metrics" | grep -E '^keel:kv_pins_(total|released_total)' | sed 's/^/  /'
  stop_server
}

echo "model $MODEL, history ~$HISTORY tokens, tool result ~$RESULT, tool call ${TOOL_SECONDS}s, pool $POOL_TOKENS tokens ($POOL_BYTES bytes), $THREADS threads"
run_scenario resident 60 0
run_scenario pin 300 1
run_scenario no-pin 0 1
