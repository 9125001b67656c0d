"""App benchmarks: server-side recolouring of a 512-token trace after an alpha change, page load, the time from
Run to the first coloured token on screen, and a whole 64-token run through the API and the page against the
engine in-process (bundled pair, real browser, the app in its own process for the browser's measurements).

    HF_HUB_OFFLINE=1 python -m bench.app_bench [--pair bundled] [--repeats 5] [--skip-browser]

Prints markdown rows for docs/app-benchmarks.md.
"""
import statistics
import time

import gradio as gr

from app.explore import DEFAULT_ALPHA, DEFAULT_GAMMA, DEFAULT_RULE, DEFAULT_TEMPERATURE, ExploreHandlers, Run
from app.pairs import PairCache
from app.settings import auto_or_fixed_gamma
from bench.harness import VIEWPORT, app_process, bench_arguments, chromium, milliseconds, prompts, set_number
from cascade_core import generate, load_pair

ALPHAS = [0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95]
# Timed inside the page, on the browser's clock: click Run, then the frame after the first token lands in the
# DOM (two animation frames: the first runs before that frame paints). Timing from Python instead would
# add the driver's own delay: Playwright's client shares this process, and its GIL, with the generating
# server, so it learns of the token late (docs/app-benchmarks.md, "The explorer").
CLICK_TO_FIRST_PAINT = """() => new Promise(resolve => {
  const answer = document.querySelector('#answer');
  const start = performance.now();
  const observer = new MutationObserver(() => {
    if (!answer.querySelector('.tok')) return;
    observer.disconnect();
    requestAnimationFrame(() => requestAnimationFrame(() => resolve((performance.now() - start) / 1000)));
  });
  observer.observe(answer, {subtree: true, childList: true});
  document.querySelector('#run').click();
})"""


def bench_recolour(repeats):
    """The alpha-drag handler end to end on the server: recolour, token HTML, the figures, and their serialisation
    as Gradio sends them."""
    trace = generate(load_pair("tiny"), "Once upon a time", rule="v3", alpha=0.3, max_new_tokens=512,
                     stop_at_eos=False)
    assert len(trace.positions) == 512
    run = Run(trace, "tiny")
    plot = gr.Plot()

    def drag():
        for alpha in ALPHAS:
            views = ExploreHandlers.recolour(run, "v3", alpha)
            for figure in (views.step_plot, views.alpha_plot, views.decision_plot):
                plot.postprocess(figure)

    parts = {
        "recolour (a* lookup)": lambda: [trace.recolour("v3", a) for a in ALPHAS],
        "whole handler incl. figures + JSON": drag,
    }
    return {name: tuple(t / len(ALPHAS) for t in milliseconds(fn, repeats)) for name, fn in parts.items()}


def bench_browser(pair, repeats, prompt):
    """Seconds to load the pair in this process; then, with the app in its own process (as a visitor's browser
    meets it: not sharing this driver's interpreter), page loads (after one that warms the server) and Run to
    the first coloured token."""
    start = time.perf_counter()
    PairCache().get(pair)
    load_seconds = time.perf_counter() - start
    page_loads, first_tokens = [], []
    with app_process(pair) as (url, _), chromium() as browser:
        for repeat in range(repeats + 1):
            page = browser.new_page(viewport=VIEWPORT)
            start = time.perf_counter()
            page.goto(url)
            page.wait_for_selector("#run")
            page_load = time.perf_counter() - start
            page.fill("#prompt textarea", prompt)
            set_number(page, "#max-new-tokens", 16)
            first_token = page.evaluate(CLICK_TO_FIRST_PAINT)
            if repeat:  # the first warms the server
                page_loads.append(page_load)
                first_tokens.append(first_token)
            page.wait_for_function("() => document.querySelector('#status')?.innerText.startsWith('Done')",
                                   timeout=120000)
            page.close()
    return load_seconds, page_loads, first_tokens


# Click Run, stop when the status line says "Done: n tokens" after "Generating" (the last run's "Done" may be
# redrawn first): the whole run as a visitor sees it, on the browser's clock.
CLICK_TO_DONE = """() => new Promise(resolve => {
  const status = document.querySelector('#status');
  const start = performance.now();
  let running = false;
  const observer = new MutationObserver(() => {
    running = running || status.innerText.startsWith('Generating');
    if (!running || !/^Done: \\d+ tokens/.test(status.innerText)) return;
    observer.disconnect();
    resolve((performance.now() - start) / 1000);
  });
  observer.observe(status, {subtree: true, childList: true, characterData: true});
  document.querySelector('#run').click();
})"""
WHOLE_RUN = dict(prompt=prompts("page")["run"], rule=DEFAULT_RULE, alpha=DEFAULT_ALPHA,
                 gamma=auto_or_fixed_gamma(DEFAULT_GAMMA), temperature=DEFAULT_TEMPERATURE, seed=0,
                 max_new_tokens=64)  # the page's defaults


def bench_whole_run(pair_name, repeats):
    """Seconds of the same 64-token run (the page's defaults), alternating: the engine called in this process,
    the /run API of the app in its own process, and the page in chromium until "Done"."""
    from gradio_client import Client

    pair = load_pair(pair_name, progress=lambda m: None)
    times = {"engine in-process": [], "/run API": [], "page, Run to Done": []}
    with app_process(pair_name) as (url, _), chromium() as browser:
        client = Client(url, verbose=False)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(url)
        page.wait_for_selector("#run")
        page.fill("#prompt textarea", WHOLE_RUN["prompt"])
        client.predict(**{**WHOLE_RUN, "max_new_tokens": 4}, api_name="/run")  # the app's first call warms it up
        runs = {"engine in-process": lambda: generate(pair, **WHOLE_RUN),
                "/run API": lambda: client.predict(**WHOLE_RUN, api_name="/run")}
        for r in range(repeats):
            for name, fn in (list(runs.items()) if r % 2 else list(runs.items())[::-1]):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
            times["page, Run to Done"].append(page.evaluate(CLICK_TO_DONE))
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None):
    parser = bench_arguments(__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--prompt", default=prompts("page")["first token"])
    parser.add_argument("--skip-browser", action="store_true")
    args = parser.parse_args(argv)

    print("| measurement | median | worst |\n|---|---|---|")
    for name, (median, worst) in bench_recolour(args.repeats).items():
        print(f"| 512 tokens, alpha change: {name} | {median:.2f} ms | {worst:.2f} ms |")
    if args.skip_browser:
        return
    whole = bench_whole_run(args.pair, args.repeats)
    engine = whole["engine in-process"]
    for name, seconds in whole.items():
        print(f"| whole 64-token run ({args.pair}, {DEFAULT_RULE} alpha {DEFAULT_ALPHA}, T {DEFAULT_TEMPERATURE}): "
              f"{name} | {seconds:.2f} s | "
              f"{seconds / engine:.2f}x the engine |")
    load_seconds, page_loads, first_tokens = bench_browser(args.pair, args.repeats, args.prompt)
    print(f"| {args.pair} pair load (once per process) | {load_seconds:.2f} s | |")
    print(f"| page load (navigation to controls ready) | {statistics.median(page_loads):.2f} s | "
          f"{max(page_loads):.2f} s |")
    print(f"| Run to first coloured token ({args.pair}) | {statistics.median(first_tokens):.2f} s | "
          f"{max(first_tokens):.2f} s |")


if __name__ == "__main__":
    main()
