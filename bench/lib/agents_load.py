"""Agent programs against an OpenAI-compatible server: each program is a chain of calls made one
after another (the next call resends the history plus a tool result, as an agent does), all calls
of one program carrying `X-Program-Id`. Program lengths are heavy-tailed (80 % make 1-2 calls,
20 % make 10-20); programs arrive as a Poisson process for DURATION seconds at LOAD x the capacity
(calls per second, measured first with CONCURRENCY closed-loop callers, or given as --capacity).
Prints one JSON line: programs finished, calls, wall time, calls/s, the mean completion time
(arrival to last call's end) of short (<= 2 calls) and long programs, and their p90.

    python3 bench/lib/agents_load.py PORT [--load 1.2] [--duration 90] [--max-tokens 32]
        [--concurrency 4] [--capacity CALLS_PER_S] [--seed 1]
"""
import argparse
import json
import random
import socket
import statistics
import sys
import threading
import time

STORY = ("Once upon a time, there was a little girl named Lily. She liked to play in the park "
         "with her friends. One day, she found a big red ball under a tree.")


def call(port, prompt, max_tokens, program):
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True}).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"X-Program-Id: " + program.encode() + b"\r\nContent-Length: " +
              str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, payload = data.partition(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n", 1)[0]:
        raise RuntimeError("call failed: " + head.split(b"\r\n", 1)[0].decode(errors="replace"))
    return json.loads(payload)["choices"][0]["text"]


def run_program(port, name, calls, max_tokens):
    history = STORY
    for turn in range(calls):
        text = call(port, history, max_tokens, name)
        # The next turn resends the history, the model's turn and a short tool result; the
        # history is capped so a long program's prompts stay within the context.
        history = (history + text + f" [tool {turn}: ok]")[-1500:]


def capacity(port, concurrency, seconds, max_tokens):
    done = [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker(i):
        while time.monotonic() < stop:
            call(port, STORY, max_tokens, f"cap-{i}")
            with lock:
                done[0] += 1

    start = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done[0] / (time.monotonic() - start)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--load", type=float, default=1.2)
    ap.add_argument("--duration", type=float, default=90)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--capacity", type=float, default=0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    cap = a.capacity or capacity(a.port, a.concurrency, 20, a.max_tokens)
    rng = random.Random(a.seed)
    programs = []
    t = 0.0
    mean_calls = 0.8 * 1.5 + 0.2 * 15
    rate = a.load * cap / mean_calls  # programs per second
    while True:
        t += rng.expovariate(rate)
        if t > a.duration:
            break
        calls = rng.randint(1, 2) if rng.random() < 0.8 else rng.randint(10, 20)
        programs.append({"at": t, "calls": calls})
    results = [None] * len(programs)
    start = time.monotonic()

    def launch(i, p):
        delay = start + p["at"] - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        arrived = time.monotonic()
        try:
            run_program(a.port, f"prog-{a.seed}-{i}", p["calls"], a.max_tokens)
            results[i] = time.monotonic() - arrived
        except Exception as e:  # a failed program is reported, never hidden
            print(f"program {i}: {e}", file=sys.stderr)

    threads = [threading.Thread(target=launch, args=(i, p)) for i, p in enumerate(programs)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.monotonic() - start
    short = [r for r, p in zip(results, programs) if r is not None and p["calls"] <= 2]
    long_ = [r for r, p in zip(results, programs) if r is not None and p["calls"] > 2]

    def p90(xs):
        return sorted(xs)[int(0.9 * (len(xs) - 1))] if xs else None

    calls = sum(p["calls"] for p, r in zip(programs, results) if r is not None)
    print(json.dumps({
        "capacity_calls_per_s": round(cap, 3), "programs": len(programs),
        "finished": len(short) + len(long_), "calls": calls, "wall_s": round(wall, 1),
        "calls_per_s": round(calls / wall, 3),
        "short_n": len(short), "short_mean_s": round(statistics.mean(short), 2) if short else None,
        "short_p90_s": round(p90(short), 2) if short else None,
        "long_n": len(long_), "long_mean_s": round(statistics.mean(long_), 2) if long_ else None,
        "long_p90_s": round(p90(long_), 2) if long_ else None}))


if __name__ == "__main__":
    main()
