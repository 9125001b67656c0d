"""Serving the explorer on a free local port and driving it in Debian's headless chromium: shared by the benchmarks,
the screenshots and the tests."""
import contextlib
import socket
import time
from types import SimpleNamespace

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def slowed_tiny_app(seconds, **launch_options):
    """The explorer on a tiny pair of its own whose target calls are counted and each slowed by ``seconds``, and which
    never ends a run on end-of-text (which tokens are sampled depends on the CPU's rounding: a long call must be long
    on every CPU). Yields its url, the calls' list, the pair and the demo."""
    from app import build_app, launch
    from app.pairs import PairCache

    pairs = PairCache()
    pair = pairs.get("tiny")
    pair.eos_token_ids = set()
    calls = []
    pair.target.register_forward_hook(lambda *_: calls.append(time.sleep(seconds)))
    demo = build_app("tiny", pairs=pairs)
    _, url, _ = launch(demo, port=free_port(), prevent_thread_lock=True, quiet=True, **launch_options)
    try:
        yield SimpleNamespace(url=url, calls=calls, pair=pair, demo=demo)
    finally:
        demo.close()


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
