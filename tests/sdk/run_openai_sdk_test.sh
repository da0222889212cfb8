#!/usr/bin/env bash
# Starts `keel serve` (or, with MODE cluster, `keel cluster up`: the gateway in front of 2 TEs) on
# a free port of 127.0.0.1 and runs openai_sdk_test.cjs (or SCRIPT, another test in this folder)
# against it with the official openai npm package that scripts/install-deps.sh installs.
# Usage: run_openai_sdk_test.sh KEEL_BINARY SHARED_DIR [serve|cluster] [SCRIPT] [SERVE_ARGS...]
# (the model is stories260K there; the environment's KEEL_SHARED_DIR, when set, wins, as in the
# GoogleTest suites; SERVE_ARGS go to `keel serve`)
set -euo pipefail
keel="$1"
mode="${3:-serve}"
script="${4:-openai_sdk_test.cjs}"
extra=("${@:5}")
model="${KEEL_SHARED_DIR:-$2}/models/stories260K/stories260K.gguf"
here="$(cd "$(dirname "$0")" && pwd)"
if [ ! -f "$model" ]; then
  # Like the GoogleTest suites, skip (CTest SKIP_RETURN_CODE) when ../shared is not there.
  echo "skipped: $model not found (shared reference data; set KEEL_SHARED_DIR)"
  exit 77
fi
npm_dir="${KEEL_NPM_DIR:-${HOME:-/tmp}/.cache/keel/npm}"
module="$npm_dir/node_modules/openai"
# Without Node.js or the openai package the test cannot run: skipped (77), saying why.
if ! command -v node >/dev/null; then
  echo "skipped: node not found (scripts/install-deps.sh installs Node.js and npm)"
  exit 77
fi
if [ ! -d "$module" ]; then
  echo "skipped: openai npm package not found at $module (scripts/install-deps.sh installs it)"
  exit 77
fi
log="$(mktemp)"
out="$(mktemp)"
if [ "$mode" = cluster ]; then
  "$keel" cluster up -m "$model" --host 127.0.0.1 --port 0 --served-model-name stories \
    --colocated 2 --threads-per-te 1 >"$out" 2>"$log" &
else
  "$keel" serve -m "$model" --host 127.0.0.1 --port 0 --served-model-name stories "${extra[@]}" \
    2>"$log" &
fi
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$log" "$out"' EXIT
port=""
for _ in $(seq 1 600); do
  if [ "$mode" = cluster ]; then
    port="$(sed -n 's/^KEEL_READY .*"port":\([0-9]*\).*"role":"gateway".*/\1/p' "$out" | head -1)"
  else
    port="$(sed -n 's/.*ready: listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)"
  fi
  [ -n "$port" ] && break
  kill -0 $pid 2>/dev/null || { echo "keel $mode exited:" >&2; cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "keel $mode did not start:" >&2; cat "$log" >&2; exit 1; }
KEEL_BASE_URL="http://127.0.0.1:$port/v1" OPENAI_MODULE="$module" node "$here/$script"
