"""The page: a title and five tabs (Explore, Compare, Trade-off, Sandbox, Strategies), each with its API; and
launching it."""
import functools
import os

import gradio as gr

from .callbacks import Handlers
from .compare import CompareHandlers, build_compare
from .explore import build_explore
from .options import ASSETS, GENERATION_SLOTS
from .pairs import BUNDLED, SEED_PAIR, PairCache
from .sandbox import SandboxHandlers, build_sandbox
from .strategies import StrategiesHandlers, build_strategies
from .tradeoff import TradeoffHandlers, build_tradeoff

QUEUE_SIZE = 24  # calls that may wait for a generation slot (options.GENERATION_SLOTS), beyond those in them
API = dict(concurrency_id="generate", concurrency_limit=GENERATION_SLOTS)
# Sessions whose state Gradio keeps (its default is 10,000: every API call is a new session, about 0.4 MB each
# for this page's config, so memory grew with every call); the least recently used beyond it are dropped.
SESSION_CAPACITY = 32


def on_space():
    return bool(os.environ.get("SPACE_ID"))


def default_pair_spec():
    return SEED_PAIR if on_space() else BUNDLED


def unread_messages(demo, session_hash):
    """How many messages Gradio holds for a session that no client has read: a caller who posted a run and never
    listens leaves them piling up. Gradio 6 keeps no public count; where its internals differ this is 0."""
    pending = getattr(getattr(demo, "_queue", None), "pending_messages_per_session", {}).get(session_hash)
    return pending.qsize() if pending is not None else 0


def build_app(pair_spec=None, public=None, pairs=None):
    """The Gradio Blocks app. ``pair_spec``: the default pair ('tiny', 'bundled', 'draft -> target');
    ``public``: restrict model ids to the allow-list (default: on a Space); ``pairs``: a PairCache to share."""
    pair_spec = pair_spec or default_pair_spec()
    public = on_space() if public is None else public
    pairs = pairs or PairCache(public=public)
    demo = gr.Blocks(title="Speculative Cascades Explorer", analytics_enabled=False)
    unread = functools.partial(unread_messages, demo)
    handlers = Handlers(pairs, pair_spec, unread=unread)
    compare, tradeoff = CompareHandlers(pairs, pair_spec, unread), TradeoffHandlers(pairs, pair_spec, unread)
    sandbox, strategies = SandboxHandlers(), StrategiesHandlers(pairs, pair_spec, unread)
    with demo:
        # The API first, so that no page event's default name can take one of its names.
        gr.api(handlers.api_run, api_name="run", **API)
        gr.api(compare.api_compare, api_name="compare", **API)
        gr.api(tradeoff.api_frontier, api_name="frontier", **API)
        gr.api(sandbox.api_sandbox, api_name="sandbox", concurrency_limit=None)
        gr.api(strategies.api_strategies, api_name="strategies", **API)
        gr.Markdown("# Speculative Cascades Explorer\nA small *draft* model proposes tokens, a large *target* model "
                    "checks them, and a deferral rule decides whom to trust. **Explore** one run token by token, "
                    "**Compare** rules on the same random numbers, see the **Trade-off** as alpha moves, take one "
                    "decision apart in the **Sandbox**, and put four **Strategies** on one clock.")
        with gr.Tabs(elem_id="tabs") as tabs:
            with gr.Tab("Explore", id="explore", elem_id="tab-explore"):
                explore = build_explore(handlers, pair_spec, public)
            with gr.Tab("Compare", id="compare", elem_id="tab-compare"):
                build_compare(compare, explore, tabs)
            with gr.Tab("Trade-off", id="tradeoff", elem_id="tab-tradeoff"):
                build_tradeoff(tradeoff, explore, tabs)
            with gr.Tab("Sandbox", id="sandbox", elem_id="tab-sandbox"):
                build_sandbox(sandbox, explore)
            with gr.Tab("Strategies", id="strategies", elem_id="tab-strategies"):
                build_strategies(strategies)

        def forget_session(request: gr.Request):
            """A closed page: free its session's state (its runs) now rather than when the store is full."""
            if hasattr(demo, "state_holder"):
                demo.state_holder.session_data.pop(request.session_hash, None)

        demo.unload(forget_session)
    return demo


def launch(demo, host="127.0.0.1", port=None, share=False, prevent_thread_lock=False, quiet=False,
           queue_size=QUEUE_SIZE):
    """Launch with the app's stylesheet (Gradio 6 takes CSS at launch) and a bounded queue: past queue_size
    waiting runs a new one is refused at once ("Queue is full! Please try again.") instead of waiting minutes."""
    return demo.queue(default_concurrency_limit=1, max_size=queue_size).launch(
        server_name=host, server_port=port, share=share, prevent_thread_lock=prevent_thread_lock, quiet=quiet,
        css_paths=[ASSETS / "style.css"], footer_links=["api", "gradio"], state_session_capacity=SESSION_CAPACITY)
