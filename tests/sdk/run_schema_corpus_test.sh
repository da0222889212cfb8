#!/usr/bin/env bash
# Starts `keel serve` with stories260K on a free port of 127.0.0.1 and runs schema_corpus_test.cjs
# against it: JSON Schemas as zod (through zod-to-json-schema, the AI SDK, LangChain, the openai
# SDK, zod 4) and pydantic (1.10 from Debian, generated here; 2 from the committed fixture) write
# them. The npm packages and python3-pydantic come from scripts/install-deps.sh.
# Usage: run_schema_corpus_test.sh KEEL_BINARY SHARED_DIR (KEEL_SHARED_DIR, when set, wins)
set -euo pipefail
keel="$1"
model="${KEEL_SHARED_DIR:-$2}/models/stories260K/stories260K.gguf"
here="$(cd "$(dirname "$0")" && pwd)"
npm_dir="${KEEL_NPM_DIR:-${HOME:-/tmp}/.cache/keel/npm}"
# Like the other SDK test, skip (CTest SKIP_RETURN_CODE) saying why when a prerequisite is missing.
if [ ! -f "$model" ]; then
  echo "skipped: $model not found (shared reference data; set KEEL_SHARED_DIR)"
  exit 77
fi
if ! command -v node >/dev/null; then
  echo "skipped: node not found (scripts/install-deps.sh installs Node.js and npm)"
  exit 77
fi
for m in openai zod zod-to-json-schema ai @ai-sdk/openai-compatible @langchain/core ajv ajv-formats; do
  if [ ! -d "$npm_dir/node_modules/$m" ]; then
    echo "skipped: npm package $m not found in $npm_dir (scripts/install-deps.sh installs it)"
    exit 77
  fi
done
python=""
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import pydantic, sys; sys.exit(0 if pydantic.VERSION.startswith("1.") else 1)' 2>/dev/null; then
    python="$p"
    break
  fi
done
if [ -z "$python" ]; then
  echo "skipped: no python3 with pydantic 1 (scripts/install-deps.sh installs python3-pydantic)"
  exit 77
fi
log="$(mktemp)"
v1="$(mktemp)"
"$python" "$here/pydantic_corpus.py" >"$v1"
"$keel" serve -m "$model" --host 127.0.0.1 --port 0 --served-model-name stories 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$log" "$v1"' EXIT
port=""
for _ in $(seq 1 600); do
  port="$(sed -n 's/.*ready: listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)"
  [ -n "$port" ] && break
  kill -0 $pid 2>/dev/null || { echo "keel serve exited:" >&2; cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "keel serve did not start:" >&2; cat "$log" >&2; exit 1; }
KEEL_BASE_URL="http://127.0.0.1:$port/v1" KEEL_NPM_DIR="$npm_dir" PYDANTIC_V1="$v1" \
  PYDANTIC_V2="$here/fixtures/pydantic_v2_schemas.json" node "$here/schema_corpus_test.cjs"
