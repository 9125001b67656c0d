"""Each teaching tab in Debian's chromium on the tiny pair: it runs, draws, survives bad input, and opens runs in
Explore. Screenshots go to docs/screenshots/."""
import pytest

from test_browser import SCREENSHOTS, open_page

TAB_DONE = "() => document.querySelector('#{id}')?.innerText.startsWith('Done')"


@pytest.fixture(scope="module")
def page(tiny_app_url):
    with open_page(tiny_app_url, height=1100) as page:
        yield page


def open_tab(page, name):
    page.click(f"button[role=tab]:has-text('{name}')")


def explore_done(page):
    page.wait_for_function("() => document.querySelector('#status')?.innerText.startsWith('Done')", timeout=60000)


def test_compare(page):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    open_tab(page, "Compare")
    page.click("#compare-run")
    page.wait_for_function(TAB_DONE.format(id="compare-status"), timeout=60000)
    assert page.locator("#compare-rows .compare-row").count() == 6
    assert page.locator("#compare-rows .diverge").count() >= 1
    assert page.eval_on_selector("#compare-rows .tok.diverge", "e => getComputedStyle(e).outlineStyle") != "none"
    assert "the draft's token, verified and kept with probability 1" in page.inner_text("#compare-rows .legend")
    assert "| chow alpha 0.5 |" not in page.inner_text("#compare-stats")  # rendered as a table, not Markdown text
    assert "chow alpha 0.5" in page.inner_text("#compare-stats")
    page.screenshot(path=SCREENSHOTS / "tiny-compare.png", full_page=True)
    page.click("#compare-rows .row-label[data-row='2']")
    explore_done(page)
    assert page.locator("#tab-explore").is_visible()
    assert page.input_value("#alpha input[type=number]") == "0.2"  # row 3 of the paper's six rules: opt 0.2


def test_tradeoff(page):
    open_tab(page, "Trade-off")
    page.fill("#tradeoff-alphas textarea, #tradeoff-alphas input", "auto:3")
    page.click("#tradeoff-run")
    page.wait_for_function(TAB_DONE.format(id="tradeoff-status"), timeout=120000)
    page.wait_for_selector("#tradeoff-plot .js-plotly-plot")
    assert page.locator("#tradeoff-plot .legendtext:has-text('Pareto front (least TV at each cost)')").count() == 1
    assert "mean TV to the target" in page.text_content("#tradeoff-plot .ytitle")
    page.screenshot(path=SCREENSHOTS / "tiny-tradeoff.png", full_page=True)
    page.click("#tradeoff-quality label:has-text('target NLL')")  # a diagnostic: no front
    page.wait_for_function("() => document.querySelector('#tradeoff-plot .ytitle').textContent.includes('NLL')")
    assert page.locator("#tradeoff-plot .legendtext:has-text('Pareto front')").count() == 0
    page.click("#tradeoff-point input")
    page.click("#tradeoff-point li >> nth=1")
    page.click("#tradeoff-open")
    explore_done(page)


def test_sandbox(page):
    open_tab(page, "Sandbox")
    page.wait_for_selector("#sandbox-plot .js-plotly-plot")
    before = page.inner_text("#sandbox-text")
    page.eval_on_selector("#sandbox-q-0 input[type=range]", """el => { el.value = '0.01';
        el.dispatchEvent(new Event('input', {bubbles: true})); }""")
    page.wait_for_function("before => document.querySelector('#sandbox-text').innerText !== before", arg=before)
    assert "Enumerating the draft's proposals gives exactly pi" in page.inner_text("#sandbox-text")
    page.screenshot(path=SCREENSHOTS / "tiny-sandbox.png", full_page=True)
    for i in range(8):  # all of q at zero: a clear message, the page keeps working
        page.eval_on_selector(f"#sandbox-q-{i} input[type=range]", """el => { el.value = '0';
            el.dispatchEvent(new Event('input', {bubbles: true})); }""")
    page.wait_for_function("() => document.querySelector('#sandbox-text').innerText.includes('positive weight')")
    page.eval_on_selector("#sandbox-q-1 input[type=range]", """el => { el.value = '0.5';
        el.dispatchEvent(new Event('input', {bubbles: true})); }""")
    page.wait_for_function("() => document.querySelector('#sandbox-text').innerText.includes('TV(p, q)')")


def test_strategies(page):
    open_tab(page, "Strategies")
    page.click("#strategies-run")
    page.wait_for_function(TAB_DONE.format(id="strategies-status"), timeout=120000)
    page.wait_for_selector("#strategies-plot .js-plotly-plot")
    # the four strategies and the target alone, the lane every speed-up is measured against
    assert page.locator("#strategies-texts .lane").count() == 5
    assert "target alone" in page.locator("#strategies-texts .lane h4").all_inner_texts()
    page.screenshot(path=SCREENSHOTS / "tiny-strategies.png", full_page=True)


def test_typed_markup_is_shown_as_text(page):
    """A value with HTML and Markdown in it comes back in the status line and the toast as typed: no element of it
    enters the page and nothing it names is fetched."""
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    open_tab(page, "Trade-off")
    markup = "<img src=x id=injected><b>b</b> **bold** [link](/y)"
    page.fill("#tradeoff-alphas textarea, #tradeoff-alphas input", markup)
    page.click("#tradeoff-run")
    page.wait_for_function("() => document.querySelector('#tradeoff-status')?.innerText.includes('alphas')",
                           timeout=60000)
    status = page.inner_text("#tradeoff-status")
    assert "<img src=x id=injected><b>b</b> **bold** [link](/y)" in status, status
    page.wait_for_selector(".toast-body, [data-testid=toast-body]", timeout=10000)
    assert page.locator("#injected").count() == 0
    assert page.locator("#tradeoff-status b, #tradeoff-status a").count() == 0
    page.screenshot(path=SCREENSHOTS / "tiny-markup-as-text.png", full_page=False)
    assert not [url for url in requested if url.rstrip("/").endswith(("/x", "/y"))], requested
    page.fill("#tradeoff-alphas textarea, #tradeoff-alphas input", "auto:3")
