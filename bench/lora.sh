#!/bin/bash
# Multi-LoRA decode throughput (keel_lora_bench): TinyLlama-1.1B shape, Q8_0 random weights, 8
# random rank-16 adapters on every projection (F32 A/B, as `keel make-lora` writes them), 8
# sequences decoding together — the base model alone vs each sequence with its own adapter vs all
# on one adapter, ratios from one run. The model and adapters are written into DIR on first use.
# Figures: docs/benchmarks.md.
#   bench/lora.sh [STEPS] [PROMPT] [THREADS] [RANK] [ADAPTERS]
set -eu
B=${KEEL_LORA_BENCH:-build/release/bench/keel_lora_bench}
DIR=${LORA_DIR:-/tmp/keel-lora-bench}
mkdir -p "$DIR"
exec "$B" "$DIR" "${1:-32}" "${2:-128}" "${3:-2}" "${5:-8}" "${4:-16}"
