"""The page: a title, a share row (links that restore a view) and six tabs (Explore, Compare, Trade-off, Sandbox,
Strategies, each with its API, and Learn; all but Explore drawn when first opened); and launching it."""
import functools
import os
from urllib.parse import parse_qsl

import gradio as gr

from .api_calls import accept_raw_calls
from .api_docs import register
from .api_once import install as send_results_once
from .api_sizes import size_refusal
from .compare import CompareHandlers, build_compare, compare_linked
from .explore import ExploreHandlers
from .explore_layout import build_explore
from .fair_share import install as install_fair_share, pending_messages
from .lazy_tabs import add_view_states, lazy_tab
from .learn import LearnHandlers, build_learn, learn_linked
from .links import COPY_TAB_ON_SCREEN_JS, PRESS_JS, copy_link_button, restore_outputs, restored
from .options import ASSETS, GENERATION_SLOTS, INSTANT, QUEUED_INSTANT, WORKER_THREADS
from .pairs import BUNDLED, SEED_PAIR, PairCache, pair_default_draft
from .sandbox import SandboxHandlers, build_sandbox, sandbox_linked
from .sessions import forget, keep_pages
from .strategies import StrategiesHandlers, build_strategies, strategies_linked
from .tradeoff import TradeoffHandlers, build_tradeoff, tradeoff_linked
from .worker import ENGINE

QUEUE_SIZE = 24  # calls that may wait for a generation slot (options.GENERATION_SLOTS), beyond those in them
API = dict(concurrency_id="generate", concurrency_limit=GENERATION_SLOTS)


def on_space():
    return bool(os.environ.get("SPACE_ID"))


def default_pair_spec():
    return SEED_PAIR if on_space() else BUNDLED


def unread_messages(demo, session_hash):
    """How many messages Gradio holds for a session that no client has read: a caller who stopped listening leaves
    them piling up. Gradio 6 keeps no public count; where its internals differ this is 0."""
    return pending_messages(getattr(demo, "_queue", None), session_hash) or 0


def build_app(pair_spec=None, public=None, pairs=None):
    """The Gradio Blocks app. ``pair_spec``: the default pair ('tiny', 'bundled', 'draft -> target');
    ``public``: restrict model ids to the allow-list (default: on a Space); ``pairs``: a PairCache to share."""
    pair_spec = pair_spec or default_pair_spec()
    public = on_space() if public is None else public
    pairs = pairs or PairCache(public=public)
    demo = gr.Blocks(title="Speculative Cascades Explorer", analytics_enabled=False)
    unread = functools.partial(unread_messages, demo)
    handlers = dict(explore=ExploreHandlers(pairs, pair_spec, unread=unread),
                    compare=CompareHandlers(pairs, pair_spec, unread),
                    tradeoff=TradeoffHandlers(pairs, pair_spec, unread),
                    sandbox=SandboxHandlers(), strategies=StrategiesHandlers(pairs, pair_spec, unread))
    handlers["learn"] = LearnHandlers(pairs, pair_spec, handlers["tradeoff"])
    with demo:
        register_apis(handlers)  # first, so that no page event's default name can take one of its names
        gr.Markdown("# Speculative Cascades Explorer\nA small *draft* model proposes tokens, a large *target* model "
                    "checks them, and a deferral rule decides whom to trust. **Explore** one run token by token, "
                    "**Compare** rules on the same random numbers, see the **Trade-off** as alpha moves, take one "
                    "decision apart in the **Sandbox**, put four **Strategies** on one clock, or **Learn** the rules "
                    "in nine short lessons.", elem_id="intro")
        share = share_row()
        tabs, linked = build_tabs(handlers, pair_spec, public, share)
        share["lessons"].click(lambda: gr.Tabs(selected="learn"), None, tabs, **INSTANT)
        wire_links(demo, linked, tabs, share)
        demo.load(None, js=CARRY_PROMPT_JS)

        def forget_session(request: gr.Request):
            """A closed page: free its session's state (its runs) now rather than when it has been idle for hours."""
            if hasattr(demo, "state_holder"):
                forget(demo.state_holder, request.session_hash)

        demo.unload(forget_session)
    accept_raw_calls(demo)
    return demo


def register_apis(handlers):
    """An API per tab (Learn's lessons run the other tabs' calls), each described for "Use via API" (app.api_docs)."""
    register(handlers["explore"].api_run, "run", **API)
    register(handlers["explore"].api_block, "block", **API)
    register(handlers["compare"].api_compare, "compare", **API)
    register(handlers["tradeoff"].api_frontier, "frontier", **API)
    # no model: outside the queue, so that it answers even while the queue is full
    register(handlers["sandbox"].api_sandbox, "sandbox", concurrency_limit=None, queue=False)
    register(handlers["strategies"].api_strategies, "strategies", **API)


def share_row():
    """The lessons' button and the link row (copy a link to this view, whether opening it runs it), the link's
    message, and the hidden parts a link's restore uses."""
    with gr.Row(elem_id="link-row"):
        share = dict(lessons=gr.Button("New here? Nine short lessons →", size="sm", variant="primary",
                                       elem_id="start-lessons", scale=0, min_width=230),
                     copy=gr.Button("Copy a link to this view", size="sm", elem_id="copy-link", scale=0, min_width=210),
                     runs=gr.Checkbox(True, label="opening it runs it", elem_id="link-runs", scale=0, min_width=160,
                                      container=False),
                     link=gr.Textbox(label="Link to this view", show_label=False, lines=1, max_lines=1,
                                     placeholder="the link of the tab on screen, with its settings", container=False,
                                     elem_id="link", scale=3))
    share["status"] = gr.Markdown("", elem_id="link-status")
    # the Run button a link presses (a selector) and the page's query (read in the browser)
    share["press"], share["query"] = (gr.Textbox(visible=False) for _ in range(2))
    share["restore"] = gr.Button("restore the link's view", elem_id="restore-link", elem_classes=["offscreen"])
    return share


def build_tabs(handlers, pair_spec, public, share):
    """The six tabs; the ones after Explore drawn when first opened (app.lazy_tabs), each in the view a link or a
    lesson asks for. Returns the Tabs and every tab's Linked."""
    draft, runs, link = pair_default_draft(pair_spec), share["runs"], share["link"]
    later = add_view_states([compare_linked(draft), tradeoff_linked(draft), sandbox_linked(), strategies_linked(draft),
                             learn_linked()])
    with gr.Tabs(elem_id="tabs") as tabs:
        with gr.Tab("Explore", id="explore", elem_id="tab-explore"):
            explore = build_explore(handlers["explore"], pair_spec, public)
            copy_link_button(explore.linked, explore.linked.fields, runs, link)
        linked = [explore.linked, *later[:4]]
        lazy_tab("Compare", linked[1], lambda values: build_compare(handlers["compare"], explore, tabs, values), runs,
                 link)
        lazy_tab("Trade-off", linked[2], lambda values: build_tradeoff(handlers["tradeoff"], explore, tabs, values),
                 runs, link)
        lazy_tab("Sandbox", linked[3], lambda values: build_sandbox(handlers["sandbox"], explore, values), runs, link)
        lazy_tab("Strategies", linked[4], lambda values: build_strategies(handlers["strategies"], values), runs, link)
        learn, opened = later[4], list(linked)
        linked.append(learn)
        lazy_tab("Learn", learn, lambda values: build_learn(handlers["learn"], opened, tabs, share["status"],
                                                            share["press"], values), runs, link)
    return tabs, linked


def wire_links(demo, linked, tabs, share):
    """A page opened with a query restores its view (and presses its Run for run=1); "copy link" writes the tab's."""

    def restore(query):
        """A link's view: its tab and controls, and the Run button to press when it says run=1."""
        return restored(dict(parse_qsl(query.lstrip("?"), keep_blank_values=True)), linked)

    # Only a page opened with a query asks the server (the load event presses the hidden restore button, whose
    # event reads the query in the browser): a plain page load makes no call.
    demo.load(None, js="() => { if (window.location.search) document.querySelector('#restore-link')?.click(); }")
    share["restore"].click(restore, share["query"], restore_outputs(linked, tabs, share["status"], share["press"]),
                           js="() => window.location.search", **QUEUED_INSTANT).then(
        None, share["press"], share["press"], js=PRESS_JS)
    share["copy"].click(None, js=COPY_TAB_ON_SCREEN_JS)


# One prompt across the tabs: a tab opened by a click gets the prompt of the tab left (once its box is drawn: a tab
# drawn later draws it after the click); a link or a lesson that opens a tab sets its own.
CARRY_PROMPT_JS = """() => {
  const boxes = ['#prompt', '#compare-prompt', '#tradeoff-prompt', '#strategies-prompt'];
  const shown = () => boxes.map((id) => document.querySelector(id + ' textarea'))
    .find((box) => box && box.offsetParent !== null);
  document.querySelector('#tabs')?.addEventListener('click', (event) => {
    const tab = event.target.closest('[role="tab"]');
    const left = shown();
    if (!tab || tab.closest('#lessons') || !left) return;
    const text = left.value;
    let tries = 0;
    const carry = () => {
      const box = shown();
      if (box && box !== left) {
        if (box.value !== text) { box.value = text; box.dispatchEvent(new Event('input', {bubbles: true})); }
      } else if (tries++ < 50) setTimeout(carry, 100);
    };
    setTimeout(carry, 0);
  }, true);
}"""


def launch(demo, host="127.0.0.1", port=None, share=False, prevent_thread_lock=False, quiet=False,
           queue_size=QUEUE_SIZE):
    """Launch with the app's stylesheet (Gradio 6 takes CSS at launch), a bounded queue (past queue_size waiting
    calls a new one is refused at once, "Queue is full: ...", instead of waiting minutes) shared fairly between
    clients (app.fair_share: each client's share of it and of the generating slots, and no call that starts before
    its caller listens), an API call's prompt its pair cannot hold refused as it is posted (app.api_sizes), an API
    call's result sent once (app.api_once), and a session store that keeps each open page's state (app.sessions)."""
    install_fair_share(demo.queue(default_concurrency_limit=1, max_size=queue_size), forwarded=on_space(),
                       admit=functools.partial(size_refusal, demo))
    send_results_once(demo._queue)
    launched = demo.launch(
        server_name=host, server_port=port, share=share, prevent_thread_lock=True, quiet=quiet,
        max_threads=WORKER_THREADS, css_paths=[ASSETS / "style.css"], footer_links=["api", "gradio"])
    keep_pages(demo)
    if not prevent_thread_lock:  # the main thread has nothing else to do: the engine runs on it
        try:
            ENGINE.serve_here() or demo.block_thread()
        except KeyboardInterrupt:
            demo.close()
    return launched
