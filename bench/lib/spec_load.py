"""Runs a fixed set of story prompts against an OpenAI-compatible server (keel serve or
llama-server) at a given concurrency, greedy and streamed, and prints one JSON line: completion
tokens per second over the wall time (throughput), the median per-request decode rate (first to
last streamed token), the tokens generated, and each request's text digest (so two servers' rows
can be checked for the same output).

    python3 bench/lib/spec_load.py PORT CONCURRENCY MAX_TOKENS [ROUNDS] [EXTRA_JSON]

EXTRA_JSON: fields merged into every request body (e.g. '{"speculative": "ngram"}').
"""
import hashlib
import json
import socket
import statistics
import sys
import threading
import time

PROMPTS = [
    "Once upon a time, there was a little girl named Lily.",
    "One day, a boy named Tim went to the park with his mom.",
    "There was a big red ball in the garden.",
    "Sam and his dog liked to play outside in the sun.",
    "The little bird could not find its nest.",
    "Anna had a new toy. It was a shiny blue car.",
    "Once upon a time, in a small house, there lived a kind old man.",
    "Tom wanted to help his friend find the lost cat.",
]


def one(port, prompt, max_tokens, extra):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    body.update(extra)
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(data)).encode() + b"\r\nConnection: close\r\n\r\n" + data)
    stamps, text, buf, usage = [], [], b"", None
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        now = time.monotonic()
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                try:
                    j = json.loads(line[6:])
                except ValueError:
                    continue
                if j.get("usage"):
                    usage = j["usage"].get("completion_tokens", usage)
                choices = j.get("choices") or [{}]
                t = choices[0].get("text", "")
                if t:
                    stamps.append(now)
                    text.append(t)
    s.close()
    return stamps, "".join(text), usage


def main():
    port, conc, max_tokens = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    extra = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    jobs = [p for _ in range(rounds) for p in PROMPTS]
    lock = threading.Lock()
    results = {}

    def worker():
        while True:
            with lock:
                if not jobs:
                    return
                i = len(jobs) - 1
                p = jobs.pop()
            stamps, text, usage = one(port, p, max_tokens, extra)
            with lock:
                results[i] = (p, stamps, text, usage if usage is not None else len(stamps))

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    # Tokens from each stream's usage (a speculative step may stream several tokens in one chunk);
    # the streamed chunks where a server gives no usage.
    tokens = sum(r[3] for r in results.values())
    rates = [(n - 1) / (s[-1] - s[0]) for _, s, _, n in results.values()
             if len(s) > 2 and s[-1] > s[0]]
    digest = hashlib.sha256("\x00".join(results[k][2] for k in sorted(results)).encode())
    digest = digest.hexdigest()
    print(json.dumps({"concurrency": conc, "requests": len(results), "tokens": tokens,
                      "wall_s": wall, "throughput_tps": tokens / wall,
                      "median_decode_tps": statistics.median(rates) if rates else 0,
                      "text_sha256": digest[:16]}))


if __name__ == "__main__":
    main()
