"""Streams one greedy completion from a keel server and prints its timing as JSON:
time to first token and the decode rate between the first and the last streamed token.

    python3 bench/lib/stream_decode.py PORT MAX_TOKENS [PROMPT_WORDS]
"""
import json
import socket
import sys
import time


def main():
    port, max_tokens = int(sys.argv[1]), int(sys.argv[2])
    words = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    prompt = " ".join(["the quick brown fox jumps over the lazy dog"] * max(1, words // 9))
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True, "stream": True}).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    t0 = time.monotonic()
    stamps, buf = [], b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        now = time.monotonic()
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if b'"text"' in event:
                stamps.append(now)
    if len(stamps) < 2:
        sys.exit(f"stream_decode: {len(stamps)} tokens streamed")
    print(json.dumps({"tokens": len(stamps), "ttft_s": stamps[0] - t0,
                      "decode_tps": (len(stamps) - 1) / (stamps[-1] - stamps[0])}))


main()
