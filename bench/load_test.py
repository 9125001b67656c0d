"""A load test of the explorer's /run API on loopback: concurrent clients, abandoned calls among them.

    HF_HUB_OFFLINE=1 python bench/load_test.py [--pair tiny] [--clients 16] [--calls 5] [--seconds 900]   (make load-test)

The app runs in its own process (``python app.py``), as users run it. Measured: a probe's latency alone; the
delay an abandoned call (a client killed 4 s into a 1024-token run) and never-read calls (posted, never
listened to) add to the next caller; then ``--clients`` threads making ``--calls`` calls each, with abandoned
calls started among them: errors, "queue full" answers, outputs that differ from the engine's own run of the
same settings, and p50/p95 latency. Everything is bounded by ``--seconds``; the report goes to
docs/app-benchmarks.md.
"""
import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from gradio_client import Client  # noqa: E402

from bench.markdown import write_section  # noqa: E402
from bench.server import app_process  # noqa: E402
from cascade_core import generate, load_pair  # noqa: E402
from cascade_core.kernels import cpu_description  # noqa: E402

PROMPTS = ["Who is Buzz Aldrin?", "Write a haiku about rain.", "List three uses of a paperclip.", "Why is the sky blue?"]
ABANDON = """
import os, sys, time
from gradio_client import Client
Client(sys.argv[1], verbose=False).submit(prompt="Tell me a long story.", max_new_tokens=1024, api_name="/run")
time.sleep(float(sys.argv[2]))
os._exit(0)
"""


def request(i, max_new_tokens):
    return dict(prompt=PROMPTS[i % len(PROMPTS)], rule="v3", alpha=0.3, gamma=4, temperature=1.0,
                max_new_tokens=max_new_tokens, seed=i % len(PROMPTS))


def call(url, req):
    start = time.perf_counter()
    trace = json.loads(Client(url, verbose=False).predict(**req, api_name="/run"))
    return time.perf_counter() - start, trace["tokens"]


def probe(url, max_new_tokens):
    return call(url, request(0, max_new_tokens))[0]


def abandon(url, after_seconds):
    """A client that submits a 1024-token run and dies after_seconds later without a word."""
    return subprocess.Popen([sys.executable, "-c", ABANDON, url, str(after_seconds)])


def never_read(url, n):
    """n calls posted over the plain HTTP API whose results nobody ever reads."""
    body = {"data": [PROMPTS[0], "v3", 0.3, 4, 1.0, 1024, 0]}
    for _ in range(n):
        httpx.post(f"{url}gradio_api/call/run", json=body, timeout=10)


def load(url, clients, calls, max_new_tokens, expected, deadline):
    results, lock = [], threading.Lock()

    def client(c):
        for k in range(calls):
            if time.monotonic() > deadline:
                return
            i = c * calls + k
            req = request(i, max_new_tokens)
            try:
                seconds, tokens = call(url, req)
                outcome = "ok" if tokens == expected[i % len(PROMPTS)] else "mismatch"
            except Exception as error:  # every failure is counted and named in the report
                seconds, outcome = None, "busy" if "Queue is full" in str(error) else f"error: {error}"
            with lock:
                results.append((outcome, seconds))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    killed = []
    for t in threads:
        t.start()
    for _ in range(max(1, clients // 8)):  # abandoned calls among the clients
        time.sleep(1)
        killed.append(abandon(url, 2))
    for t in threads:
        t.join()
    for p in killed:
        p.wait()
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pair", default="tiny")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=900)
    parser.add_argument("--out", default=str(ROOT / "docs" / "app-benchmarks.md"))
    args = parser.parse_args()
    deadline = time.monotonic() + args.seconds
    pair = load_pair(args.pair, progress=lambda m: None)
    expected = [generate(pair, **request(i, args.max_new_tokens)).tokens for i in range(len(PROMPTS))]
    with app_process(args.pair) as url:
        alone = statistics.median(probe(url, args.max_new_tokens) for _ in range(3))
        abandon(url, 4).wait()
        after_abandoned = probe(url, args.max_new_tokens)
        never_read(url, 6)
        after_never_read = probe(url, args.max_new_tokens)
        start = time.perf_counter()
        results = load(url, args.clients, args.calls, args.max_new_tokens, expected, deadline)
        wall = time.perf_counter() - start
    latencies = sorted(s for outcome, s in results if s is not None)
    count = {kind: sum(outcome.startswith(kind) for outcome, _ in results) for kind in ("ok", "mismatch", "busy", "error")}
    p95 = latencies[max(0, round(0.95 * len(latencies)) - 1)] if latencies else None
    errors = sorted({outcome for outcome, _ in results if outcome.startswith("error")})
    text = "\n".join([
        f"## Load test: {args.pair} pair, {args.clients} clients x {args.calls} calls", "",
        f"`python bench/load_test.py --pair {args.pair} --clients {args.clients} --calls {args.calls} "
        f"--max-new-tokens {args.max_new_tokens}`, {time.strftime('%Y-%m-%d')}, {cpu_description()}, "
        "the app in its own process on loopback; every call v3 alpha 0.3, gamma 4, T = 1, "
        f"{args.max_new_tokens} tokens, one of {len(PROMPTS)} prompts with its own seed.", "",
        "| measurement | value |", "|---|---|",
        f"| one call alone (median of 3) | {alone:.2f} s |",
        f"| next call after a client died 4 s into a 1024-token run | {after_abandoned:.2f} s "
        f"(+{after_abandoned - alone:.2f} s) |",
        f"| next call after 6 posted, never-read 1024-token calls | {after_never_read:.2f} s "
        f"(+{after_never_read - alone:.2f} s) |",
        f"| concurrent calls answered / made | {count['ok'] + count['mismatch']} / {len(results)} "
        f"({max(1, args.clients // 8)} abandoned 1024-token calls among them) |",
        f"| outputs different from the engine's own run | {count['mismatch']} |",
        f"| refused as \"queue full\" | {count['busy']} |",
        f"| errors | {count['error']}{': ' + '; '.join(errors) if errors else ''} |",
        f"| latency p50 / p95 under load | {statistics.median(latencies):.2f} s / {p95:.2f} s |" if latencies else
        "| latency | - |",
        f"| wall time of the concurrent part | {wall:.1f} s |", ""])
    print(text)
    write_section(args.out, text, f"## Load test: {args.pair} pair")


if __name__ == "__main__":
    main()
