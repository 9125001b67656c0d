"""Lesson 5's derivation in Debian's chromium on the tiny pair, at a desktop's and a phone's width: its six steps
render their formulas, and each exercise's Check reveals whether the picked answer is right. Screenshots go to
/tmp (docs/screenshots' derivation picture is test_browser_links.py's)."""
import pytest

from app.derivation import STEPS
from test_browser import open_page

WRONG_FIRST = (1, 6)  # the steps where a wrong answer is picked (and checked) before the right one
# the displayed formulas wider than their box (scrolled sideways), by their LaTeX
CUT_FORMULAS = ("els => els.filter(e => e.scrollWidth > e.clientWidth + 1)"
                ".map(e => e.querySelector('annotation')?.textContent)")
REVEALED = "([id, start]) => document.querySelector('#' + id)?.innerText.startsWith(start)"


def check_answer(page, i, answer):
    """Pick ``answer`` in step i's exercise, press Check and return its reveal once it says Right or Not quite."""
    reveal = f"lesson-5-reveal-{i}"
    page.locator(f"#lesson-5-exercise-{i}").get_by_label(answer.text, exact=True).check()
    page.click(f"#lesson-5-check-{i}")
    start = "Right." if answer is STEPS[i - 1].answers[0] else "Not quite."
    page.wait_for_function(REVEALED, arg=[reveal, start])
    return page.inner_text(f"#{reveal}")


@pytest.mark.parametrize("width", [1280, 420])
def test_the_six_steps_render_and_each_exercise_checks_its_answer(tiny_app_url, width):
    with open_page(tiny_app_url + "?tab=learn&step=5", height=1200) as page:
        page.set_viewport_size({"width": width, "height": 1200})
        page.wait_for_selector("#lesson-5-exercise-6")
        for i, step in enumerate(STEPS, 1):
            shown = page.inner_text(f"#lesson-5-step-{i}")
            assert step.title in shown and "$" not in shown  # the formulas are typeset, not left as LaTeX
            assert page.locator(f"#lesson-5-step-{i} .katex").count() >= 1
            if i in WRONG_FIRST:
                wrong = step.answers[1]
                assert wrong.wrong_because in check_answer(page, i, wrong)
            assert step.why in check_answer(page, i, step.answers[0])
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the page scrolls sideways by {overflow} px at {width} px"
        cut = page.eval_on_selector_all("#lesson-5 .katex-display", CUT_FORMULAS)
        assert not cut, f"formulas wider than the page at {width} px: {cut}"
        page.locator("#lesson-5").screenshot(path=f"/tmp/derivation-{width}.png")
