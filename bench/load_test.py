"""A load test of the explorer's APIs on loopback: every tab's calls, concurrent, abandoned and never read.

    HF_HUB_OFFLINE=1 python -m bench.load_test [--pair tiny] [--clients 16] [--calls 5] [--sessions 500]
                                               [--seconds 1800]   (make load-test)
    HF_HUB_OFFLINE=1 python -m bench.load_test --short-beside-long   (16 long /run calls, then 14 short ones)

The app runs in its own process (``python app.py``), as users run it. Measured: a probe's latency alone (a small
/run); the probe beside a long call of each kind running (/run, /compare, /frontier, /strategies at their
largest), and right after a client of each kind died 4 s into its call; the probe after never-read calls (posted,
never listened to); ``--clients`` threads making ``--calls`` mixed calls each (/run, /compare, /sandbox,
/frontier, /strategies in turn), with abandoned calls of every kind among them: errors, "queue full" answers,
/run and /compare outputs that differ from the engine's own runs, p50/p95 latency; and the server's memory
(RSS) before and after ``--sessions`` calls, each from a new session. Everything is bounded by ``--seconds``;
the report goes to docs/app-benchmarks.md.
"""
import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from gradio_client import Client

from bench.harness import APP_BENCHMARKS, app_process, prompts, write_section
from cascade_core import generate, load_pair
from cascade_core.speed.kernels import cpu_description

PROMPTS = prompts("load")
COMPARE_ROWS = [{"rule": "v3", "alpha": 0.5}, {"rule": "chow", "alpha": 0.5}]
# Each tab's largest call within the request budget: what an abandoned or a neighbouring call can cost.
LONG = {
    "/run": dict(prompt="Tell me a long story.", max_new_tokens=1024),
    "/compare": dict(prompt="Tell me a long story.", max_new_tokens=1024,
                     rows=[{"rule": r, "alpha": a} for r, a in (("chow", 0.5), ("diff", 0.1), ("opt", 0.2),
                                                                ("v1", 0.2), ("v2", 0.2), ("v3", 0.5))]),
    "/frontier": dict(prompt="Tell me a long story.", rules=["lossless", "chow", "opt", "v3"], alphas="auto:6",
                      max_new_tokens=256),
    "/strategies": dict(prompt="Tell me a long story.", max_new_tokens=1024),
}
ABANDON = """
import json, os, sys, time
from gradio_client import Client
Client(sys.argv[1], verbose=False).submit(**json.loads(sys.argv[2]), api_name=sys.argv[3])
time.sleep(float(sys.argv[4]))
os._exit(0)
"""


def request(i, max_new_tokens):
    return dict(prompt=PROMPTS[i % len(PROMPTS)], rule="v3", alpha=0.3, gamma=4, temperature=1.0,
                max_new_tokens=max_new_tokens, seed=i % len(PROMPTS))


def compare_request(i, max_new_tokens):
    return dict(prompt=PROMPTS[i % len(PROMPTS)], rows=COMPARE_ROWS, gamma=4, temperature=1.0, seed=i % len(PROMPTS),
                max_new_tokens=max_new_tokens)


def mixed_call(i, max_new_tokens):
    """The i-th call of the mixed load: (API, arguments), every tab in turn, small enough to answer in seconds."""
    prompt, seed = PROMPTS[i % len(PROMPTS)], i % len(PROMPTS)
    return [("/run", request(i, max_new_tokens)),
            ("/compare", compare_request(i, max_new_tokens // 2)),
            ("/sandbox", dict(q=[0.5, 0.3, 0.2], p=[0.2, 0.5, 0.3], rule="v3", alpha=0.3)),
            ("/frontier", dict(prompt=prompt, rules=["v3"], alphas="0.2,0.6", seed=seed, max_new_tokens=8)),
            ("/strategies", dict(prompt=prompt, seed=seed, max_new_tokens=8))][i % 5]


def call(url, api, args):
    start = time.perf_counter()
    answer = json.loads(Client(url, verbose=False).predict(**args, api_name=api))
    return time.perf_counter() - start, answer


def probe(url, max_new_tokens):
    return call(url, "/run", request(0, max_new_tokens))[0]


def abandon(url, api, after_seconds):
    """A client that submits api's long call and dies after_seconds later without a word."""
    return subprocess.Popen([sys.executable, "-c", ABANDON, url, json.dumps(LONG[api]), api, str(after_seconds)])


def beside(url, api, max_new_tokens):
    """The probe's latency while api's long call runs (cancelled afterwards)."""
    job = Client(url, verbose=False).submit(**LONG[api], api_name=api)
    time.sleep(2)  # the long call is generating
    seconds = probe(url, max_new_tokens)
    job.cancel()
    return seconds


def timed_predict(client, args):
    start = time.perf_counter()
    client.predict(**args, api_name="/run")
    return time.perf_counter() - start


RUN_ORDER = ("prompt", "rule", "alpha", "gamma", "temperature", "max_new_tokens", "seed")  # /run's positional data


def run_body(args):
    """A /run call's arguments as the plain HTTP API takes them (the rest take their defaults)."""
    return {"data": [args[k] for k in RUN_ORDER]}


def raw_predict(http, url, args):
    """One /run over plain HTTP, the README's sequence (POST the data, then GET the stream to its end): seconds."""
    start = time.perf_counter()
    posted = http.post(f"{url}gradio_api/call/run", json=run_body(args))
    http.get(f"{url}gradio_api/call/run/{posted.json()['event_id']}").raise_for_status()
    return time.perf_counter() - start


def callers(url, kind, n):
    """n callers of /run (args -> seconds), each with its own connection made before the clock starts: gradio_client
    Clients (making one reads the app's config and API, work a client does once, which fourteen made at once would
    add to the latency measured: docs/lab/2026-12-07-short-calls.md), or plain HTTP clients, whose own work is a
    fraction of gradio_client's (each Client streams a call through threads of its own)."""
    if kind == "gradio_client":
        return [lambda args, c=c: timed_predict(c, args) for c in [Client(url, verbose=False) for _ in range(n)]]
    return [lambda args, h=h: raw_predict(h, url, args) for h in [httpx.Client(timeout=300) for _ in range(n)]]


def short_beside_long(url, kind, longs=16, shorts=14, long_tokens=1000, short_tokens=16):
    """(one short /run alone, the latencies of ``shorts`` short calls sent together 3 s after ``longs`` long ones):
    whether a short call waits behind long ones for a generation slot. ``kind``: who makes the short calls
    (``callers``)."""
    calls = callers(url, kind, shorts)
    alone = statistics.median(calls[0](request(0, short_tokens)) for _ in range(3))
    client = Client(url, verbose=False)
    jobs = [client.submit(**request(i, long_tokens), api_name="/run") for i in range(longs)]
    time.sleep(3)
    latencies = sent_together(calls, short_tokens)
    for job in jobs:
        job.cancel()
    time.sleep(3)  # the cancelled long calls leave the batch before the next measurement
    return alone, sorted(latencies)


def sent_together(calls, tokens):
    """The latencies of one short /run per caller, all sent at once (one thread each), in the order they ended."""
    latencies = []
    threads = [threading.Thread(target=lambda i=i, c=c: latencies.append(c(request(i, tokens))))
               for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def short_calls_report(pair, url):
    """The section of docs/app-benchmarks.md for ``--short-beside-long``, each measurement with both kinds of caller."""
    kinds = ("gradio_client", "plain HTTP")
    runs = {kind: (short_beside_long(url, kind), short_beside_long(url, kind, longs=0)[1]) for kind in kinds}
    p50 = statistics.median

    def row(name, cell):
        return f"| {name} | " + " | ".join(cell(*runs[kind]) for kind in kinds) + " |"
    return "\n".join([
        f"## Short calls beside long ones: {pair} pair", "",
        f"`python -m bench.load_test --pair {pair} --short-beside-long`, {time.strftime('%Y-%m-%d')}, "
        f"{cpu_description()}, the app in its own process on loopback: 16 /run calls of 1000 tokens sent first, then "
        "14 /run calls of 16 tokens together 3 s later (v3 alpha 0.3, gamma 4, T 1), each caller connected before the "
        "clock starts: gradio_client Clients, then plain HTTP (the README's POST and GET), in this process.", "",
        "| measurement | " + " | ".join(kinds) + " |", "|---|---|---|",
        row("one short call on an idle server (median of 3)", lambda long, idle: f"{long[0]:.2f} s"),
        row("the 14 short calls beside 16 long ones: p50 / max", lambda long, idle: (
            f"{p50(long[1]):.2f} s / {long[1][-1]:.2f} s ({p50(long[1]) / long[0]:.1f}x / "
            f"{long[1][-1] / long[0]:.1f}x alone)")),
        row("the same 14 short calls on an idle server: p50 / max", lambda long, idle: (
            f"{p50(idle):.2f} s / {idle[-1]:.2f} s ({p50(idle) / long[0]:.1f}x alone)")),
        row("what the long calls add to a short call's p50", lambda long, idle: f"{p50(long[1]) / p50(idle):.2f}x"),
        ""])


def never_read(url, n):
    """n calls posted over the plain HTTP API whose results nobody ever reads."""
    body = run_body(request(0, 1024))
    for _ in range(n):
        httpx.post(f"{url}gradio_api/call/run", json=body, timeout=10)


def rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024


def new_sessions(url, n):
    """n /sandbox calls over the plain HTTP API, each one a new session, read to the end."""
    body = {"data": [[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], "v3", 0.3]}
    for _ in range(n):
        event_id = httpx.post(f"{url}gradio_api/call/sandbox", json=body, timeout=30).json()["event_id"]
        httpx.get(f"{url}gradio_api/call/sandbox/{event_id}", timeout=60)


def load(url, clients, calls, max_new_tokens, expected, deadline):
    results, lock = [], threading.Lock()

    def client(c):
        for k in range(calls):
            if time.monotonic() > deadline:
                return
            i = c * calls + k
            api, args = mixed_call(i, max_new_tokens)
            try:
                seconds, answer = call(url, api, args)
                if api == "/run":
                    same = answer["tokens"] == expected["/run"][i % len(PROMPTS)]
                elif api == "/compare":
                    same = [t["tokens"] for t in answer] == expected["/compare"][i % len(PROMPTS)]
                else:
                    same = True
                outcome = "ok" if same else "mismatch"
            except Exception as error:  # every failure is counted and named in the report
                seconds, outcome = None, "busy" if "Queue is full" in str(error) else f"error: {api}: {error}"
            with lock:
                results.append((outcome, seconds))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    killed = []
    for t in threads:
        t.start()
    for api in LONG:  # an abandoned call of every kind among the clients
        time.sleep(1)
        killed.append(abandon(url, api, 2))
    for t in threads:
        t.join()
    for p in killed:
        p.wait()
    return results


def expected_outputs(pair, max_new_tokens):
    """The engine's own tokens for the mixed load's /run and /compare calls, per prompt."""
    runs = [generate(pair, **request(i, max_new_tokens)).tokens for i in range(len(PROMPTS))]
    rows = []
    for i in range(len(PROMPTS)):
        r = compare_request(i, max_new_tokens // 2)
        rows.append([generate(pair, r["prompt"], rule=row["rule"], alpha=row["alpha"], gamma=4, temperature=1.0,
                              seed=r["seed"], max_new_tokens=r["max_new_tokens"]).tokens for row in r["rows"]])
    return {"/run": runs, "/compare": rows}


def measure(args):
    """Every measurement of the load test, on one server: the probe alone, beside each long call, after abandoned
    and never-read calls; the mixed concurrent load; the server's memory over new sessions."""
    deadline = time.monotonic() + args.seconds
    expected = expected_outputs(load_pair(args.pair, progress=lambda m: None), args.max_new_tokens)
    m = {}
    with app_process(args.pair) as (url, pid):
        m["alone"] = statistics.median(probe(url, args.max_new_tokens) for _ in range(3))
        m["beside"] = {api: beside(url, api, args.max_new_tokens) for api in LONG}
        m["after_abandoned"] = {}
        for api in LONG:
            abandon(url, api, 4).wait()
            m["after_abandoned"][api] = probe(url, args.max_new_tokens)
        never_read(url, 6)
        m["after_never_read"] = probe(url, args.max_new_tokens)
        start = time.perf_counter()
        m["results"] = load(url, args.clients, args.calls, args.max_new_tokens, expected, deadline)
        m["wall"] = time.perf_counter() - start
        m["memory"] = [rss_mb(pid)]
        new_sessions(url, args.sessions)
        m["memory"].append(rss_mb(pid))
    return m


def outcome_rows(results, wall):
    """The mixed load's rows: answered, mismatched, refused, failed calls, latency and wall time."""
    latencies = sorted(s for outcome, s in results if s is not None)
    count = {kind: sum(outcome.startswith(kind) for outcome, _ in results)
             for kind in ("ok", "mismatch", "busy", "error")}
    p95 = latencies[max(0, round(0.95 * len(latencies)) - 1)] if latencies else None
    errors = sorted({outcome for outcome, _ in results if outcome.startswith("error")})
    return [f"| mixed concurrent calls (every tab in turn) answered / made | {count['ok'] + count['mismatch']} / "
            f"{len(results)} (an abandoned long call of each of the 4 kinds among them) |",
            f"| /run and /compare outputs different from the engine's own runs | {count['mismatch']} |",
            f"| refused as \"queue full\" | {count['busy']} |",
            f"| errors | {count['error']}{': ' + '; '.join(errors) if errors else ''} |",
            f"| latency p50 / p95 under load | {statistics.median(latencies):.2f} s / {p95:.2f} s |" if latencies else
            "| latency | - |",
            f"| wall time of the concurrent part | {wall:.1f} s |"]


def report(args, m):
    def delay(seconds):
        return f"{seconds:.2f} s ({seconds - m['alone']:+.2f} s)"

    before, after = m["memory"]
    return "\n".join([
        f"## Load test: {args.pair} pair, every tab, {args.clients} clients x {args.calls} calls", "",
        f"`python -m bench.load_test --pair {args.pair} --clients {args.clients} --calls {args.calls} "
        f"--max-new-tokens {args.max_new_tokens} --sessions {args.sessions}`, {time.strftime('%Y-%m-%d')}, "
        f"{cpu_description()}, the app in its own process on loopback. The probe: /run v3 alpha 0.3, gamma 4, T = 1, "
        f"{args.max_new_tokens} tokens. Long calls, each tab's largest within the request budget: /run 1024 tokens; "
        "/compare the paper's six rules x 1024; /frontier 4 rules x auto:6 x 256 (and the pilot); /strategies 1024.",
        "", "| measurement | value |", "|---|---|",
        f"| the probe alone (median of 3) | {m['alone']:.2f} s |",
        *[f"| the probe beside a long {api} call | {delay(s)} |" for api, s in m["beside"].items()],
        *[f"| the probe right after a client died 4 s into a long {api} call | {delay(s)} |"
          for api, s in m["after_abandoned"].items()],
        f"| the probe after 6 posted, never-read 1024-token /run calls | {delay(m['after_never_read'])} |",
        *outcome_rows(m["results"], m["wall"]),
        f"| server memory (RSS) before / after {args.sessions} calls from new sessions | {before:.0f} MB / "
        f"{after:.0f} MB ({after - before:+.1f} MB) |", ""])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pair", default="tiny")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=1800)
    parser.add_argument("--out", default=str(APP_BENCHMARKS))
    parser.add_argument("--short-beside-long", action="store_true", help="only the short calls beside long ones")
    args = parser.parse_args(argv)
    if args.short_beside_long:
        with app_process(args.pair) as (url, _):
            text = short_calls_report(args.pair, url)
        key = f"## Short calls beside long ones: {args.pair} pair"
    else:
        text, key = report(args, measure(args)), f"## Load test: {args.pair} pair, every tab"
    print(text)
    write_section(args.out, text, key)


if __name__ == "__main__":
    main()
