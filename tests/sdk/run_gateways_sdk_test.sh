#!/usr/bin/env bash
# Two gateways of one cluster sharing --responses-dir: `keel cluster up` (gateway A, one TE and one
# JE) and `keel cluster gateway` over its JE (gateway B), each on a free port of 127.0.0.1, then
# responses_gateways_sdk_test.cjs against both with the official openai npm package. Both are
# stopped by PID on exit.
# Usage: run_gateways_sdk_test.sh KEEL_BINARY SHARED_DIR (the environment's KEEL_SHARED_DIR wins)
set -euo pipefail
keel="$1"
model="${KEEL_SHARED_DIR:-$2}/models/stories260K/stories260K.gguf"
here="$(cd "$(dirname "$0")" && pwd)"
if [ ! -f "$model" ]; then
  echo "skipped: $model not found (shared reference data; set KEEL_SHARED_DIR)"
  exit 77
fi
module="${KEEL_NPM_DIR:-${HOME:-/tmp}/.cache/keel/npm}/node_modules/openai"
if ! command -v node >/dev/null || [ ! -d "$module" ]; then
  echo "skipped: node or the openai npm package ($module) not found (scripts/install-deps.sh)"
  exit 77
fi
dir="$(mktemp -d)"
pid_a=""
pid_b=""
stop() {
  for p in $pid_b $pid_a; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap stop EXIT
# The port of the gateway's ready line in FILE, waiting for it while PID runs.
ready_port() {
  for _ in $(seq 1 600); do
    port="$(sed -n 's/^KEEL_READY .*"port":\([0-9]*\).*"role":"gateway".*/\1/p' "$1" | head -1)"
    [ -n "$port" ] && { echo "$port"; return 0; }
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  echo "a gateway did not start:" >&2
  cat "$1" >&2
  return 1
}
common=(-m "$model" --served-model-name stories --host 127.0.0.1 --port 0 --drain-timeout 2
  --responses-dir "$dir/responses")
"$keel" cluster up "${common[@]}" --colocated 1 --jes 1 --threads-per-te 1 \
  --state-dir "$dir/a" >"$dir/a.out" 2>&1 &
pid_a=$!
port_a="$(ready_port "$dir/a.out" $pid_a)"
je="$(sed -n 's/^\[je-0\] KEEL_READY .*"port":\([0-9]*\).*/127.0.0.1:\1/p' "$dir/a.out" | head -1)"
"$keel" cluster gateway "${common[@]}" --je "$je" --state-dir "$dir/b" >"$dir/b.out" 2>&1 &
pid_b=$!
port_b="$(ready_port "$dir/b.out" $pid_b)"
A_URL="http://127.0.0.1:$port_a/v1" B_URL="http://127.0.0.1:$port_b/v1" OPENAI_MODULE="$module" \
  node "$here/responses_gateways_sdk_test.cjs"
