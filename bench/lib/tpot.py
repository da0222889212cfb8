"""Streams N greedy completions one after another from an OpenAI-compatible server and prints the
time per output token (the gap between consecutive streamed tokens) as JSON: count, median, p90,
p99 and the mean, in milliseconds.

    python3 bench/lib/tpot.py PORT [N] [MAX_TOKENS]
"""
import json
import statistics
import sys

from spec_load import one  # the streamed request and its token stamps

PROMPT = "Once upon a time, there was a little girl named Lily."


def stream(port, max_tokens):
    stamps, _, _ = one(port, PROMPT, max_tokens, {"ignore_eos": True})
    return [1000 * (b - a) for a, b in zip(stamps, stamps[1:])]


def main():
    port = int(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    max_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    gaps = []
    for _ in range(n):
        gaps += stream(port, max_tokens)
    gaps.sort()

    def pct(p):
        return round(gaps[min(len(gaps) - 1, int(p * len(gaps)))], 2)

    print(json.dumps({"tokens": len(gaps), "median_ms": pct(0.5), "p90_ms": pct(0.9),
                      "p99_ms": pct(0.99), "mean_ms": round(statistics.mean(gaps), 2)}))


if __name__ == "__main__":
    main()
