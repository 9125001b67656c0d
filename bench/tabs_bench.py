"""Benchmarks of the teaching tabs: Compare (4 rows x 64 tokens: first tokens on screen, total), Trade-off (one
prompt x 4 rules x 6 alphas, with and without prefix sharing), Strategies (each lane's seconds at the page's defaults,
with each draft: which finishes first) and the Sandbox (a slider move: server-side and in
chromium until the plot has changed). Prints markdown rows for docs/app-benchmarks.md.

    HF_HUB_OFFLINE=1 python -m bench.tabs_bench [--pair bundled] [--repeats 3] [--skip-browser]
"""
import statistics
import time

from app.compare import CompareHandlers, preset_cells
from app.pairs import PairCache
from app.sandbox import START, SandboxHandlers
from app.strategies import DEFAULTS as STRATEGIES_DEFAULTS, StrategiesHandlers
from app.tradeoff import TradeoffHandlers
from bench.harness import VIEWPORT, app_process, bench_arguments, chromium, prompts
from cascade_core import finish

PROMPT = prompts("page")["run"]
COMPARE_ROWS = [("lossless", 0.0), ("opt", 0.2), ("v3", 0.5), ("chow", 0.5)]
FRONTIER_RULES = ["chow", "diff", "opt", "v3"]
# A slider move in the page, timed on the browser's clock: from the input event until the plot's DOM has changed
# and the next frame is painted.
SLIDER_TO_PAINT = """(value) => new Promise(resolve => {
  const plot = document.querySelector('#sandbox-plot');
  const slider = document.querySelector('#sandbox-q-0 input[type=range]');
  const start = performance.now();
  const observer = new MutationObserver(() => {
    observer.disconnect();
    requestAnimationFrame(() => requestAnimationFrame(() => resolve(performance.now() - start)));
  });
  observer.observe(plot, {subtree: true, childList: true, attributes: true});
  slider.value = value;
  slider.dispatchEvent(new Event('input', {bubbles: true}));
})"""


def bench_compare(pairs, pair_name, repeats):
    """Seconds until the first row shows tokens, and until all four rows are done (64 tokens each)."""
    handlers = CompareHandlers(pairs, pair_name)
    first, total = [], []
    for _ in range(repeats):
        start, shown = time.perf_counter(), None
        for view in handlers.run(PROMPT, handlers.default_draft, 4, 0.7, 0, 64, *preset_cells(COMPARE_ROWS)):
            shown = shown or time.perf_counter() - start
        if not view[-1].startswith("Done"):  # a refused run would be timed as a fast one
            raise SystemExit(f"Compare did not run: {view[-1]}")
        first.append(shown)
        total.append(time.perf_counter() - start)
    return statistics.median(first), statistics.median(total)


def bench_frontier(pairs, pair_name, max_new_tokens):
    """{share_prefix: (seconds, runs, tokens in the rows, tokens generated)} for one prompt x 4 rules x 6 alphas."""
    handlers = TradeoffHandlers(pairs, pair_name)
    s, rules, _ = handlers.settings(PROMPT, handlers.default_draft, FRONTIER_RULES, "auto:6", 4, 0.7, 0, max_new_tokens)
    results = {}
    for share in (True, False):
        start = time.perf_counter()
        rows = finish(handlers.frontier_steps(s, rules, "auto:6", share_prefix=share))
        results[share] = (time.perf_counter() - start, len(rows), sum(r["tokens"] for r in rows),
                          sum(r["generated_tokens"] for r in rows))
    return results


def bench_strategies(pairs, pair_name, draft, repeats):
    """{lane: median seconds} of the Strategies tab's run at its defaults on PROMPT with ``draft`` (lanes the draft
    cannot run left out), each lane timed call by call as the page draws it."""
    handlers, d = StrategiesHandlers(pairs, pair_name), STRATEGIES_DEFAULTS
    seconds = {}
    for _ in range(repeats):
        s, threshold = handlers.settings(PROMPT, draft, d["rule"], d["alpha"], d["threshold"], d["gamma"],
                                         d["temperature"], d["seed"], d["max_new_tokens"])
        for lane in finish(handlers.lane_steps(s, threshold)):
            if lane["totals"]:
                seconds.setdefault(lane["name"], []).append(lane["totals"]["seconds"])
    return {name: statistics.median(values) for name, values in seconds.items()}


def bench_sandbox_server(repeats):
    """Milliseconds of the slider handler (numbers, figure, table) plus the figure's JSON, as Gradio sends it."""
    labels, q, p = START
    times = []
    for i in range(repeats + 3):
        start = time.perf_counter()
        figure, _, _ = SandboxHandlers.update("v3", 0.2 + i / 100, *labels, *q, *p)
        figure.to_json()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times[3:]), max(times[3:])


def bench_sandbox_browser(repeats):
    """Milliseconds from a q slider's input event to the repainted plot, in chromium (tiny pair's app)."""
    with app_process("tiny") as (url, _), chromium() as browser:
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(url)
        page.click("button[role=tab]:has-text('Sandbox')")
        page.wait_for_selector("#sandbox-plot .js-plotly-plot")
        times = [page.evaluate(SLIDER_TO_PAINT, str(0.30 + (i % 2) * 0.2)) for i in range(repeats + 2)][2:]
    return statistics.median(times), max(times)


def main(argv=None):
    parser = bench_arguments(__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--frontier-tokens", type=int, default=32, help="max new tokens per frontier run")
    parser.add_argument("--skip-browser", action="store_true")
    args = parser.parse_args(argv)

    print("| measurement | median | worst |\n|---|---|---|")
    median, worst = bench_sandbox_server(20)
    print(f"| Sandbox slider move, server-side (numbers, figure, table, figure JSON) | {median:.1f} ms | "
          f"{worst:.1f} ms |")
    if not args.skip_browser:
        median, worst = bench_sandbox_browser(20)
        print(f"| Sandbox slider move in chromium, input event to repainted plot | {median:.0f} ms | {worst:.0f} ms |")
    pairs = PairCache()
    pairs.get(args.pair)
    first, total = bench_compare(pairs, args.pair, args.repeats)
    rows = ", ".join(f"{rule} {alpha:g}" for rule, alpha in COMPARE_ROWS)
    print(f"| Compare, {args.pair}, 4 rows ({rows}) x 64 tokens, T 0.7: first row's tokens on screen | "
          f"{first:.2f} s | |")
    print(f"| … all four rows done | {total:.2f} s | |")
    for share, (seconds, runs, tokens, generated) in bench_frontier(pairs, args.pair, args.frontier_tokens).items():
        print(f"| Trade-off, {args.pair}, 1 prompt x {', '.join(FRONTIER_RULES)} x auto:6 alphas x "
              f"{args.frontier_tokens} tokens, prefix sharing {'on' if share else 'off'}: {runs} runs, {tokens} tokens "
              f"in them, {generated} generated (pilot included in the time) | {seconds:.1f} s | |")
    d = STRATEGIES_DEFAULTS
    for draft in ("head", "model"):
        lanes = bench_strategies(pairs, args.pair, draft, args.repeats)
        first = min(lanes, key=lanes.get)
        print(f"| Strategies, {args.pair} with the {draft} draft, {d['rule']} {d['alpha']:g}, gamma auto, "
              f"T {d['temperature']:g}, {d['max_new_tokens']} tokens: "
              + ", ".join(f"{name} {value:.2f} s" for name, value in lanes.items()) + f" | first: {first} | |")


if __name__ == "__main__":
    main()
