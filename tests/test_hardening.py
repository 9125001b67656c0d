"""Hostile but fair input: strict JSON for every rule, abandoned API calls that stop, a bounded queue, no
sampling from NaN, a bounded pair cache, public mode when reachable, one clear sentence per bad value, and
token text that never becomes markup."""
import json
import subprocess
import sys
import time

import httpx
import pytest
import torch
from gradio_client import Client
from gradio_client.utils import Status

from app.explore import ExploreHandlers
from app.fair_share import LISTEN_WAIT
from app.options import GENERATION_SLOTS
from app.pairs import PairCache
from app.viz import figures
from app.viz.tokens import inspector_html
from browser import slowed_tiny_app
from cascade_core import RULES, generate, load_pair
from cascade_core.method.sampling import untempered_and_tempered
from test_app import load_script, run_to_end
from test_cli import cli


def strict_loads(text):
    """json.loads that refuses NaN and Infinity, as the browser's JSON.parse does."""
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def client(tiny_app_url):
    return Client(tiny_app_url, verbose=False)


@pytest.mark.parametrize("rule", RULES)
def test_every_rule_over_the_api_is_strict_json(client, rule):
    alpha = 0.5 if RULES[rule].alpha_used else 0.0
    data = strict_loads(client.predict(prompt="Hi", rule=rule, alpha=alpha, max_new_tokens=6, api_name="/run"))
    assert data["settings"]["rule"] == rule and len(data["tokens"]) == 6
    assert all(isinstance(v, (float, int, str)) for pos in data["positions"] for v in pos["a_star"].values())


def test_cli_json_is_strict():
    r = cli("run", "--pair", "tiny", "--prompt", "Hi", "--rule", "lossless", "--max-new-tokens", "4", "--json")
    assert strict_loads(r.stdout)["settings"]["alpha_range"] == ["-inf", "inf"]


@pytest.mark.parametrize("args, message", [
    (dict(alpha=None), "alpha must be a finite number, got None"),
    (dict(alpha=[]), "alpha must be a finite number, got []"),
    (dict(alpha="abc"), "alpha must be a finite number, got 'abc'"),
    (dict(alpha=True), "alpha must be a finite number, got True"),
    (dict(temperature=None), "temperature must be 0 (greedy) or a number from 0.01 to 10, got None"),
    (dict(temperature=1e-38), "temperature must be 0 (greedy) or a number from 0.01 to 10, got 1e-38"),
    (dict(seed=-1), "seed must be a whole number from 0 to"),
    (dict(gamma="4"), "gamma must be a whole number from 1 to 16, or 0 or \"auto\" for the cost model's choice, "
                      "got '4'"),
    (dict(max_new_tokens=2048), "max_new_tokens must be a whole number from 1 to 1024, got 2048"),
    (dict(prompt=123), "prompt must be text, got int 123"),
    (dict(prompt=["a", "b"]), "prompt must be text, got list"),
    (dict(rule=None), "unknown rule None"),
])
def test_every_bad_api_value_names_its_field(client, args, message):
    with pytest.raises(Exception) as error:
        client.predict(**{"prompt": "Hi", "max_new_tokens": 4, **args}, api_name="/run")
    assert message in str(error.value)
    assert strict_loads(client.predict(prompt="still here", max_new_tokens=4, api_name="/run"))["tokens"]


def call_raw(url, data):
    """/run over Gradio's plain HTTP API with the JSON written by hand (gradio_client cannot send every value a
    client can, e.g. a lone surrogate escaped in JSON): the final SSE event and its data."""
    body = json.dumps({"data": data}).encode()  # ensure_ascii: a lone surrogate travels as the escape \\udcff
    event_id = httpx.post(f"{url}gradio_api/call/run", content=body,
                          headers={"content-type": "application/json"}).json()["event_id"]
    lines = httpx.get(f"{url}gradio_api/call/run/{event_id}", timeout=60).text.strip().splitlines()
    return lines[-2].removeprefix("event: "), lines[-1].removeprefix("data: ")


def test_a_lone_surrogate_over_http_is_named(tiny_app_url):
    event, data = call_raw(tiny_app_url, ["bad \udcff byte", "v3", 0.3, 4, 1.0, 4, 0, ""])
    assert event == "error"
    assert "prompt must be valid Unicode text; character 4 is a lone surrogate" in data


def test_cli_rejects_invalid_utf8_in_one_line():
    r = subprocess.run([sys.executable.encode(), b"-m", b"cascade_core", b"run", b"--pair", b"tiny", b"--prompt",
                        b"abc\xff", b"--max-new-tokens", b"4"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("error: prompt must be valid Unicode text")


@pytest.mark.parametrize("args, message", [
    (["--alpha", "-0.5", "--rule", "diff"], None),  # a negative value needs no '='
    (["--alpha", "abc"], "error: argument --alpha: expected a number, got 'abc'"),
    (["--seed", "-1"], "error: seed must be a whole number from 0 to"),
    (["--temperature", "1e-38"], "error: temperature must be 0 (greedy)"),
])
def test_cli_values(args, message):
    r = cli("run", "--pair", "tiny", "--prompt", "Hi", "--max-new-tokens", "4", *args)
    if message is None:
        assert r.returncode == 0, r.stderr
    else:
        assert r.returncode == 2 and r.stderr.strip() == r.stderr.strip().splitlines()[0]
        assert r.stderr.startswith(message)


def test_engine_never_samples_from_nan():
    logits = torch.tensor([[0.0, 3e38, -3e38]])
    with pytest.raises(ValueError, match="not finite"):
        untempered_and_tempered(logits, 0.5)
    assert untempered_and_tempered(torch.tensor([[0.0, 1.0]]), 0.01)[1].argmax() == 1


@pytest.fixture(scope="module")
def counted_app():
    """An app whose target calls are counted and slowed to 20 ms, never ending a run on end-of-text (a 1024-token run
    then takes over 10 s on any machine; on some CPUs seed 0's run wrote end-of-text early), with a queue of 2."""
    with slowed_tiny_app(0.02, queue_size=2) as app:
        yield app.url, app.calls


ABANDON = """
import sys
from gradio_client import Client
from gradio_client.utils import Status
# T 1: at the page's T 0.7 the tiny pair writes end-of-text early, and the run must be long
job = Client(sys.argv[1], verbose=False).submit(prompt="Once upon a time", max_new_tokens=1024, gamma=1,
                                                temperature=1.0, api_name="/run")
sys.stdin.read()  # killed by the test: the client is gone without a word, as a killed browser or script is
"""


def settle(calls):
    """The number of target calls once they stop coming (none for 2 s)."""
    while True:
        seen = len(calls)
        time.sleep(2)
        if len(calls) == seen:
            return seen


def test_an_abandoned_api_call_stops_generating(counted_app):
    url, calls = counted_app
    calls.clear()
    client = subprocess.Popen([sys.executable, "-c", ABANDON, url], stdin=subprocess.PIPE)
    while len(calls) < 20:
        time.sleep(0.05)
    client.kill()
    # 1024 tokens at gamma 1 take 512 target calls or more; the run stopped within a progress interval
    assert 20 <= settle(calls) < 60
    assert strict_loads(Client(url, verbose=False).predict(prompt="next", max_new_tokens=4, api_name="/run"))["tokens"]


def test_a_never_read_api_call_never_generates(counted_app):
    """A call starts only once its caller opens its result stream (app/fair_share.py); one never read leaves the
    queue after LISTEN_WAIT, and a reader who comes later is told why."""
    url, calls = counted_app
    settle(calls)
    calls.clear()
    body = {"data": ["Once upon a time", "v3", 0.3, 1, 1.0, 1024, 0, ""]}
    event_id = httpx.post(f"{url}gradio_api/call/run", json=body, timeout=10).json()["event_id"]  # never read
    time.sleep(LISTEN_WAIT + 1.5)
    assert not calls
    lines = httpx.get(f"{url}gradio_api/call/run/{event_id}", timeout=10).text.strip().splitlines()
    assert lines[-2] == "event: error" and "nobody opened this call's result stream" in lines[-1]


def test_a_full_queue_answers_at_once(counted_app):
    url, _ = counted_app
    # three clients (a client may hold half the slots and a quarter of the queue: app/fair_share.py)
    clients = [Client(url, verbose=False) for _ in range(3)]
    long = []
    for i in range(GENERATION_SLOTS + 2):  # every slot taken, then the queue of 2 filled
        # these runs must hold their slots: the fixture's pair never writes end-of-text
        long.append(clients[i % 3].submit(prompt="Once", max_new_tokens=1024, gamma=1, temperature=1.0,
                                          api_name="/run"))
        time.sleep(0.1)  # all of them sent well before the first (over 10 s) ends
    deadline = time.monotonic() + 20  # the queue is full once the last two wait behind every slot's run
    while any(job.status().code != Status.IN_QUEUE for job in long[-2:]) and time.monotonic() < deadline:
        time.sleep(0.1)
    start = time.perf_counter()
    with pytest.raises(Exception, match="Queue is full"):
        Client(url, verbose=False).predict(prompt="one more", max_new_tokens=4, api_name="/run")
    assert time.perf_counter() - start < 10
    start = time.perf_counter()  # work that needs no model never waits for one: /sandbox runs outside the queue
    answer = httpx.post(f"{url}gradio_api/run/sandbox", json={"data": [[1, 1], [1, 3], "lossless", 0.0]}, timeout=10)
    assert strict_loads(answer.json()["data"][0])["output"] == [0.25, 0.75]
    assert time.perf_counter() - start < 1
    for job in long:
        job.cancel()


def test_pair_specs_are_normalised_and_the_cache_is_bounded():
    loads, messages = [], []

    def loader(name=None, target=None, draft=None, progress=None):
        loads.append(name or f"{draft} -> {target}")
        return object()

    cache = PairCache(loader=loader, max_pairs=2)
    assert cache.get("tiny") is cache.get(" tiny") is cache.get("tiny  ")
    assert cache.get("a ->  b") is cache.get("a->b")
    assert loads == ["tiny", "a -> b"]
    cache.get("tiny")  # now most recently used
    cache.get("c -> d", progress=messages.append)
    assert not cache.loaded("a -> b") and cache.loaded("tiny") and cache.loaded("c -> d")
    assert "Freed model pair a -> b" in messages[-1]


@pytest.mark.parametrize("argv, public", [
    ([], False), (["--share"], True), (["--host", "0.0.0.0"], True), (["--host", "::1"], False),
    (["--host", "0.0.0.0", "--trust-visitors"], False), (["--public"], True), (["--host", "localhost"], False),
])
def test_public_mode_whenever_others_can_reach_the_app(argv, public):
    script = load_script()
    assert script.public_mode(script.parse_args(argv)) is public


def test_token_text_never_becomes_markup():
    trace = generate(load_pair("tiny"), "Hi", rule="v3", alpha=0.3, max_new_tokens=8, seed=1)
    pos = dict(trace.positions[0], text="<b>bold</b>", proposal_text="<svg onload=x>")
    text = inspector_html(0, pos, "v3 kept '<a href=x>link</a>'", "note <i>")
    assert "<b>" not in text and "<svg" not in text and "<a href" not in text and "<i>" not in text
    assert "&lt;b&gt;bold&lt;/b&gt;" in text
    positions = [dict(p, text="<b>x</b>") for p in trace.positions]
    fig = figures.step_figure(positions, trace.sources, "v3", 0.3)
    assert all("<b>" not in str(label) for label in fig.data[0].customdata)
    bars = figures.inspector_figure(pos, "v3", 0.3)
    assert "<svg" not in bars.layout.title.text


def test_page_warns_with_the_field_for_bad_values():
    handlers = ExploreHandlers(PairCache(), "tiny")
    with pytest.warns(UserWarning, match="seed must be a whole number from 0"):
        view = run_to_end(handlers, seed=-1)
    assert "seed" in view.status
