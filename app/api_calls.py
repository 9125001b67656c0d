"""An API call over raw HTTP (``POST /gradio_api/call/<name>`` with ``{"data": [...]}``) as gradio_client makes it:
the values a call leaves out take their documented defaults (each endpoint function's signature; gradio_client fills
them in itself, Gradio's HTTP route does not, and answered ``{"error": null}`` with a traceback in the log), and a
call that leaves out a value without a default, or sends more values than the endpoint takes, gets one sentence
naming them. Page events keep Gradio's own check."""
import inspect

import gradio as gr
from gradio.components.api_component import Api

from .api_order import check_order


def api_parameters(fn):
    """(name, default or inspect.Parameter.empty) of each value an endpoint takes, in order (gr.Request aside)."""
    return [(name, p.default) for name, p in inspect.signature(fn).parameters.items()
            if p.annotation is not gr.Request and name != "request"]


def endpoint_parameters(block_fn, inputs):
    """The API endpoint's parameters (api_parameters) where ``inputs`` are a raw call's values to one (gr.api's
    functions: every input an Api component, one a parameter), else None (a page event, which keeps Gradio's check)."""
    if not (isinstance(inputs, list) and block_fn.inputs and all(isinstance(block, Api) for block in block_fn.inputs)):
        return None
    parameters = api_parameters(block_fn.fn)
    return parameters if len(parameters) == len(block_fn.inputs) else None


def completed(name, parameters, inputs):
    """The call's values with the defaults of those it left out, or a gr.Error naming what is wrong."""
    names = ", ".join(n for n, _ in parameters)
    if len(inputs) > len(parameters):
        raise gr.Error(f"/{name} takes at most {len(parameters)} values ({names}), got {len(inputs)}; send fewer",
                       print_exception=False)
    missing = [n for n, default in parameters[len(inputs):] if default is inspect.Parameter.empty]
    if missing:
        raise gr.Error(f"/{name} needs a value for {', '.join(missing)} (its values, in order: {names})",
                       print_exception=False)
    return list(inputs) + [default for _, default in parameters[len(inputs):]]


def accept_raw_calls(demo):
    """Install ``completed`` for the demo's API endpoints (gr.api's functions: every input an Api component),
    after ``check_order`` (app/api_order.py: a call in an endpoint's old order is refused, not misread)."""
    validate = demo.validate_inputs

    def validated(block_fn, inputs):
        parameters = endpoint_parameters(block_fn, inputs)
        if parameters is not None:
            check_order(block_fn.api_name, [name for name, _ in parameters], inputs)
            inputs[:] = completed(block_fn.api_name, parameters, inputs)
        return validate(block_fn, inputs)

    demo.validate_inputs = validated
