"""The explorer on a slowed tiny pair, for the serving tests; chromium and the controls' helpers are the benchmarks'
(bench/harness.py), which the browser tests use too."""
import contextlib
import time
from types import SimpleNamespace

from bench.harness import CHROMIUM, CHROMIUM_ARGS, free_port, set_alpha, set_number  # noqa: F401  (the tests' names)


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
