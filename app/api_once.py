"""An API call's result sent once. Gradio sends each value an endpoint's generator yields as a "generating" message
the moment it is yielded and, when the generator ends, its last value again as "complete": a /run trace (about
135 KB for 64 tokens on the tiny pair) went out twice, to a raw HTTP caller and to gradio_client alike. A handler
marks the value it is about to yield as its result (``result_next``, from the generator's thread: Gradio's
LocalContext holds the call's event id there); ``install`` puts a filter on the queue that drops that value's
"generating" message, so the result travels once, in "complete", which is what a raw caller's last event,
gradio_client's predict() and a job's result() read. Progress messages pass as before. Gradio 6 has no public hook
for this; tests/test_api_docs.py counts the messages of a raw call on this Gradio."""
from gradio.context import LocalContext
from gradio.server_messages import ProcessCompletedMessage, ProcessGeneratingMessage


def result_next():
    """The calling handler's next yielded value is its result: not to be sent before "complete" sends it. Outside a
    queued call (a direct call, an app launched without ``install``) nothing happens."""
    blocks, event_id = LocalContext.blocks.get(None), LocalContext.event_id.get(None)
    results = getattr(getattr(blocks, "_queue", None), "results_next", None)
    if results is not None and event_id is not None:
        results.add(event_id)


def install(queue):
    """Drop the "generating" message of a value ``result_next`` marked (the "complete" that follows carries it)."""
    queue.results_next = set()
    send = queue.send_message

    def send_message(event, message):
        if isinstance(message, (ProcessGeneratingMessage, ProcessCompletedMessage)) and \
                event._id in queue.results_next:
            queue.results_next.discard(event._id)
            if isinstance(message, ProcessGeneratingMessage):
                return
        send(event, message)

    queue.send_message = send_message
    return queue
