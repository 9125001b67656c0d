"""No caller can starve the others: each client's share of the queue and of the generating slots, and no call that
starts before its caller listens.

A client is the address a call comes from: on a Space the first address of X-Forwarded-For (what the Space's proxy
forwards: the peer there is the proxy itself, for everyone), elsewhere the peer's address, which uvicorn takes from
X-Forwarded-For where the peer is a proxy it trusts (FORWARDED_ALLOW_IPS; by default this machine). A call from this
machine with no address forwarded is its session's (a page, a gradio_client Client; a raw HTTP call is a session of
its own): the operator's own scripts, benchmarks and tests play many clients from one address.

Installed on Gradio's queue (``install``), after the checks a call's raw values allow (``admit``: app/api_sizes.py):
- a client may have at most a quarter of the queue's places (``waiting_share``) holding calls that wait; past that,
  or past the queue's size, a call is refused at once in one sentence saying why and when to retry (HTTP 503);
- a call starts only once its caller listens, its result stream open (every message the queue holds for its session
  read), so a call posted and never read holds no generating slot at all; one nobody listens to within LISTEN_WAIT
  seconds leaves the queue, with a sentence saying why for a reader who comes later;
- the next call to start is the listened-to one whose client has the fewest calls generating (the earliest posted
  among equals), and a client holds at most half the generating slots (``slot_share``), so one client's many
  calls never keep another client's first one waiting.
Gradio 6 has no public hooks for these: ``install`` replaces the queue instance's ``push`` and ``get_events``
(Gradio's own: gradio/queueing.py), whose contracts tests/test_fair_share.py pins on this Gradio.
"""
import asyncio
import ipaddress
import random
import time
from collections import Counter

from gradio.exceptions import Error
from gradio.server_messages import ProcessCompletedMessage
from gradio.utils import error_payload

LISTEN_WAIT = 10.0  # seconds a posted call may wait for its caller to open its result stream
QUEUE_SHARE = 4  # a client may hold 1/QUEUE_SHARE of the queue's places
SLOT_SHARE = 2  # and 1/SLOT_SHARE of a limited concurrency's slots (the generating ones)
UNHEARD = (f"nobody opened this call's result stream within {LISTEN_WAIT:g} s of posting it, so it never started; "
           "post it again and read its stream (GET /gradio_api/call/<name>/<event_id>) at once")


def loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def client_of(request, session_hash, forwarded):
    """The client a call counts against (the module docstring): ("address", a) or ("session", s); ``forwarded``:
    read X-Forwarded-For's first address (behind a Space's proxy)."""
    if forwarded and request is not None:
        first = request.headers.get("x-forwarded-for", "").split(",")[0].strip()
        if first:
            return "address", first[:64]
    host = getattr(getattr(request, "client", None), "host", None)
    if host is None or loopback(host):
        return "session", session_hash
    return "address", host


def pending_messages(queue, session_hash):
    """How many messages Gradio's queue holds for a session that no client has read yet (None: no such session)."""
    messages = getattr(queue, "pending_messages_per_session", {}).get(session_hash)
    return None if messages is None else messages.qsize()


class FairShare:
    """The rules above for one Gradio Queue; ``forwarded``: trust X-Forwarded-For (on a Space); ``admit(body)``: a
    posted call's refusal in Gradio's validation answer, or None."""

    def __init__(self, queue, forwarded, admit=lambda body: None):
        self.queue, self.forwarded, self.admit = queue, forwarded, admit
        self.gradio_push, self._pushing = queue.push, asyncio.Lock()
        self.waiting_share = None if queue.max_size is None else max(1, queue.max_size // QUEUE_SHARE)

    def client(self, event):
        if not hasattr(event, "fair_client"):
            event.fair_client = client_of(event.request, event.session_hash, self.forwarded)
        return event.fair_client

    def waiting(self):
        return [event for events in self.queue.event_queue_per_concurrency_id.values() for event in events.queue]

    async def push(self, body, request, username):
        """Gradio's push, after ``admit`` and the queue's and the client's share of it (one push at a time: a count,
        then a place)."""
        refusal = self.admit(body)
        if refusal is not None:
            return False, refusal, "validator_error"
        async with self._pushing:
            waiting, size = self.waiting(), self.queue.max_size
            if size is not None and len(waiting) >= size:
                return False, (f"Queue is full: {len(waiting)} calls wait for a generating slot; retry in a few "
                               "seconds, when one of them has started"), "queue_full"
            client = client_of(request, body.session_hash, self.forwarded)
            if client[1] is not None and self.waiting_share is not None:
                mine = sum(1 for event in waiting if self.client(event) == client)
                if mine >= self.waiting_share:
                    return False, (f"This client already has {mine} calls waiting, its share of the queue's {size} "
                                   "places; retry when one of them has started"), "queue_full"
            return await self.gradio_push(body, request, username)

    def listening(self, event):
        """Whether the event's caller has read every message held for its session (once true, it stays)."""
        if not getattr(event, "fair_listened", False):
            event.fair_listened = pending_messages(self.queue, event.session_hash) == 0
        return event.fair_listened

    def get_events(self):
        """Gradio's choice of the next event to run (called under the queue's delete lock), made by the rules above:
        ([event], False, its concurrency id) or None."""
        queue, now = self.queue, time.monotonic()
        running = Counter((event.concurrency_id, self.client(event))
                          for job in queue.active_jobs if job for event in job)
        ids = list(queue.event_queue_per_concurrency_id)
        random.shuffle(ids)  # as Gradio does: no concurrency id goes first every time
        for concurrency_id in ids:
            events = queue.event_queue_per_concurrency_id[concurrency_id]
            self.expire(events, now)
            limit = events.concurrency_limit
            if not events.queue or (limit is not None and events.current_concurrency >= limit):
                continue
            share = None if limit is None else max(1, limit // SLOT_SHARE)
            generating = lambda event: running[(concurrency_id, self.client(event))]  # noqa: E731
            ready = [event for event in events.queue
                     if self.listening(event) and (share is None or generating(event) < share)]
            if ready:
                event = min(ready, key=generating)  # the first of the fewest generating: the earliest posted
                events.queue.remove(event)
                return [event], False, concurrency_id
        return None

    def expire(self, events, now):
        """Calls nobody listened to within LISTEN_WAIT leave the queue, UNHEARD said to a reader who comes later.
        Gradio keeps a session's event ids until a reader takes its last message, and its messages for the last
        2,000 sessions: the ids of sessions whose messages are gone can never be read, and go too."""
        expired = [e for e in events.queue if now - e.enqueue_time > LISTEN_WAIT and not self.listening(e)]
        for event in expired:
            events.queue.remove(event)
            self.queue.event_ids_to_events.pop(event._id, None)
            if pending_messages(self.queue, event.session_hash) is not None:
                self.queue.send_message(event, ProcessCompletedMessage(
                    output=error_payload(Error(UNHEARD), True), title="Error", success=False))
        ids, messages = self.queue.pending_event_ids_session, self.queue.pending_messages_per_session
        if expired and len(ids) > 2 * messages.max_size:
            for session in [session for session in ids if session not in messages]:
                del ids[session]


def install(demo, forwarded, admit=lambda body: None):
    """Put FairShare on the demo's queue (after ``demo.queue()``, before it serves); returns it."""
    if any(fn.batch for fn in demo.fns.values()):
        raise ValueError("fair_share picks one event at a time: a batched function would run its events alone")
    fair = FairShare(demo._queue, forwarded, admit)
    demo._queue.push, demo._queue.get_events = fair.push, fair.get_events
    return fair
