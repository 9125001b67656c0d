"""The README's screenshots of the explorer on the bundled pair: a run with a hover card, alpha moved (greyed
tokens that will change), the inspector, the "How to read this" panel, and each teaching tab (Compare with each
draft side by side, opened by a link, Trade-off, the Sandbox loaded from the run's inspected token, Strategies, a
lesson of Learn).

    HF_HUB_OFFLINE=1 python -m bench.screenshots [--out docs/screenshots]
    python -m bench.screenshots --sweep-report runs/bundled-default/report.html   # a sweep's figures
"""
import argparse
from pathlib import Path
from urllib.parse import urlencode

from app import build_app, launch
from app.pairs import PairCache
from bench.harness import VIEWPORT, chromium, free_port, prompts, set_alpha

PROMPT = prompts("page")["screenshots"]
COMPARE_LINK = dict(tab="compare", prompt=PROMPT, draft="each", rows="lossless,v3:0.5,chow:0.5", run="1")


def run_tab(page, out, tab, name):
    """Open a tab, run it on PROMPT with its defaults, wait for "Done" and its plot (if any), and shoot it."""
    page.click(f"button[role=tab]:has-text('{tab}')")
    page.fill(f"#{name}-prompt textarea", PROMPT)
    page.click(f"#{name}-run")
    page.wait_for_function(f"() => document.querySelector('#{name}-status')?.innerText.startsWith('Done')",
                           timeout=600000)
    if page.locator(f"#{name}-plot").count():
        page.wait_for_selector(f"#{name}-plot .js-plotly-plot")
    page.screenshot(path=out / f"bundled-{name}.png", full_page=True)


def shoot_compare_link(page, out, url):
    """Compare opened by a link: three rules, each with the draft model and with the head."""
    page.goto(f"{url}?{urlencode(COMPARE_LINK)}")
    page.wait_for_function("() => document.querySelector('#compare-status')?.innerText.startsWith('Done')",
                           timeout=600000)
    page.screenshot(path=out / "bundled-compare.png", full_page=True)


def shoot_tabs(page, out, position):
    """One screenshot per teaching tab but Compare, each run with its defaults on the same prompt; the sandbox holds
    q and p of the run's token at position."""
    run_tab(page, out, "Trade-off", "tradeoff")
    page.click("button[role=tab]:has-text('Sandbox')")
    page.fill("#sandbox-position input", str(position))
    page.click("#sandbox-load")
    page.wait_for_function("() => document.querySelector('#sandbox-token-0 textarea, #sandbox-token-0 input')"
                           "?.value !== 'The'", timeout=30000)
    page.wait_for_timeout(1000)
    page.screenshot(path=out / "bundled-sandbox.png", full_page=True)
    run_tab(page, out, "Strategies", "strategies")
    shoot_lesson(page, out, 2)


def shoot_lesson(page, out, k):
    """Lesson k of the Learn tab, run in place, with what to look for."""
    page.click("#start-lessons")
    for step in range(1, k):
        page.click(f"#lesson-{step}-next")
    page.click(f"#lesson-{k}-answer label >> nth=0")  # an answer committed first
    page.click(f"#lesson-{k}-run")
    page.wait_for_function(f"() => document.querySelector('#lesson-{k}-look')?.innerText.includes('What to look')",
                           timeout=600000)
    page.screenshot(path=out / "bundled-learn.png", full_page=True)


def shoot_report(report, out):
    """sweep-figure-<i>.png for each figure of a sweep's report (a self-contained page, opened from disk)."""
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(report.resolve().as_uri())
        page.wait_for_selector("[id^=figure-] .main-svg")
        for i, figure in enumerate(page.query_selector_all("[id^=figure-]")):
            figure.screenshot(path=out / f"sweep-figure-{i}.png")
    print(f"figures in {out}")


DONE = "() => document.querySelector('#status')?.innerText.startsWith('Done')"


def shoot_explore(page, out):
    """A run with a hover card, alpha moved (greyed tokens that will change), the inspector on a replaced token and
    the "How to read this" panel; the replaced token's position, for the Sandbox."""
    page.wait_for_selector("#run")
    page.fill("#prompt textarea", PROMPT)
    page.click("#run")
    page.wait_for_function(DONE, timeout=120000)
    page.wait_for_selector("#step-plot .js-plotly-plot")
    page.hover("#answer .tok[data-pos='6']")
    page.screenshot(path=out / "bundled-run.png", full_page=True)
    set_alpha(page, 0.6, "input")
    page.wait_for_selector("#answer .tok.will-change")
    page.screenshot(path=out / "bundled-alpha-moved.png", full_page=True)
    set_alpha(page, 0.6, "pointerup")
    page.wait_for_function(DONE + " && !document.querySelector('#answer .will-change')", timeout=120000)
    flip = page.get_attribute("#answer .tok.replaced", "data-pos") or "0"
    page.click(f"#answer .tok[data-pos='{flip}']")
    page.wait_for_selector("#inspector-plot .js-plotly-plot")
    page.screenshot(path=out / "bundled-inspector.png", full_page=True)
    page.click("#how-to-read button")
    page.wait_for_timeout(500)
    page.locator("#how-to-read").screenshot(path=out / "how-to-read.png")
    return flip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="docs/screenshots")
    parser.add_argument("--sweep-report", help="instead: shoot each figure of a sweep's report.html")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.sweep_report:
        return shoot_report(Path(args.sweep_report), out)
    pairs = PairCache()
    pairs.get("bundled")
    demo = build_app("bundled", pairs=pairs)
    _, url, _ = launch(demo, port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        with chromium() as browser:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(url)
            shoot_tabs(page, out, shoot_explore(page, out))
            shoot_compare_link(page, out, url)
    finally:
        demo.close()
    print(f"screenshots in {out}")


if __name__ == "__main__":
    main()
