"""End to end in a real browser: Playwright driving Debian's chromium against the app on the tiny pair.
Open the page, Run, wait for coloured tokens, move alpha (recolour), release (re-run), click a token
(inspector). Screenshots go to docs/screenshots/."""
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from app.settings import auto_or_fixed_gamma
from app.explore import DEFAULT_ALPHA, DEFAULT_GAMMA, DEFAULT_RULE, DEFAULT_TEMPERATURE
from browser import CHROMIUM, CHROMIUM_ARGS, set_alpha, set_number
from cascade_core import generate, load_pair

SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
PROMPT = "Hello there"
RUN = dict(rule=DEFAULT_RULE, alpha=DEFAULT_ALPHA, gamma=auto_or_fixed_gamma(DEFAULT_GAMMA),
           temperature=DEFAULT_TEMPERATURE, seed=0, max_new_tokens=64)  # the page's defaults
NEW_ALPHA = 0.95


def chromium_or_skip():
    """Debian's chromium, apt-installed here if missing (as `make test` does); skip only if that fails."""
    if not Path(CHROMIUM).exists() and shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run("apt-get update -qq && apt-get install -y -qq chromium chromium-driver", shell=True,
                       capture_output=True, timeout=900)
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing and could not be installed with apt-get")
    return CHROMIUM


@contextmanager
def open_page(url, height=1000):
    """The app at url in a fresh headless chromium page, once its controls are there."""
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    executable = chromium_or_skip()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": height})
        page.goto(url)
        page.wait_for_selector("#run", state="attached")  # a link may open another tab first
        try:
            yield page
        finally:
            browser.close()


@pytest.fixture(scope="module")
def page(tiny_app_url):
    with open_page(tiny_app_url) as page:
        yield page


# A token's provenance class, without the marks beside it: a near-tie, the inspected token, a decision that flips
PROVENANCE = "e => e.className.replace('tok ', '').replace(/ (near-tie|selected|decided-otherwise)/g, '')"


def token_classes(page):
    return page.eval_on_selector_all("#answer .tok", f"els => els.map({PROVENANCE})")


def wait_until_done(page):
    page.wait_for_function("() => document.querySelector('#status')?.innerText.startsWith('Done')", timeout=30000)


# Clicks Run and, when the first token lands, lists its ancestors drawn faded (opacity < 1) or hidden.
RUN_AND_CHECK_FIRST_TOKEN = """() => new Promise(resolve => {
  const answer = document.querySelector('#answer');
  const observer = new MutationObserver(() => {
    const token = answer.querySelector('.tok');
    if (!token) return;
    observer.disconnect();
    const faded = [];
    for (let e = token; e; e = e.parentElement) {
      const style = getComputedStyle(e);
      if (Number(style.opacity) < 1 || style.visibility !== 'visible') faded.push(e.className + ' ' + style.opacity);
    }
    resolve({faded, status: document.querySelector('#status')?.innerText});
  });
  observer.observe(answer, {subtree: true, childList: true});
  document.querySelector('#run').click();
})"""


def test_run_recolour_rerun_and_inspect(page):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tiny = load_pair("tiny")
    expected = generate(tiny, PROMPT, **RUN)
    sources, first = expected.recolour("v3", NEW_ALPHA)
    assert first is not None, "pick NEW_ALPHA so that some token flips"

    page.fill("#prompt textarea", PROMPT)
    first_token = page.evaluate(RUN_AND_CHECK_FIRST_TOKEN)
    assert first_token["faded"] == [], f"streamed tokens are drawn faded while generating: {first_token}"
    wait_until_done(page)
    assert token_classes(page) == expected.sources
    assert page.inner_text("#answer .tokens").replace("↵\n", "\n") == expected.text
    page.wait_for_selector("#step-plot .js-plotly-plot")
    page.hover("#answer .tok[data-pos='3']")  # linked: the token's step lights up in both plots
    for plot in ("#step-plot", "#alpha-plot"):
        page.wait_for_function(f"() => document.querySelectorAll('{plot} .hoverlayer *').length > 0")
    page.screenshot(path=SCREENSHOTS / "tiny-run-hover.png", full_page=True)
    page.wait_for_selector("#decision-plot .js-plotly-plot")
    page.locator("#decision-plot").screenshot(path=SCREENSHOTS / "tiny-decision-map.png")
    plot_area = page.query_selector("#step-plot .nsewdrag")
    plot_area.scroll_into_view_if_needed()
    box = plot_area.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)  # and a step lights up its token
    page.wait_for_function("() => document.querySelectorAll('#answer .tok.linked').length === 1")
    assert page.eval_on_selector("#answer .tok.linked", "e => getComputedStyle(e).outlineStyle") != "none"  # seen
    page.mouse.move(0, 0)

    set_alpha(page, NEW_ALPHA, "input")
    page.wait_for_selector("#answer .tok.will-change")
    classes = token_classes(page)
    assert classes[:first] == sources[:first]
    assert classes[first] == "will-change flip"
    assert all(c == "will-change" for c in classes[first + 1:])
    assert f"token #{first} may change" in page.inner_text("#status")
    page.screenshot(path=SCREENSHOTS / "tiny-alpha-moved.png", full_page=True)

    set_alpha(page, NEW_ALPHA, "pointerup")
    page.wait_for_function("() => document.querySelector('#status')?.innerText.includes('Done')"
                           " && !document.querySelector('#answer .will-change')", timeout=30000)
    rerun = generate(tiny, PROMPT, **{**RUN, "alpha": NEW_ALPHA})
    assert token_classes(page) == rerun.sources
    assert f"Re-run from token #{first}" in page.inner_text("#stats")

    page.click(f"#answer .tok[data-pos='{first}']")
    page.wait_for_function(f"() => document.querySelector('#inspector-text')?.innerText.includes('Token #{first}')")
    page.wait_for_selector("#inspector-plot .js-plotly-plot")
    text = page.inner_text("#inspector-text")
    assert "v3" in text and "(1 - alpha) * max p" in text
    page.screenshot(path=SCREENSHOTS / "tiny-inspector.png", full_page=True)


def choose_rule(page, rule):
    page.click("#rule input")
    page.click(f"#rule li[aria-label='{rule}']")


def test_rule_change_moves_the_slider_and_reruns(page):
    """Runs after the test above (same page): alpha is NEW_ALPHA there."""
    expected = generate(load_pair("tiny"), PROMPT, **{**RUN, "rule": "chow", "alpha": NEW_ALPHA})
    choose_rule(page, "chow")
    page.wait_for_function(f"""expected => JSON.stringify([...document.querySelectorAll('#answer .tok')]
        .map({PROVENANCE})) === JSON.stringify(expected)""", arg=expected.sources, timeout=30000)
    assert "max q < 1 - alpha" in page.inner_text("#rule-info")

    choose_rule(page, "opt")
    page.wait_for_function("() => document.querySelector('#alpha input[type=range]').min === '-2'")
    choose_rule(page, "lossless")
    page.wait_for_function("() => document.querySelector('#alpha input[type=range]').disabled")


STATUS = "() => document.querySelector('#status')?.innerText || ''"


def test_stop_says_stopped_and_nothing_streams_after_it(page):
    # v3 at T 1, seed 0: the tiny pair writes 1,024 tokens without end-of-text (its tokens do not depend on the gamma
    # the page's prices pick); lossless's gamma "auto" floor samples the target's own tokens, which end at 49
    choose_rule(page, "v3")
    page.wait_for_function("() => document.querySelector('#rule-info')?.innerText.includes('(1 - alpha) max p')")
    page.wait_for_timeout(300)
    page.wait_for_function(f"() => !({STATUS})().startsWith('Generating')", timeout=30000)  # the re-runs above
    set_number(page, "#max-new-tokens", 1024)
    set_number(page, "#temperature", 1)
    page.click("#run")
    page.wait_for_function(f"() => ({STATUS})().startsWith('Generating')", timeout=30000)
    page.click("#stop")
    page.wait_for_function(f"() => ({STATUS})().startsWith('Stopped after')", timeout=30000)
    stopped, count = page.evaluate(STATUS), page.locator("#answer .tok").count()
    page.wait_for_timeout(1500)
    assert page.evaluate(STATUS) == stopped and page.locator("#answer .tok").count() == count
    assert stopped.startswith(f"Stopped after {count} tokens") and 0 < count < 1024
    assert page.locator("#answer .tokens.running").count() == 0
    page.click("#stop")
    page.wait_for_function(f"() => ({STATUS})().startsWith('Nothing is running')")
    set_number(page, "#max-new-tokens", 64)
    set_number(page, "#temperature", RUN["temperature"])


def test_a_run_pressed_during_a_rule_changes_rerun_is_the_one_shown(page):
    """The rule change starts a re-run; Run pressed at once takes the view: one Done, the Run's own tokens."""
    choose_rule(page, "v1")
    page.click("#run")
    # the re-run may end before the click lands (the tiny pair writes 64 tokens in well under a second on a fast
    # CPU); then the Run starts after its Done: wait for a Done that holds
    for _ in range(20):
        page.wait_for_function(f"() => ({STATUS})().startsWith('Done')", timeout=30000)
        done = page.evaluate(STATUS)
        page.wait_for_timeout(1500)
        if page.evaluate(STATUS) == done:
            break
    assert page.evaluate(STATUS) == done
    alpha = float(page.input_value("#alpha input[type=number]"))
    expected = generate(load_pair("tiny"), PROMPT, **{**RUN, "rule": "v1", "alpha": alpha})
    assert token_classes(page) == expected.sources
    assert "Re-run from" not in page.inner_text("#stats")


def press_through_a_block(page, prefix):
    """Open the block, press Next to its last stage; returns the view's text at each stage."""
    page.click(f"#{prefix}-open")
    page.wait_for_selector(f"#{prefix}-steps [data-step='1']", timeout=60000)
    texts = [page.inner_text(f"#{prefix}-steps")]
    for stage in range(2, 6):
        page.click(f"#{prefix}-next")
        page.wait_for_selector(f"#{prefix}-steps [data-step='{stage}']")
        texts.append(page.inner_text(f"#{prefix}-steps"))
    return texts


@pytest.mark.parametrize("width", [1280, 420])
def test_a_token_opens_its_block_and_steps_through_it(page, tiny_app_url, width):
    """Click a replaced token, open its block, press through its five stages: each shows one more, with the run's
    own tokens, and at the rejection the residual's bars with the correction marked."""
    expected = generate(load_pair("tiny"), PROMPT, **RUN)
    index = expected.sources.index("replaced")
    start = next(i for i, pos in enumerate(expected.positions) if pos["block"] == expected.positions[index]["block"])
    page.set_viewport_size({"width": width, "height": 1000})
    try:
        page.goto(tiny_app_url)  # the page's defaults again, after the tests before
        page.wait_for_selector("#run")
        page.fill("#prompt textarea", PROMPT)
        page.click("#run")
        wait_until_done(page)
        assert token_classes(page) == expected.sources
        page.click(f"#answer .tok[data-pos='{index}']")
        page.wait_for_function(f"() => document.querySelector('#inspector-text')?.innerText.includes('Token #{index}')")
        texts = press_through_a_block(page, "block")
        assert f"tokens #{start} to #{index}" in texts[0] and "p(x)" not in texts[0] and "stage 1 of 5" in texts[0]
        assert "p(x)" in texts[1] and "keep test" in texts[2] and "rejected" in texts[2]
        assert "correction is sampled from the residual" in texts[3] and "What both caches keep" in texts[4]
        assert page.locator("#block-steps .residual-row.chosen").count() == 1
        page.locator("#block-steps").scroll_into_view_if_needed()
        page.locator(".inspector").first.screenshot(path=SCREENSHOTS / f"tiny-block-steps-{width}.png")
        page.click("#block-back")
        page.wait_for_selector("#block-steps [data-step='4']")
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})
