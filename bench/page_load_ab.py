"""Page load, this checkout against another (an earlier commit's worktree), both apps in their own processes
(``python app.py``) and loads alternating between them after one warm-up load each: this VM's speed moves too much
for loads timed apart to compare (docs/app-benchmarks.md).

    git worktree add /tmp/before <commit>
    HF_HUB_OFFLINE=1 python bench/page_load_ab.py --before /tmp/before [--pair tiny] [--rounds 8]
"""
import argparse
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.server import app_process  # noqa: E402
from tests.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def page_load(browser, url):
    """Seconds from navigation until Explore's Run button is in the page."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_selector("#run")
    seconds = time.perf_counter() - start
    page.close()
    return seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="the other checkout's folder")
    parser.add_argument("--pair", default="tiny")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    checkouts = {"before": Path(args.before), "this checkout": ROOT}
    with ExitStack() as stack, sync_playwright() as playwright:
        urls = {name: stack.enter_context(app_process(args.pair, root=folder))[0] for name, folder in checkouts.items()}
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for url in urls.values():
            page_load(browser, url)  # warm-up
        loads = {name: [] for name in urls}
        for _ in range(args.rounds):
            for name, url in urls.items():
                loads[name].append(page_load(browser, url))
        browser.close()
    for name, seconds in loads.items():
        print(f"| {name} | {statistics.median(seconds):.2f} s | {max(seconds):.2f} s |")


if __name__ == "__main__":
    main()
