#!/usr/bin/env bash
# Structured outputs: the grammar's cost per generated token and its share of a decode step, on a
# TinyLlama-1.1B-shaped random-weight model (Q4_0) with the Llama 2 SentencePiece vocabulary (32K
# tokens), for four JSON Schemas (bench/grammar/schemas.json: each run once cold, once warm) and a
# GBNF grammar of any JSON value (bench/grammar/json.gbnf). Figures: docs/benchmarks.md.
# Usage: bench/grammar.sh [threads]   (needs build/release: keel_grammar_bench, and keel for the
# model unless $KEEL_GRAMMAR_MODEL points at one)
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${1:-2}
MODEL=${KEEL_GRAMMAR_MODEL:-/tmp/keel-grammar-bench/tinyllama-q4_0-spm.gguf}
SHARED=${KEEL_SHARED_DIR:-../shared}
if [ ! -f "$MODEL" ]; then
  mkdir -p "$(dirname "$MODEL")"
  build/release/tools/keel make-model --shape tinyllama-1.1b --type q4_0 \
    --vocab "$SHARED/vocab/ggml-vocab-llama-spm.gguf" --ctx 2048 -o "$MODEL"
fi
build/release/bench/keel_grammar_bench "$MODEL" bench/grammar/schemas.json 200 8 "$THREADS"
build/release/bench/keel_grammar_bench "$MODEL" bench/grammar/json.gbnf 200 4 "$THREADS"
