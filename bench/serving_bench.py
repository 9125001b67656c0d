"""Serving benchmark: the app in its own process (``python app.py``), as users run it, measured side by side with
the engine in this process. What issue 34 asks of the running batch and the page state:

1. a lone 64-token /run against the same run in-process (rounds alternate; medians);
2. eight 64-token /run calls (different prompts and rules) one after another, then all posted at once: total
   seconds, and every answer equal to its solo run; a 16-token call alone, and posted beside the eight;
3. a 16-token /run alone, and while four /compare calls of 6 rows x 1024 tokens run;
4. the server's memory (RSS) before and after ``--sessions`` API calls, each a new session;
5. a 1024-token run through /run, and the same run in the page until "Done" (chromium), with the bytes the page
   received while it ran;
6. in this process, the eight with four gammas (2, 3, 4, 6): one batch for all (what the running batch does), against a
   batch per gamma taking blocks in turn (what it did before);
7. (chromium, tiny pair) a page that ran Explore and Compare, then ``--calls`` API calls from new sessions and
   ``--pages`` other pages that each ran Explore: does it still inspect a token, recolour on alpha, re-run, and
   open a Compare row?

    HF_HUB_OFFLINE=1 python bench/serving_bench.py [--pair bundled] [--rounds 3] [--sessions 500] [--calls 200]
                                                   [--pages 40] [--skip-browser]
"""
import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from gradio_client import Client  # noqa: E402

from bench.load_test import rss_mb  # noqa: E402
from bench.server import app_process  # noqa: E402
from cascade_core import finish, generate, load_pair, stream_batch  # noqa: E402
from cascade_core.kernels import cpu_description  # noqa: E402

PROMPTS = ["Who is Buzz Aldrin?", "Write a haiku about rain.", "List three uses of a paperclip.", "Why is the sky blue?"]
EIGHT = [dict(prompt=PROMPTS[i % 4], rule=rule, alpha=alpha, seed=i, max_new_tokens=64)
         for i, (rule, alpha) in enumerate([("v3", 0.5), ("chow", 0.5), ("opt", 0.2), ("lossless", 0.0), ("v3", 0.3),
                                            ("chow", 0.3), ("diff", 0.1), ("v1", 0.2)])]
LONG_PROMPT = "Tell me a long story about a dragon who learns to bake bread."
SHORT = dict(prompt="Name a colour.", rule="v3", alpha=0.5, seed=0, max_new_tokens=16)
SIX_ROWS = [{"rule": r, "alpha": a} for r, a in (("chow", 0.5), ("diff", 0.1), ("opt", 0.2), ("v1", 0.2), ("v2", 0.2),
                                                 ("v3", 0.5))]


def run_call(url, args, client=None):
    """(seconds, answer) of a /run call; ``client``: one made beforehand (making one reads the app's config)."""
    client = client or Client(url, verbose=False)
    start = time.perf_counter()
    answer = json.loads(client.predict(**args, api_name="/run"))
    return time.perf_counter() - start, answer


def together(url, calls):
    """Every call posted at once (a thread each, its client made beforehand): (seconds until the last answered,
    answers, each call's seconds)."""
    results, clients = [None] * len(calls), [Client(url, verbose=False) for _ in calls]

    def one(i):
        results[i] = run_call(url, calls[i], clients[i])

    start = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start, [answer for _, answer in results], [seconds for seconds, _ in results]


def lone_run(url, pair, rounds):
    """Medians of a 64-token /run and of the same run in-process, alternating."""
    served, local, client = [], [], Client(url, verbose=False)
    args = dict(EIGHT[0], gamma="auto", temperature=0.7)
    for _ in range(rounds):
        served.append(run_call(url, args, client)[0])
        start = time.perf_counter()
        generate(pair, **{k: v for k, v in args.items()})
        local.append(time.perf_counter() - start)
    return statistics.median(served), statistics.median(local)


def eight_calls(url, pair):
    solo = [generate(pair, gamma="auto", temperature=0.7, **args).tokens for args in EIGHT]
    client = Client(url, verbose=False)
    start = time.perf_counter()
    sequential = [run_call(url, args, client)[1] for args in EIGHT]
    one_by_one = time.perf_counter() - start
    alone = run_call(url, SHORT, client)[0]
    concurrent, answers, seconds = together(url, EIGHT + [SHORT])
    # beside each other == one after another, in the server; and the server's == this process's solo runs (with a
    # head and gamma "auto" the blocks follow each process's measured prices, so these may differ where they do)
    shared = sum(a["tokens"] == b["tokens"] for a, b in zip(answers, sequential))
    here = sum(a["tokens"] == s for a, s in zip(sequential, solo))
    return one_by_one, concurrent, (shared, here), alone, seconds[-1]


def beside_compare(url):
    client = Client(url, verbose=False)
    alone = run_call(url, SHORT, client)[0]
    jobs = [Client(url, verbose=False).submit(prompt=PROMPTS[i], rows=SIX_ROWS, temperature=1.0, max_new_tokens=1024,
                                              api_name="/compare") for i in range(4)]
    time.sleep(5)  # all four are generating
    beside = run_call(url, SHORT, client)[0]
    for job in jobs:
        job.cancel()
    return alone, beside


def new_sessions(url, n):
    """n /run calls of one token over the plain HTTP API, each a new session, read to the end."""
    body = {"data": ["Hi", "v3", 0.5, "auto", 0.7, 1, 0, ""]}
    for _ in range(n):
        event_id = httpx.post(f"{url}gradio_api/call/run", json=body, timeout=30).json()["event_id"]
        httpx.get(f"{url}gradio_api/call/run/{event_id}", timeout=60)


def sessions_memory(url, pid, n):
    """RSS before and after ``new_sessions(url, n)``."""
    before = rss_mb(pid)
    new_sessions(url, n)
    return before, rss_mb(pid)


def page_run(url, tokens):
    """(seconds of a ``tokens``-token /run, seconds of the same run in the page until "Done", MB the page received
    meanwhile): v3 0.5 at gamma 4 and T 1 on a prompt that asks for a long answer (at gamma auto with a head the
    blocks follow each process's measured prices, and at T 0.7 the run may end early, so the two could differ)."""
    from playwright.sync_api import sync_playwright

    from bench.app_bench import CLICK_TO_DONE
    from tests.browser import CHROMIUM, CHROMIUM_ARGS, set_number

    args = dict(prompt=LONG_PROMPT, rule="v3", alpha=0.5, gamma=4, temperature=1.0, seed=0, max_new_tokens=tokens)
    served, answer = run_call(url, args)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        page.wait_for_selector("#run")
        page.fill("#prompt textarea", LONG_PROMPT)
        for field, value in (("max-new-tokens", tokens), ("gamma", 4), ("temperature", 1)):
            set_number(page, f"#{field}", value)
        network, received = page.context.new_cdp_session(page), []
        network.send("Network.enable")
        network.on("Network.dataReceived", lambda event: received.append(event["dataLength"]))
        seconds = page.evaluate(CLICK_TO_DONE)
        shown = page.locator("#answer .tok").count()
        browser.close()
    return served, seconds, sum(received) / 1e6, len(answer["tokens"]), shown


def mixed_gammas(pair, rounds, gammas=(2, 3, 4, 6)):
    """Medians of the eight (T 0.7, the i-th at gammas[i % 4]) in one batch, and in a batch per gamma whose blocks
    alternate (rounds alternate); and whether every row's tokens were the same both ways."""
    rows = [dict(args, temperature=0.7, gamma=gammas[i % len(gammas)]) for i, args in enumerate(EIGHT)]

    def one_batch():
        return finish(stream_batch(pair, rows))

    def batch_per_gamma():
        steps, traces = [stream_batch(pair, [r for r in rows if r["gamma"] == g]) for g in gammas], {}
        while len(traces) < len(steps):
            for i, batch in enumerate(steps):
                if i not in traces:
                    try:
                        next(batch)
                    except StopIteration as end:
                        traces[i] = iter(end.value)
        return [next(traces[gammas.index(r["gamma"])]) for r in rows]

    seconds, tokens = {one_batch: [], batch_per_gamma: []}, {}
    for _ in range(rounds):
        for way in seconds:
            start = time.perf_counter()
            tokens[way] = [trace.tokens for trace in way()]
            seconds[way].append(time.perf_counter() - start)
    return statistics.median(seconds[one_batch]), statistics.median(seconds[batch_per_gamma]), \
        tokens[one_batch] == tokens[batch_per_gamma]


def shows(page, condition, seconds=10):
    """Whether the page meets the JavaScript condition within ``seconds`` (a server busy with 40 open pages can take
    more than a second to answer)."""
    from playwright.sync_api import TimeoutError

    try:
        page.wait_for_function(f"() => {condition}", timeout=seconds * 1000)
        return True
    except TimeoutError:
        return False


def page_keeps_state(calls, pages):
    """A page's views after a burst of API sessions and other pages, on the tiny pair's app (chromium)."""
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM, CHROMIUM_ARGS, set_alpha

    done = "() => document.querySelector('#status')?.innerText.startsWith('Done')"
    checks = {}
    with app_process("tiny") as (url, pid), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        page.fill("#prompt textarea", "Once upon a time")
        page.click("#run")
        page.wait_for_function(done, timeout=60000)
        page.click("button[role=tab]:has-text('Compare')")
        page.click("#compare-run")
        page.wait_for_function("() => document.querySelector('#compare-status')?.innerText.startsWith('Done')",
                               timeout=60000)
        page.click("button[role=tab]:has-text('Explore')")
        new_sessions(url, calls)
        before = rss_mb(pid)
        for _ in range(pages):  # left open: each holds its run
            other = browser.new_page()
            other.goto(url)
            other.click("#run")
            other.wait_for_function(done, timeout=60000)
        checks["MB per open page"] = (rss_mb(pid) - before) / max(1, pages)
        page.click("#answer .tok[data-pos='3']")
        checks["inspector"] = shows(page, "document.querySelector('#inspector-text')?.innerText.includes('#3')")
        set_alpha(page, 0.9, "input")
        checks["alpha recolour"] = shows(page, "document.querySelector('#status')?.innerText"
                                               ".startsWith('Under v3, alpha = 0.90')")
        page.click("#rerun")
        page.wait_for_function(done, timeout=60000)
        checks["re-run"] = page.locator("#status").inner_text().startswith("Done")
        page.click("button[role=tab]:has-text('Compare')")
        page.click("#compare-rows .row-label[data-row='1']")
        page.wait_for_function(done + " && document.querySelector('#tab-explore')?.offsetParent !== null",
                               timeout=60000)
        checks["compare row opens"] = page.locator("#tab-explore").is_visible()
        browser.close()
    return checks


PARTS = ("lone", "eight", "compare", "memory", "page", "gammas", "state")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pair", default="bundled")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--page-tokens", type=int, default=1024)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"which to measure, of {', '.join(PARTS)}")
    parser.add_argument("--skip-browser", action="store_true", help="leave out page and state")
    args = parser.parse_args()
    parts = set(args.parts.split(",")) - ({"page", "state"} if args.skip_browser else set())
    print(f"CPU: {cpu_description()}; pair {args.pair}\n")
    pair = load_pair(args.pair)
    print("| measurement | value |\n|---|---|")
    with app_process(args.pair) as (url, pid):
        run_call(url, SHORT)  # loads and prices the pair in the server
        if "lone" in parts:
            served, local = lone_run(url, pair, args.rounds)
            print(f"| lone 64-token /run (v3 0.5, gamma auto, T 0.7), median of {args.rounds} | {served:.2f} s served, "
                  f"{local:.2f} s in-process: {served / local:.2f}x |")
        if "eight" in parts:
            one_by_one, concurrent, (shared, here), alone, short_beside = eight_calls(url, pair)
            print(f"| eight 64-token /run calls (different prompts and rules), one after another | {one_by_one:.1f} s |")
            print(f"| … the same eight and a 16-token call posted at once | {concurrent:.1f} s: "
                  f"{concurrent / one_by_one:.2f}x; answers equal to the same calls one after another: {shared} of 8; "
                  f"those equal to this process's solo runs: {here} of 8 |")
            print(f"| 16-token /run alone / posted beside the eight | {alone:.2f} s / {short_beside:.2f} s |")
        if "compare" in parts:
            alone, beside = beside_compare(url)
            print(f"| 16-token /run alone / while four /compare calls of 6 x 1024 tokens run | {alone:.2f} s / "
                  f"{beside:.2f} s |")
        if "memory" in parts:
            before, after = sessions_memory(url, pid, args.sessions)
            print(f"| server RSS before / after {args.sessions} one-token /run calls, each a new session | "
                  f"{before:.0f} MB / {after:.0f} MB ({after - before:+.0f} MB) |")
        if "page" in parts:
            served, shown, megabytes, tokens, on_page = page_run(url, args.page_tokens)
            print(f"| a run of up to {args.page_tokens} tokens ({tokens} through /run, {on_page} in the page; v3 0.5, "
                  f"gamma 4, T 1): /run / the page's Run to Done | {served:.1f} s / {shown:.1f} s: "
                  f"{shown / served:.2f}x; the page received {megabytes:.1f} MB |")
    if "gammas" in parts:
        shared, apart, same = mixed_gammas(pair, args.rounds)
        print(f"| the eight at gammas 2, 3, 4, 6 (T 0.7) in-process: one batch / a batch per gamma, median of "
              f"{args.rounds} | {shared:.2f} s / {apart:.2f} s: {shared / apart:.2f}x; tokens the same both ways: "
              f"{'yes' if same else 'NO'} |")
    if "state" in parts:
        checks = page_keeps_state(args.calls, args.pages)
        per_page = checks.pop("MB per open page")
        print(f"| an open page after {args.calls} API sessions and {args.pages} other open pages (tiny pair) | " +
              ", ".join(f"{name}: {'works' if ok else 'BROKEN'}" for name, ok in checks.items()) +
              f"; the server's RSS grew {per_page:.2f} MB per open page (each ran Explore, 64 tokens) |")

if __name__ == "__main__":
    main()
