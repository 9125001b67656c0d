"""The Learn tab's "What the paper found" in Debian's chromium on the tiny pair, at a desktop's and a phone's width:
it opens under the lessons, shows each finding with its numbers, and nothing spills out of the page (Table 2
scrolls inside its own box). Screenshots go to /tmp."""
import pytest

from app.findings import FINDINGS
from test_browser import open_page

# How far the page, and each of the panel's parts but its tables, reach past the viewport's right edge.
OVERFLOW = """() => {
    const width = document.documentElement.clientWidth;
    const parts = [...document.querySelectorAll('#findings-text *')].filter(e => !e.closest('table'));
    return {page: document.documentElement.scrollWidth - width,
            parts: Math.max(0, ...parts.map(e => e.getBoundingClientRect().right - width))};
}"""

# The most lines any table cell's text breaks into (1: every cell on one line, the table scrolls instead).
CELL_LINES = """() => Math.max(...[...document.querySelectorAll('#findings-text th, #findings-text td')].map(cell => {
    const range = document.createRange();
    range.selectNodeContents(cell);
    return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
}))"""


@pytest.mark.parametrize("width", [1280, 420])
def test_the_findings_panel_opens_and_fits(tiny_app_url, width):
    with open_page(tiny_app_url + "?tab=learn&step=1", height=900) as page:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_selector("#findings", state="attached")
        assert not page.locator("#findings-text").is_visible()  # closed until opened
        page.locator("#findings").get_by_text("What the paper found").click()
        page.wait_for_selector("#findings-text h4")
        headings = page.locator("#findings-text h4").all_inner_texts()
        assert [h.split(". ", 1)[1] for h in headings] == [f"{f.title} ({f.source})" for f in FINDINGS]
        text = page.inner_text("#findings-text")
        for number in ("1.95×", "2.61×", "22.50", "≈0.77", "0.64"):
            assert number in text
        assert text.count("Here: ") == len(FINDINGS)
        assert page.locator("#findings-text table").count() == 2
        overflow = page.evaluate(OVERFLOW)
        assert overflow["page"] <= 1 and overflow["parts"] <= 1, overflow
        assert page.evaluate(CELL_LINES) == 1
        for table in page.locator("#findings-text table").all():  # a table wider than the panel scrolls in place
            box = table.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1
        page.screenshot(path=f"/tmp/findings-page-{width}.png", full_page=True)
        page.locator("#findings").screenshot(path=f"/tmp/findings-{width}.png")
