#!/usr/bin/env python3
"""prefill_load.py PORT N CONCURRENCY PROMPT_WORDS MAX_TOKENS SEED: sends N completions with
distinct prompts of PROMPT_WORDS words (seeded), CONCURRENCY at a time, and prints one JSON line:
wall seconds, prompt and completion tokens. Used by bench/moe_eplb.sh."""
import json, random, sys, threading, time, urllib.request

port, n, conc, words, max_tokens, seed = sys.argv[1], *map(int, sys.argv[2:7])
VOCAB = ("the a once upon time little girl boy dog cat house tree sun moon happy sad big small "
         "went saw played ran jumped friend mom dad said day night park ball red blue green").split()
rng = random.Random(seed)
prompts = [" ".join(rng.choice(VOCAB) for _ in range(words)) for _ in range(n)]
totals = {"prompt_tokens": 0, "completion_tokens": 0}
lock = threading.Lock()
todo = list(range(n))

def worker():
    while True:
        with lock:
            if not todo:
                return
            i = todo.pop()
        body = json.dumps({"prompt": prompts[i], "max_tokens": max_tokens, "temperature": 0,
                           "ignore_eos": True}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                     {"Content-Type": "application/json"})
        usage = json.load(urllib.request.urlopen(req, timeout=600))["usage"]
        with lock:
            for k in totals:
                totals[k] += usage[k]

t0 = time.time()
threads = [threading.Thread(target=worker) for _ in range(conc)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"wall_s": round(time.time() - t0, 3), **totals}))
