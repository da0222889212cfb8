"""Streams N greedy completions one after another from an OpenAI-compatible server and prints the
time per output token (the gap between consecutive streamed tokens) as JSON: count, median, p90,
p99 and the mean, in milliseconds.

    python3 bench/lib/tpot.py PORT [N] [MAX_TOKENS]
"""
import json
import socket
import statistics
import sys
import time


def stream(port, max_tokens):
    body = json.dumps({"prompt": "Once upon a time, there was a little girl named Lily.",
                       "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                       "stream": True}).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    stamps, buf = [], b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        now = time.monotonic()
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if line.startswith(b"data: {") and b'"text":""' not in line:
                    stamps.append(now)
    s.close()
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
