"""One speed story in Debian's chromium on the tiny pair (issue 64, item 2): for one setting (v3 alpha 0.5, the
default draft, the same prompt, seed, gamma, temperature and length in every tab) Explore's sentence, Compare's row,
the Trade-off's point on its speed-up axis and Strategies' speculative-cascade lane show the same speed-up over the
target alone: costs.speedup_over_target, priced with the pair's measured calls."""
import re

from test_browser import SCREENSHOTS, open_page

SAME = "prompt=Hello+there&gamma=4&temperature=0.7&seed=3&max_new_tokens=16&run=1"
DONE = "() => document.querySelector('#{id}')?.innerText.startsWith('Done')"
TIMES = re.compile(r"(\d+\.\d\d)×")


def shown(page, url, status, read):
    page.goto(url)
    page.wait_for_function(DONE.format(id=status), timeout=120000)
    return read(page)


def explore(page):
    return float(re.search(r"on this machine: (\d+\.\d\d)×", page.inner_text("#speedup")).group(1))


def compare(page):
    row = next(line for line in page.inner_text("#compare-stats").splitlines() if line.startswith("v3 alpha 0.5"))
    return float(TIMES.search(row).group(1))


def tradeoff(page):
    page.click("#tradeoff-x label:has-text('speed-up over the target alone')")
    page.wait_for_function("() => document.querySelector('#tradeoff-plot .xtitle')?.textContent"
                           ".includes('speed-up over the target alone')")
    x = page.eval_on_selector("#tradeoff-plot .js-plotly-plot", "el => el.data.find(t => t.name === 'v3').x[0]")
    return round(x, 2)


def strategies(page):
    lane = page.locator("#strategies-texts .lane", has_text="speculative cascade").first
    return float(TIMES.search(lane.locator(".lane-speedup").inner_text()).group(1))


def test_one_setting_shows_one_speedup_in_every_tab(tiny_app_url):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with open_page(tiny_app_url) as page:
        numbers = {
            "explore": shown(page, f"{tiny_app_url}?tab=explore&rule=v3&alpha=0.5&{SAME}", "status", explore),
            "compare": shown(page, f"{tiny_app_url}?tab=compare&rows=v3:0.5&{SAME}", "compare-status", compare),
            "tradeoff": shown(page, f"{tiny_app_url}?tab=tradeoff&rules=v3&alphas=0.5&{SAME}", "tradeoff-status",
                              tradeoff),
            "strategies": shown(page, f"{tiny_app_url}?tab=strategies&rule=v3&alpha=0.5&{SAME}", "strategies-status",
                                strategies),
        }
        page.screenshot(path=SCREENSHOTS / "tiny-strategies-speedup.png", full_page=True)
    assert len(set(numbers.values())) == 1, numbers
    assert numbers["explore"] > 0
