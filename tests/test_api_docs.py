"""What "Use via API" (at the page's foot) and gradio_client's view_api show for every endpoint, read from the
running app's /gradio_api/info, the text that page shows: each Python snippet parses and sends each field's
default (or, for a required one, the page's own example); each field has one line saying what it means and what it
takes; no description names the code. And every endpoint's defaults are its page's: an API caller and a visitor
get the same run."""
import ast
import inspect
import json
import re

import gradio as gr
import httpx
import pytest
from gradio.components.api_component import Api

from app.api_calls import api_parameters
from app.api_docs import ENDPOINTS
from app.compare import compare_linked
from app.explore import ExploreHandlers
from app.explore_layout import build_explore
from app.pairs import PairCache, pair_default_draft
from app.sandbox import sandbox_linked
from app.strategies import strategies_linked
from app.tradeoff import tradeoff_linked
from cascade_core.decoding.run_settings import AUTO

# The code's names, which a caller does not know: a module's file, a constant, a dotted Python name, a docstring's
# literal quotes.
INTERNAL = re.compile(r"\.py\b|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\b[A-Za-z_]\w*\.[A-Za-z_]\w*\b|``|cascade_core")


@pytest.fixture(scope="module")
def api_info(tiny_app_url):
    info = httpx.get(f"{tiny_app_url}gradio_api/info", timeout=60)
    info.raise_for_status()
    return info.json()["named_endpoints"]


@pytest.fixture(scope="module")
def endpoint_functions():
    """Each API endpoint's function by its name (gr.api's: every input an Api component), from the app itself."""
    from app import build_app

    demo = build_app("tiny", pairs=PairCache())
    return {f"/{fn.api_name}": fn.fn for fn in demo.fns.values()
            if fn.api_visibility == "public" and fn.inputs
            and all(isinstance(block, Api) for block in fn.inputs)}


def predict_call(snippet):
    """The keyword values of the snippet's client.predict(...) call, each read as a Python literal."""
    calls = [node for node in ast.walk(ast.parse(snippet)) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr == "predict"]
    assert len(calls) == 1, snippet
    return {keyword.arg: ast.literal_eval(keyword.value) for keyword in calls[0].keywords}


def test_every_endpoint_is_documented(api_info, endpoint_functions):
    assert set(api_info) == set(endpoint_functions) == {f"/{name}" for name in ENDPOINTS}


def test_every_python_snippet_is_valid_python_sending_the_defaults(api_info, endpoint_functions):
    """The snippet a visitor copies runs as it is: string defaults such as gamma "auto" quoted, a required field
    sent as a real value of its kind (Gradio's placeholder for one is '...', Python's Ellipsis), never None."""
    for name, endpoint in api_info.items():
        sent = predict_call(endpoint["code_snippets"]["python"])
        assert sent.pop("api_name") == name
        parameters = api_parameters(endpoint_functions[name])
        assert list(sent) == [parameter for parameter, _ in parameters], name
        for (parameter, default), field in zip(parameters, endpoint["parameters"]):
            value = sent[parameter]
            if default is not inspect.Parameter.empty:
                assert value == default and type(value) is type(default), (name, parameter, value)
            else:
                assert value is not None and value is not Ellipsis and value != "...", (name, parameter, value)
                assert field["example_input"] == value


def test_a_copied_snippet_runs_as_it_is(api_info, capsys):
    """/sandbox's (no model: quick): its printed result is the decision's numbers at the page's defaults."""
    exec(api_info["/sandbox"]["code_snippets"]["python"], {})
    numbers = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(numbers["pi"]) == 8 and abs(sum(numbers["output"]) - 1) < 1e-9


def test_the_gamma_auto_default_is_quoted_in_every_language(api_info):
    """The issue's 'gamma=auto,': a bare name in Python and JavaScript, and not JSON in curl's body."""
    for name in ("/run", "/block", "/strategies"):
        snippets = api_info[name]["code_snippets"]
        assert 'gamma="auto"' in snippets["python"] and "gamma=auto" not in snippets["python"]
        assert 'gamma: "auto"' in snippets["javascript"]
        body = json.loads(re.search(r"-d '(\{.*?\})'", snippets["bash"], re.S).group(1))
        assert body["gamma"] == AUTO, name


def test_every_field_has_one_line_of_meaning_and_range(api_info):
    """Each field's own line after Gradio's generic sentence, named by the field (not '1st'), and the endpoint's
    description and result in a caller's words."""
    for name, endpoint in api_info.items():
        assert endpoint["description"] and not INTERNAL.search(endpoint["description"]), name
        for field in endpoint["parameters"]:
            text = field["python_type"]["description"]
            assert field["label"] == field["parameter_name"], (name, field["label"])
            assert len(text) > 20 and "\n" not in text and not INTERNAL.search(text), (name, field["parameter_name"])
            # its range: numbers, or the names it takes, or what it must be made of
            assert re.search(r"\d|\"|one of|true|text", text, re.I), (name, field["parameter_name"], text)
        result = endpoint["returns"][0]["python_type"]["description"]
        assert result and "\n" not in result and not INTERNAL.search(result), name


def page_defaults():
    """Each endpoint's page: the value each of its controls starts at (a tab's link fields are its controls')."""
    pairs = PairCache()
    with gr.Blocks():
        explore = build_explore(ExploreHandlers(pairs, "tiny"), "tiny", False).linked.defaults
    draft = pair_default_draft("tiny")
    return dict(run=explore, block=explore, compare=compare_linked(draft).defaults,
                frontier=tradeoff_linked(draft).defaults, sandbox=sandbox_linked().defaults,
                strategies=strategies_linked(draft).defaults), draft


# The fields an endpoint has and its page has no control for: /block's block is the clicked token's.
NO_CONTROL = {("block", "block")}


def test_every_api_default_is_its_pages(endpoint_functions):
    """For every endpoint, every field with a default starts where its page's control starts (gamma "auto" is the
    slider's 0; draft "" is the page's default draft), so a call with the required values alone is the page's run."""
    pages, draft = page_defaults()
    assert set(pages) == {name.lstrip("/") for name in endpoint_functions}
    for name, fn in endpoint_functions.items():
        page = pages[name.lstrip("/")]
        for parameter, default in api_parameters(fn):
            if default is inspect.Parameter.empty or \
                    (name.lstrip("/"), parameter) in NO_CONTROL:
                continue
            assert parameter in page, f"{name}'s {parameter} has no control on its page"
            expected = {AUTO: 0, "": draft}.get(default, default) if parameter in ("gamma", "draft") else default
            assert page[parameter] == expected, f"{name}: {parameter}={default!r}, its page's {page[parameter]!r}"


# (endpoint, a raw call's values: short runs)
SHORT_CALLS = [("run", ["Hi", "v3", 0.5, "auto", 0.7, 16]), ("block", ["Hi", "v3", 0.5, "auto", 0.7, 16, 0, "", 1]),
               ("compare", ["Hi", [{"rule": "chow", "alpha": 0.5}, {"rule": "v3", "alpha": 0.5}], 4, 0.7, 16]),
               ("frontier", ["Hi", ["chow"], "0.3,0.7", 4, 0.7, 8]), ("sandbox", [[0.6, 0.4], [0.3, 0.7]]),
               ("strategies", ["Hi", "v3", 0.5, 0.6, "auto", 0.7, 8])]


def raw_events(url, name, data):
    """Every (event, data) of one raw call's result stream, as the README's curl reads it."""
    posted = httpx.post(f"{url}gradio_api/call/{name}", json={"data": data}, timeout=30)
    posted.raise_for_status()
    events, event = [], None
    with httpx.stream("GET", f"{url}gradio_api/call/{name}/{posted.json()['event_id']}", timeout=300) as stream:
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line[len("event: "):]
            elif line.startswith("data: "):
                events.append((event, json.loads(line[len("data: "):])))
    return events


@pytest.mark.parametrize("name, data", SHORT_CALLS)
def test_the_result_is_sent_once(tiny_app_url, name, data):
    """Progress as "generating" messages, and the result once, as "complete" (Gradio sent the last value a
    generator yielded twice: as "generating", then again as "complete")."""
    events = raw_events(tiny_app_url, name, data)
    results = [(event, payload) for event, payload in events
               if event in ("generating", "complete") and "generating" not in json.loads(payload[0])]
    assert [event for event, _ in results] == ["complete"], [event for event, _ in events]
    assert events[-1] == results[0] and all(event in ("generating", "heartbeat") for event, _ in events[:-1])
