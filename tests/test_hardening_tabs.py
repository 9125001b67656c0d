"""Hardening of every tab (issue 22): one token budget per request, calls of every tab that stop when their caller
leaves, runs that take turns instead of waiting for each other, a bounded session store, user text that stays text,
one short sentence for every bad value."""
import json
import math
import subprocess
import sys
import time

import gradio as gr
import httpx
import pytest
from gradio_client import Client

from app.explore import ExploreHandlers
from app.compare import CompareHandlers
from app.controls import REQUEST_TOKEN_BUDGET
from app.sessions import KEPT_EMPTY
from app.pairs import PairCache
from app.sandbox import START, SandboxHandlers
from app.tradeoff import TradeoffHandlers
from app.viz.format import markdown_text
from app.viz.sandbox import sandbox_figure
from browser import slowed_tiny_app
from cascade_core.method.explain import dissect
from test_app import run_to_end
from test_hardening import settle, strict_loads

MARKUP = "<img src=x onerror=1><b>b</b> **bold** [link](http://example.com)"

# The argument order of each API, for calls whose JSON is written by hand.
FIELDS = {
    "run": ["prompt", "rule", "alpha", "gamma", "temperature", "max_new_tokens", "seed", "draft"],
    "compare": ["prompt", "rows", "gamma", "temperature", "max_new_tokens", "seed", "draft"],
    "frontier": ["prompt", "rules", "alphas", "gamma", "temperature", "max_new_tokens", "seed", "draft"],
    "sandbox": ["q", "p", "rule", "alpha"],
    "strategies": ["prompt", "rule", "alpha", "threshold", "gamma", "temperature", "max_new_tokens", "seed", "draft"],
    "block": ["prompt", "rule", "alpha", "gamma", "temperature", "max_new_tokens", "seed", "draft", "block"],
}
DEFAULTS = dict(prompt="Hi", rule="v3", alpha=0.3, gamma=2, temperature=1.0, max_new_tokens=4, seed=0,
                rows=[{"rule": "v3", "alpha": 0.3}], rules=["v3"], alphas="0.3", q=[1, 2], p=[2, 1], threshold=0.5,
                draft="model", block=0)


def raw_call(url, api, body, timeout=60):
    """An API call with its JSON body written by hand (integers past float's range, NaN, Infinity, as any JSON
    client may send them): the last SSE event's name and data."""
    event_id = httpx.post(f"{url}gradio_api/call/{api}", content=body.encode(),
                          headers={"content-type": "application/json"}, timeout=timeout).json()["event_id"]
    lines = httpx.get(f"{url}gradio_api/call/{api}/{event_id}", timeout=timeout).text.strip().splitlines()
    return lines[-2].removeprefix("event: "), lines[-1].removeprefix("data: ")


def body(api, **values):
    """The JSON body of a call: the defaults, with values given as JSON text."""
    data = [values.get(field, json.dumps(DEFAULTS[field])) for field in FIELDS[api]]
    return '{"data": [' + ", ".join(data) + "]}"


HUGE = "1" + "0" * 400


@pytest.mark.parametrize("api, field, value, message", [
    *[(api, field, HUGE, f"{field} must be") for api, field in [
        ("run", "alpha"), ("run", "gamma"), ("run", "temperature"), ("run", "max_new_tokens"), ("run", "seed"),
        ("compare", "gamma"), ("compare", "seed"), ("frontier", "gamma"), ("frontier", "seed"),
        ("strategies", "alpha"), ("strategies", "threshold"), ("strategies", "seed"), ("sandbox", "alpha")]],
    ("compare", "rows", '[{"rule": "v3", "alpha": ' + HUGE + "}]", "row 1: alpha must be a finite number"),
    ("sandbox", "q", "[1, " + HUGE + "]", "q must be a list of 2 to 64 non-negative numbers"),
    ("frontier", "alphas", "[0.1, " + HUGE + "]", "alphas: every alpha must be a finite number"),
    ("frontier", "rules", "true", "rules must be a list of rule names"),
    ("frontier", "rules", "NaN", "rules must be a list of rule names"),
    ("frontier", "rules", "Infinity", "rules must be a list of rule names"),
    ("frontier", "rules", "3", "rules must be a list of rule names"),
    ("frontier", "rules", '"v3"', "rules must be a list of rule names"),
    ("frontier", "rules", '{"v3": 1}', "rules must be a list of rule names"),
    ("frontier", "rules", "[" + HUGE + "]", "rules must be a list of rule names"),
    ("frontier", "alphas", '[0.1, "a"]', "alphas: every alpha must be a finite number, got 'a'"),
    ("frontier", "alphas", "[[1]]", "alphas: every alpha must be a finite number, got [1]"),
    ("frontier", "alphas", "[{}]", "alphas: every alpha must be a finite number, got {}"),
    ("frontier", "alphas", "[NaN]", "alphas: every alpha must be a finite number, got nan"),
    ("frontier", "alphas", '"auto:\uff15"', "auto:N needs a whole number N from 1 to 50"),
    ("frontier", "alphas", '"auto:\u00b2"', "auto:N needs a whole number N from 1 to 50"),
    ("frontier", "alphas", '"0.1,nan"', "every alpha must be a finite number"),
    ("compare", "rows", '[{"rule": "v3", "alpha": null}]', "row 1: alpha must be a finite number, got None"),
    ("compare", "rows", '[{"rule": "v3", "alpha": 0.3}, {"rule": "chow", "alpha": "x"}]',
     "row 2: alpha must be a finite number, got 'x'"),
    ("sandbox", "q", json.dumps(list(range(1, 100_001))), "q must be a list of 2 to 64 non-negative numbers"),
    ("run", "rule", json.dumps("v" * 100_000), "unknown rule 'vvvv"),
    ("strategies", "rule", '"target"', "rule must be one of chow, diff, opt"),  # was a TypeError in the engine
    ("strategies", "rule", '"lossless"', "rule must be one of chow, diff, opt"),  # not offered by the tab
    ("run", "draft", '"eagle"', "draft 'eagle' is not one of the tiny pair's drafts: use 'model'"),
    ("compare", "draft", "3", "draft must be text ('model', 'head', or a folder or Hub id), got 3"),
    ("frontier", "draft", '"x" ', "draft 'x' is not one of the tiny pair's drafts"),
    ("strategies", "draft", '["head"]', "draft must be text"),
    ("block", "block", HUGE, "block must be a whole number from 0 to 3"),
    ("block", "block", "NaN", "block must be a whole number from 0 to 3, got nan"),
    ("block", "block", '"1"', "block must be a whole number from 0 to 3, got '1'"),
    ("block", "rule", '"target"', "rule 'target' is a baseline"),
])
def test_every_bad_value_gets_one_short_sentence(tiny_app_url, api, field, value, message):
    event, data = raw_call(tiny_app_url, api, body(api, **{field: value}))
    assert event == "error", data
    text = json.loads(data)["error"]  # None where the handler raised something other than its sentence
    assert text and message in text and len(text) < 300, text
    assert strict_loads(Client(tiny_app_url, verbose=False).predict(q=[1, 1], p=[1, 3], rule="lossless",
                                                                    api_name="/sandbox"))["output"] == [0.25, 0.75]


@pytest.mark.parametrize("data", [{"pos": "abc"}, {"pos": math.inf}, {"pos": None}, {"pos": True}, {}])
def test_a_crafted_click_on_a_token_changes_nothing(data):
    run = run_to_end(ExploreHandlers(PairCache(), "tiny")).run
    assert ExploreHandlers.inspect(run, "v3", 0.5, gr.EventData(None, data)) == (gr.skip(),) * 3
    row_click = gr.EventData(None, {"row": data.get("pos")})
    assert CompareHandlers.open_row([(None, run.trace)], row_click) == [gr.skip()] * 10


@pytest.mark.parametrize("line", ['{"rule": "v3", "alpha": ' + HUGE + ', "prompt_id": "0"}',
                                  "[" * 100_000 + "]" * 100_000,
                                  '{"rule": "<a href=\'http://example.com\'>v3</a>", "alpha": 0.5, "prompt_id": "0"}'])
def test_a_bad_upload_gets_a_sentence_and_no_markup(tmp_path, line):
    path = tmp_path / "rows.jsonl"
    path.write_text(line + "\n")
    rows, figure, status = TradeoffHandlers.upload(str(path), "calls", 0.25)
    assert rows == figure == gr.skip() and status.startswith("⚠️ not a sweep's rows.jsonl")

    handlers = TradeoffHandlers(PairCache(), "tiny")
    for spec in ("auto:\uff15", "auto:\u00b2", "auto:+5", "auto: 5"):
        with pytest.raises(ValueError, match="auto:N needs a whole number N from 1 to 50"):
            handlers.settings("Hi", "model", ["v3"], spec, 4, 1.0, 0, 8)


def test_sums_past_the_float_range_are_computed_not_nulled():
    numbers = dissect("lossless", [1e308, 1e308, 1e308], [1e308, 1e308, 2e307], 0.0)
    assert numbers["q"] == pytest.approx([1 / 3] * 3)
    assert numbers["pi"] == pytest.approx([1 / 2.2, 1 / 2.2, 0.2 / 2.2])
    assert all(v is not None and v == v for key in ("pi", "accept_prob", "residual", "output") for v in numbers[key])


def test_a_request_has_one_token_budget():
    pairs = PairCache()
    tradeoff, compare = TradeoffHandlers(pairs, "tiny"), CompareHandlers(pairs, "tiny")
    ten_rules = ["chow", "diff", "opt", "v1", "v2", "v3", "lossy", "bild", "lossless", "target"]
    start = time.perf_counter()
    for rules, alphas, tokens in [(ten_rules, "auto:50", 1024), (["v3"], list(range(10_000)), 8),
                                  (["v3"], ",".join(str(i / 10_000) for i in range(10_000)), 8),
                                  (["v3", "chow"], "auto:50", 64)]:
        with pytest.raises(ValueError, match=f"one call may generate at most {REQUEST_TOKEN_BUDGET} tokens"):
            tradeoff.settings("Hi", "model", rules, alphas, 4, 1.0, 0, tokens)
    assert time.perf_counter() - start < 2  # refused before any model call
    s, rules, tokens = tradeoff.settings("Hi", "model", ["v3"] * 10_000, "auto:6", 4, 1.0, 0, 32)
    assert tokens == (6 + 1) * 32  # six alphas and the pilot
    assert rules == ["v3"]  # a rule named many times runs once
    with pytest.raises(ValueError, match=r"rows 1 and 3 are the same run \(v3 alpha 0.5\)"):
        compare.rows("Hi", "model", [("v3", 0.5), ("chow", 0.5), ("v3", 0.5)], 4, 1.0, 0, 8)
    with pytest.raises(ValueError, match=r"rows 1 and 2 are the same run \(lossless\)"):
        compare.rows("Hi", "model", [("lossless", 0.0), ("lossless", 0.7)], 4, 1.0, 0, 8)
    assert len(compare.rows("Hi", "model", [(r, 0.5) for r in ("v1", "v2", "v3", "chow", "opt", "diff")], 4, 1.0, 0,
                                1024)) == 6  # Compare's largest call fits the budget


def test_user_text_in_messages_stays_text():
    assert "<" not in markdown_text(MARKUP) and "**" not in markdown_text(MARKUP) and "](" not in markdown_text(MARKUP)
    tradeoff = TradeoffHandlers(PairCache(), "tiny")
    with pytest.warns(UserWarning) as toast:
        *_, status = list(tradeoff.run("Hi", "model", ["v3"], MARKUP, 4, 1.0, 0, 8, True, "calls", 0.25))[-1]
    assert "<img" not in status and "**bold**" not in status and "\\*\\*bold\\*\\*" in status
    assert "&lt;img" in str(toast[0].message) and "<img" not in str(toast[0].message)
    pair = MARKUP + " -> b"
    with pytest.warns(UserWarning):
        view = run_to_end(ExploreHandlers(PairCache(public=True), "tiny"), pair=pair)
    assert "<img" not in view.status and "**bold**" not in view.status
    figure = sandbox_figure(["<b>x</b>", "<i>y</i>"], dissect("v3", [1, 2], [2, 1], 0.3), "v3", 0.3, (0, 1))
    assert all("<" not in str(name) for name in figure.data[0].x)
    _, text, _ = SandboxHandlers.update("v3", 0.3, *START[0], *([MARKUP] + START[1][1:]), *START[2])
    assert "<img" not in text


@pytest.fixture(scope="module")
def slow_app():
    """An app whose target calls are counted and slowed to 20 ms, never ending a run on end-of-text."""
    with slowed_tiny_app(0.02) as app:
        yield app.url, app.calls, app.demo


# long calls: the slow app's pair never writes end-of-text
LONG_CALLS = {
    "/compare": dict(prompt="Once upon a time", rows=[{"rule": r, "alpha": 0.5} for r in ("v3", "chow", "opt")],
                     gamma=1, temperature=1.0, max_new_tokens=1024),
    "/frontier": dict(prompt="Once upon a time", rules=["v3", "chow"], alphas="auto:20", gamma=1, temperature=1.0,
                      max_new_tokens=128),
    "/strategies": dict(prompt="Once upon a time", gamma=1, temperature=1.0, max_new_tokens=1024),
}
ABANDON = """
import json, sys
from gradio_client import Client
Client(sys.argv[1], verbose=False).submit(**json.loads(sys.argv[2]), api_name=sys.argv[3])
sys.stdin.read()  # killed by the test: the client is gone without a word
"""


@pytest.mark.parametrize("api", LONG_CALLS)
def test_an_abandoned_call_of_every_tab_stops(slow_app, api):
    url, calls, _ = slow_app
    settle(calls)
    calls.clear()
    client = subprocess.Popen([sys.executable, "-c", ABANDON, url, json.dumps(LONG_CALLS[api]), api],
                              stdin=subprocess.PIPE)
    while len(calls) < 20:
        time.sleep(0.05)
    client.kill()
    assert 20 <= settle(calls) < 150  # a whole call makes over 1,000 target calls


@pytest.mark.parametrize("api", LONG_CALLS)
def test_a_long_call_does_not_hold_back_a_short_one(slow_app, api):
    """The engine thread is shared by the tokens each call asks for: the short run waits for little more than the
    long call's block in progress (before: for the whole long call)."""
    url, calls, _ = slow_app
    settle(calls)
    client = Client(url, verbose=False)
    start = time.perf_counter()
    assert strict_loads(client.predict(prompt="alone", max_new_tokens=8, gamma=4, api_name="/run"))["tokens"]
    alone = time.perf_counter() - start
    job = client.submit(**LONG_CALLS[api], api_name=api)
    calls.clear()
    while len(calls) < 5:
        time.sleep(0.05)
    start = time.perf_counter()
    assert strict_loads(client.predict(prompt="beside", max_new_tokens=8, gamma=4, api_name="/run"))["tokens"]
    beside = time.perf_counter() - start
    job.cancel()
    assert beside < alone + 2, (alone, beside)


def test_sessions_are_bounded_and_a_page_keeps_its_state_through_a_burst_of_calls(slow_app):
    """Every API call is a session of its own: they go first, and a page that holds state (here: one whose Explore
    run is kept, as a page's Run leaves it) stays, however many calls pass by (a cap of 32 sessions dropped it)."""
    url, _, demo = slow_app
    page = demo.state_holder["an-open-page"]
    page[next(key for key, block in demo.blocks.items() if isinstance(block, gr.State))] = "its run"
    for _ in range(KEPT_EMPTY + 30):  # each call over the plain HTTP API is a new session
        event, _ = raw_call(url, "run", body("run", max_new_tokens="2"))
        assert event == "complete"
    assert len(demo.state_holder.session_data) <= KEPT_EMPTY + 1
    assert demo.state_holder.session_data.get("an-open-page") is page
