#!/usr/bin/env bash
# JSON Schema keywords as grammar, measured: engine_schema_keywords_test's 27 keyword schemas, 200
# seeded samples each at temperature 1, on stories260K and on the built-in random model
# (builtin:random), every sample validated by ajv + ajv-formats (bench/schema_keywords_check.cjs);
# then the schema corpus (tests/sdk/schema_corpus_test.cjs) against `keel serve -m builtin:random`
# (a 2048-token context: every object schema is also sent as a strict tool). Figures:
# docs/structured-outputs.md.
# Usage: bench/schema_keywords.sh   (needs build/release: keel, engine_schema_keywords_test; node
# and the npm packages of scripts/install-deps.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${KEEL_SHARED_DIR:-../shared}
NPM_DIR=${KEEL_NPM_DIR:-${HOME:-/tmp}/.cache/keel/npm}
KEEL=build/release/tools/keel
work="$(mktemp -d)"
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$work"' EXIT
export KEEL_HOME="$work/home"  # the random model is written here on first use
"$KEEL" run -m builtin:random -p "x" -n 1 -t 1 >/dev/null 2>&1
random_model="$(ls "$KEEL_HOME"/*.gguf | head -1)"
for model in stories260K random; do
  out="$work/$model.jsonl"
  echo "== per-keyword samples on $model"
  env_model=()
  if [ "$model" = random ]; then env_model=(KEEL_SCHEMA_MODEL="$random_model"); fi
  env "${env_model[@]}" KEEL_SHARED_DIR="$SHARED" KEEL_SCHEMA_SAMPLES=200 KEEL_SCHEMA_OUT="$out" \
    build/release/tests/engine/engine_schema_keywords_test | grep '^\[ keywords \] [0-9]' || true
  node bench/schema_keywords_check.cjs "$out" "$NPM_DIR"
done
echo "== schema corpus on builtin:random (tools included)"
/usr/bin/python3 tests/sdk/pydantic_corpus.py >"$work/pydantic_v1.json"
"$KEEL" serve -m builtin:random --host 127.0.0.1 --port 0 --served-model-name random \
  2>"$work/serve.log" &
pid=$!
port=""
for _ in $(seq 1 600); do
  port="$(sed -n 's/.*ready: listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/serve.log" | head -1)"
  [ -n "$port" ] && break
  sleep 0.1
done
KEEL_BASE_URL="http://127.0.0.1:$port/v1" KEEL_NPM_DIR="$NPM_DIR" KEEL_MAX_TOKENS=1500 KEEL_TOOL_MAX_TOKENS=600 \
  PYDANTIC_V1="$work/pydantic_v1.json" \
  PYDANTIC_V2=tests/sdk/fixtures/pydantic_v2_schemas.json node tests/sdk/schema_corpus_test.cjs |
  grep -v '^    '
