#!/usr/bin/env python3
"""long_prefill_ttft.py PORT LONG SHORT VOCAB BUDGET: a short request's time to first token while a
long prompt prefills (issue 36 item 3). Idle: three SHORT-token completions one after another;
then one LONG-token completion (max_tokens 1) with SHORT-token completions sent every 2 s while it
runs. Prompts are random token ids in [3, VOCAB). Prints one JSON line: the idle TTFTs, the TTFTs
under the long prefill, the long request's time, its chunk time (its time over ceil(LONG/BUDGET)
chunks, BUDGET being the server's --max-batched-tokens) and the bound 2 x idle median + chunk."""
import json, math, random, statistics, sys, threading, time, urllib.request

port, long_n, short_n, vocab, budget = sys.argv[1], *map(int, sys.argv[2:6])
rng = random.Random(7)

def ttft(n, timeout=3600):
    """Streams a completion of n random token ids; returns seconds to its first token event."""
    ids = [rng.randrange(3, vocab) for _ in range(n)]
    body = json.dumps({"prompt": ids, "max_tokens": 1, "temperature": 0, "stream": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                 {"Content-Type": "application/json"})
    t0 = time.time()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        for line in r:
            if line.startswith(b"data: {"):
                return time.time() - t0
    raise SystemExit("long_prefill_ttft: a stream ended with no token")

ttft(short_n)  # warm-up
idle = [ttft(short_n) for _ in range(3)]
done = threading.Event()
long_s = {}

def long_request():
    long_s["seconds"] = ttft(long_n)
    done.set()

t = threading.Thread(target=long_request)
t.start()
busy = []
time.sleep(2.0)
while not done.is_set():  # every short sent while the long prefill runs
    started = time.time()
    busy.append(ttft(short_n))
    time.sleep(max(0.0, 2.0 - (time.time() - started)))
t.join()
chunk = long_s["seconds"] / math.ceil(long_n / budget)
bound = 2 * statistics.median(idle) + chunk
print(json.dumps({"idle_ttft_s": [round(x, 3) for x in idle],
                  "busy_ttft_s": [round(x, 3) for x in busy],
                  "busy_median_s": round(statistics.median(busy), 3) if busy else None,
                  "busy_max_s": round(max(busy), 3) if busy else None,
                  "long_s": round(long_s["seconds"], 2), "chunk_s": round(chunk, 3),
                  "bound_s": round(bound, 3),
                  "within_bound": bool(busy) and max(busy) <= bound}))
