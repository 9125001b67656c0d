"""An API call's prompt checked against its pair's context when the call is posted, on its raw values: before it
takes a place in the queue, before Gradio keeps or preprocesses any value, and before any model work
(cascade_core/decoding/prompt_checks.py: from the prompt's length alone, at the pair's longest token).

Gradio keeps each input's last value in its session, and every API call is a session of its own, of which the app
keeps the last 16 (app/sessions.py): three 5 MB prompts refused inside their calls had left 78 MB behind, and each
still waited for a slot and a round trip. Refused at the POST, a huge prompt costs the parsing of its request and
nothing after it. The answer is Gradio's own for a value refused at once (its ``validator=``): HTTP 422 whose detail
names the prompt with the sentence, which gradio_client raises as a ValidationError. The check needs the call's pair
loaded (the app's default pair is, from the start); where it is not, the handler makes the same check once it has
loaded it (AppSettings.for_pair), still before any tokenizer reads the prompt.
"""
from cascade_core.decoding.prompt_checks import check_length
from cascade_core.decoding.run_settings import whole_number
from cascade_core.formats.loading import with_draft

from .api_calls import endpoint_parameters
from .controls import APP_MAX_NEW_TOKENS


def check_sizes(fn, values):
    """Refuse (ValueError, one sentence) the prompt of a call to ``fn`` (an API endpoint, a handler's bound method)
    with ``values`` (its values by name, defaults filled in) that its pair's context cannot hold. Values a handler
    refuses in its own words (a bad draft, max_new_tokens) are left to it."""
    handlers, prompt = getattr(fn, "__self__", None), values.get("prompt")
    if not isinstance(prompt, str) or not hasattr(handlers, "pairs"):
        return
    try:
        spec = with_draft(handlers.default_pair_spec, values.get("draft") or handlers.default_draft)
        pair = handlers.pairs.peek(spec)
        tokens = whole_number(values.get("max_new_tokens"), "max_new_tokens", 1, APP_MAX_NEW_TOKENS)
    except ValueError:
        return
    if pair is not None:
        check_length(prompt, pair, tokens)


def size_refusal(demo, body):
    """For a call being posted (``body``: Gradio's PredictBody): Gradio's validation answer, one record per value
    with the prompt's refused, where ``check_sizes`` refuses it; else None."""
    fn = demo.fns.get(body.fn_index)
    parameters = None if fn is None else endpoint_parameters(fn, body.data)
    if parameters is None:
        return None
    values = {**dict(parameters), **dict(zip((name for name, _ in parameters), body.data))}
    try:
        check_sizes(fn.fn, values)
    except ValueError as error:
        return [{"__type__": "validate", "is_valid": False, "message": str(error), "parameter_name": name}
                if name == "prompt" else {"is_valid": True, "message": ""} for name, _ in parameters]
    return None
