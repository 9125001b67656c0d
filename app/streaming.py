"""What every tab's handlers share: bad input shown in the page or raised for an API client, an API call's work
streamed as progress and a result, and a caller who stops reading stopped."""
import functools
import time

import gradio as gr

from cascade_core.strict_json import dumps

from .api_once import result_next
from .viz.format import html_text, markdown_text
from .worker import ENGINE

# An API run reports progress at most every PROGRESS_INTERVAL seconds; a caller who leaves UNREAD_LIMIT messages
# (Gradio's and ours) unread, about 3 s of not listening, has abandoned it.
PROGRESS_INTERVAL = 0.5
UNREAD_LIMIT = 6


def event_index(event, key):
    """A whole number from a page event's data (a clicked token's ``pos``, a Compare row), or -1 for anything else
    ("abc", 1e400, None: what a crafted call can send)."""
    value = getattr(event, key, None) if event is not None else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def warns_in_page(status_view):
    """For the page's streaming handlers: the engine raises ValueError for bad input (and failed loads); show it
    as a warning toast and in the status line (``status_view(message)``: the handler's outputs with only the
    status set), leaving everything else on the page as it was."""
    def decorate(fn):
        @functools.wraps(fn)
        def generator(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except ValueError as error:
                gr.Warning(html_text(error))
                yield status_view(f"⚠️ {markdown_text(error)}")
        return generator
    return decorate


def raises_for_client(fn):
    """For the API's streaming handlers: a ValueError becomes gr.Error, which gradio_client raises with the
    message."""
    @functools.wraps(fn)
    def generator(*args, **kwargs):
        try:
            yield from fn(*args, **kwargs)
        except ValueError as error:
            raise gr.Error(str(error), print_exception=False) from error
    return generator


def progress_messages(steps, size, progress, result):
    """An API call's work as (finished, JSON text): while ``steps`` (a generator of the call's work, block by block,
    that may generate ``size`` tokens) runs on the engine thread, ``{"generating": progress(step)}`` at most every
    PROGRESS_INTERVAL seconds; then ``result(what steps returned)``."""
    last = time.perf_counter()
    steps = ENGINE.iterate(steps, size)
    while True:
        try:
            step = next(steps)
        except StopIteration as end:
            yield True, dumps(result(end.value))
            return
        if time.perf_counter() - last >= PROGRESS_INTERVAL:
            last = time.perf_counter()
            yield False, dumps({"generating": progress(step)})


def read_or_stopped(messages, unread, request):
    """The texts an API call streams. A caller who disconnects is stopped by Gradio at its next message; one who
    stops reading the stream (a call starts only once it is read: app/fair_share.py) is stopped here, between two
    blocks, once more than UNREAD_LIMIT messages wait for it, so neither holds a generation slot."""
    for finished, text in messages:
        if not finished and request is not None and unread(request.session_hash) > UNREAD_LIMIT:
            messages.close()
            raise ValueError("stopped: nobody read this call's progress; read the result stream while the call "
                             "goes on")
        if finished:
            result_next()  # sent once, as the call's "complete" (app/api_once.py)
        yield text
