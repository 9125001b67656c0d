"""What a token rule costs, in Debian's chromium on the tiny pair at a desktop's and a phone's width: the Sandbox's
line with the rule's rejection probability beside lossless's TV, and lesson 6's question and reveal (v3 or
lossless rejects more). Screenshots go to /tmp."""
import pytest

from test_browser import open_page

OVERFLOW = "els => els.filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.id || e.tagName)"


@pytest.mark.parametrize("width", [1280, 420])
def test_the_sandbox_shows_the_rules_rejection_probability_beside_lossless(tiny_app_url, width):
    with open_page(tiny_app_url + "?tab=sandbox") as page:
        page.set_viewport_size({"width": width, "height": 1000})
        page.wait_for_selector("#sandbox-cost")
        cost = page.inner_text("#sandbox-cost")
        assert "= 0.3375 + 0.1350 = 0.4725 (eta = 0.750), above lossless's TV(p, q) = 0.4300" in cost
        assert not page.eval_on_selector_all("#sandbox-cost", OVERFLOW), f"the line is cut at {width} px"
        page.locator("#sandbox-text").screenshot(path=f"/tmp/sandbox-cost-{width}.png")


@pytest.mark.parametrize("width", [1280, 420])
def test_lesson_6_asks_whether_v3_or_lossless_rejects_more_and_reveals_it(tiny_app_url, width):
    with open_page(tiny_app_url + "?tab=learn&step=6", height=1400) as page:
        page.set_viewport_size({"width": width, "height": 1400})
        page.wait_for_selector("#lesson-6-answer")
        assert "| token |" not in page.inner_text("#lesson-6")  # the q and p table is rendered, not left as Markdown
        page.locator("#lesson-6-answer").get_by_label("Lossless.", exact=True).check()
        page.click("#lesson-6-run")
        page.wait_for_function("() => document.querySelector('#lesson-6-look')?.innerText.includes('did not hold')")
        look = page.inner_text("#lesson-6-look")
        assert "What this run shows: v3 at alpha 0.5." in look and "so it always rejects less: not so" in look
        assert "0.4725" in look and "0.4300" in look and "0.4861" in look
        assert page.locator("#lesson-6-look table").count() == 1
        page.wait_for_selector("#lesson-6-plot .js-plotly-plot")  # its v3 decision, drawn as the Sandbox draws it
        page.locator("#lesson-6").screenshot(path=f"/tmp/lesson-6-{width}.png")
