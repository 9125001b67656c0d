"""Links and lessons in Debian's chromium on the tiny pair: a link restores a run and copies back to itself, a bad
link says why and opens the rest, a lesson step runs and says what to look for. Screenshots go to docs/screenshots/."""
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from cascade_core import generate, load_pair
from test_browser import SCREENSHOTS, open_page, press_through_a_block

LINK = ("?tab=explore&prompt=Hello+there&draft=head&rule=chow&alpha=0.8&gamma=3&temperature=0.3&seed=7"
        "&max_new_tokens=12&run=1")


def test_a_link_restores_the_view_runs_it_and_copies_back_to_itself(tiny_app_url):
    with open_page(tiny_app_url + LINK) as page:
        page.wait_for_function("() => document.querySelector('#status')?.innerText.startsWith('Done: 12 tokens')",
                               timeout=60000)
        assert page.input_value("#prompt textarea") == "Hello there"
        numbers = ("alpha", "gamma", "temperature", "max-new-tokens")
        assert [page.input_value(f"#{name} input[type=number]") for name in numbers] == ["0.8", "3", "0.3", "12"]
        assert page.input_value("#seed input") == "7" and "Chow" in page.inner_text("#rule-info")
        assert "EAGLE-3 head" in page.input_value("#draft input") and "EAGLE-3 head" in page.inner_text("#stats")
        page.click("#copy-link")
        page.wait_for_function("() => document.querySelector('#link textarea, #link input')?.value.includes('tab=')")
        copied = page.input_value("#link textarea, #link input")
        assert dict(parse_qsl(urlsplit(copied).query)) == dict(parse_qsl(LINK[1:]))
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / "tiny-link.png")


def test_a_link_with_a_bad_draft_says_why_and_runs_the_rest_with_the_default_draft(tiny_app_url):
    with open_page(tiny_app_url + "?tab=explore&prompt=Hi&draft=eagle&max_new_tokens=6&run=1") as page:
        page.wait_for_function("() => document.querySelector('#status')?.innerText.startsWith('Done: 6 tokens')",
                               timeout=60000)
        assert "draft must be model (the draft model) or head (the EAGLE-3 head), got 'eagle'" in page.inner_text(
            "#link-status")
        assert "draft model" in page.input_value("#draft input") and "EAGLE" not in page.inner_text("#stats")


def test_a_bad_link_says_why_and_opens_the_rest(tiny_app_url):
    with open_page(tiny_app_url + "?tab=sandbox&rule=v1&alpha=9") as page:
        page.wait_for_function("() => document.querySelector('#link-status')?.innerText.includes('alpha=9')")
        assert "outside rule 'v1''s range" in page.inner_text("#link-status")
        page.wait_for_function("() => document.querySelector('#sandbox-text')?.innerText.startsWith('v1')")
        assert page.locator("#tab-sandbox").is_visible()


def test_a_lesson_step_runs_and_says_what_to_look_for(tiny_app_url):
    with open_page(tiny_app_url, height=1200) as page:
        page.click("#start-lessons")
        page.click("#lesson-1-next")  # lesson 1 (why) times three runs; lesson 2 is speculative decoding
        page.click("#lesson-2-answer label:has-text('The same text, in as many target calls.')")
        page.click("#lesson-2-run")
        page.wait_for_function("() => document.querySelector('#lesson-2-look')?.innerText.includes('What to look')",
                               timeout=60000)
        look = page.inner_text("#lesson-2-look")
        assert look.startswith("Your answer: The same text, in as many target calls. It did not hold.")
        assert "One target call scores a whole block" in look  # the misconception it reflects
        assert "wrote the same text as the target alone" in look
        assert page.locator("#lesson-2-rows .compare-row").count() == 2
        page.screenshot(path=SCREENSHOTS / "tiny-learn.png", full_page=True)
        # a click on the lossless row's token: the block that wrote it (the target row is a baseline: no blocks)
        run = generate(load_pair("tiny"), "Who is Buzz Aldrin?", rule="lossless", temperature=0, seed=0,
                       max_new_tokens=48)
        blocks = {}
        for i, pos in enumerate(run.positions):
            blocks.setdefault(pos["block"], []).append(i)
        block = next(b for b in blocks.values() if len(b) > 2)
        page.click(f"#lesson-2-rows .compare-row[data-row='1'] .tok[data-pos='{block[-1]}']")
        page.wait_for_timeout(500)  # the click's position reaches the server before the block is asked for
        assert page.locator(f"#lesson-2-rows .tok.selected[data-pos='{block[-1]}']").count() == 2  # in both rows
        texts = press_through_a_block(page, "lesson-2-block")
        assert f"tokens #{block[0]} to #{block[-1]}" in texts[0] and "What both caches keep" in texts[4]
        assert "At temperature 0, q and p are one-hot" in texts[2]
        page.click("#lesson-2-next")
        page.wait_for_selector("#lesson-3-run")
        page.click("#copy-link")
        page.wait_for_function("() => document.querySelector('#link textarea, #link input')?.value.includes('step=3')")


def test_the_derivation_checks_each_exercise_and_reveals_the_lessons_answer(tiny_app_url):
    with open_page(tiny_app_url + "?tab=learn&step=5", height=1200) as page:
        page.wait_for_selector("#lesson-5-exercise-3")
        page.click("#lesson-5-exercise-3 label:has-text('0.6.')")
        page.click("#lesson-5-check-3")
        page.wait_for_function("() => document.querySelector('#lesson-5-reveal-3')?.innerText.startsWith('Not quite')")
        assert "1 - TV = 0.6" in page.inner_text("#lesson-5-reveal-3")
        page.click("#lesson-5-exercise-5 label:has-text('alpha < 0.75.')")
        page.click("#lesson-5-check-5")
        page.wait_for_function("() => document.querySelector('#lesson-5-reveal-5')?.innerText.startsWith('Right')")
        page.click("#lesson-5-answer label:has-text('Those above the line')")
        page.click("#lesson-5-run")
        page.wait_for_function("() => document.querySelector('#lesson-5-look')?.innerText.includes('What to look')",
                               timeout=60000)
        assert "It held." in page.inner_text("#lesson-5-look")
        page.wait_for_selector("#lesson-5-plot .js-plotly-plot")
        page.screenshot(path=SCREENSHOTS / "tiny-derivation.png", full_page=True)


VIEW_OF = ("(id) => [...document.querySelector('#' + id)?.closest('[class*=\"view-\"]')?.classList || []]"
           ".find(c => c.startsWith('view-'))")
DONE_IN_VIEW = ("([view, id]) => document.querySelector('.' + view + ' #' + id)?.innerText.startsWith('Done')")


def test_tabs_are_drawn_when_opened_and_a_lesson_draws_its_tab_again_in_its_state(tiny_app_url):
    """The page opens with Explore's controls only; a link opens Learn at lesson 8, whose "Open it in Strategies"
    draws that tab in the lesson's state and runs it; opened again after a change there, it is drawn again, and
    the run waits for that drawing."""
    with open_page(tiny_app_url + "?tab=learn&step=8", height=1100) as page:
        page.wait_for_selector("#lesson-8-open")
        assert page.locator("#strategies-run").count() == 0 and page.locator("#compare-run").count() == 0
        page.click("#lesson-8-open")
        page.wait_for_selector("#strategies-run")
        first = page.evaluate(VIEW_OF, "strategies-run")
        page.wait_for_function(DONE_IN_VIEW, arg=[first, "strategies-status"], timeout=60000)
        assert page.input_value("#strategies-alpha input[type=number]") == "0.5"
        page.fill("#strategies-alpha input[type=number]", "0.9")
        page.press("#strategies-alpha input[type=number]", "Enter")
        page.click("button[role=tab]:has-text('Learn')")
        page.click("#lesson-8-open")
        page.wait_for_function(f"() => ({VIEW_OF})('strategies-run') && ({VIEW_OF})('strategies-run') !== '{first}'")
        second = page.evaluate(VIEW_OF, "strategies-run")
        page.wait_for_function(DONE_IN_VIEW, arg=[second, "strategies-status"], timeout=60000)
        assert page.input_value("#strategies-alpha input[type=number]") == "0.5"


@pytest.mark.parametrize("tab, fields", [("compare", "max_new_tokens=8"), ("tradeoff", "max_new_tokens=8"),
                                         ("strategies", "max_new_tokens=16")])
def test_a_link_that_runs_a_tab_drawn_later_runs_to_done(tiny_app_url, tab, fields):
    """Opened fresh, the link draws its tab once and presses that drawing's Run: no error, no server 500."""
    failed = []
    with open_page(f"{tiny_app_url}?tab={tab}&{fields}&run=1") as page:
        page.on("response", lambda r: failed.append((r.status, r.url)) if r.status >= 500 else None)
        page.wait_for_function(f"() => /^(Done|Error)/.test(document.querySelector('#{tab}-status')?.innerText)",
                               timeout=90000)
        assert page.inner_text(f"#{tab}-status").startswith("Done"), page.inner_text(f"#{tab}-status")
        assert page.locator(f"#{tab}-run").count() == 1  # drawn once
        assert not failed and not page.locator(".toast-body").count()


@pytest.mark.parametrize("tab, fields, control, value", [
    ("compare", dict(rows="chow:0.3,lossless,v3:0.9", max_new_tokens="8"), "#compare-alpha-2 input", "0.9"),
    ("tradeoff", dict(rules="chow,v1", alphas="0.2,0.6"), "#tradeoff-alphas textarea", "0.2,0.6"),
    ("strategies", dict(threshold="0.35", rule="chow", alpha="0.4"), "#strategies-threshold input[type=number]",
     "0.35"),
    ("sandbox", dict(tokens='["a", "b,c", "d", "e", "f", "g", "h", "i"]', q="1,0,0,0,0,0,0,0.5",
                     p="0,0,0,0,0,0,0.5,1", rule="v1", alpha="0.2"), "#sandbox-q-7 input[type=number]", "0.5"),
])
def test_a_copied_link_holds_the_tabs_own_controls(tiny_app_url, tab, fields, control, value):
    """A link restores a tab's own controls (Compare's rows, the Trade-off's rules and alphas, the Strategies'
    threshold, the Sandbox's tokens, q and p), and "copy link" writes them back."""
    link = f"?{urlencode(dict(tab=tab, **fields))}"
    with open_page(tiny_app_url + link) as page:
        page.wait_for_selector(control)
        assert page.input_value(control) == value
        page.click("#copy-link")
        page.wait_for_function("() => document.querySelector('#link textarea, #link input')?.value.includes('tab=')")
        copied = dict(parse_qsl(urlsplit(page.input_value("#link textarea, #link input")).query))
        assert {name: copied.get(name) for name in fields} == fields
        assert not page.inner_text("#link-status").strip()


def test_a_link_may_ask_for_a_reproducible_run_and_a_copied_link_keeps_it(tiny_app_url):
    with open_page(tiny_app_url + "?tab=explore&prompt=Hi&max_new_tokens=6&reproducible=1&run=1") as page:
        page.wait_for_function("() => document.querySelector('#status')?.innerText.startsWith('Done: 6 tokens')",
                               timeout=60000)
        assert page.is_checked("#reproducible input")
        page.click("#copy-link")
        page.wait_for_function("() => document.querySelector('#link textarea, #link input')?.value.includes('tab=')")
        assert dict(parse_qsl(urlsplit(page.input_value("#link textarea, #link input")).query))["reproducible"] == "1"
