"""Driving the explorer in Debian's headless chromium: shared by the benchmarks, the screenshots and the tests."""
import socket

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def set_number(page, selector, value):
    """Type a number into the control ``selector`` (a slider's box, a number field) and press Enter, as a reader
    does."""
    page.fill(f"{selector} input[type=number]", str(value))
    page.press(f"{selector} input[type=number]", "Enter")


def set_alpha(page, value, event):
    """Move the alpha slider's range input as a drag does ('input'), or let go of it ('pointerup')."""
    page.eval_on_selector("#alpha input[type=range]", """(el, [value, event]) => {
        el.value = value; el.dispatchEvent(new Event('input', {bubbles: true}));
        if (event === 'pointerup') el.dispatchEvent(new PointerEvent('pointerup', {bubbles: true}));
    }""", [str(value), event])
