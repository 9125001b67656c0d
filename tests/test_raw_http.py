"""Every API endpoint over raw HTTP, the sequence the README shows (POST /gradio_api/call/<name>, then GET its
event's stream): what a call leaves out takes its default, a missing required value or an extra one gets one
sentence, and no caller's mistake leaves a traceback in the server's log."""
import json

import httpx
import pytest

# (endpoint, the values a raw call sends: the required ones alone)
REQUIRED_ONLY = [("run", ["Hi"]), ("compare", ["Hi", [{"rule": "chow", "alpha": 0.5}]]), ("frontier", ["Hi", ["chow"]]),
                 ("sandbox", [[0.6, 0.4], [0.3, 0.7]]), ("strategies", ["Hi"]), ("block", ["Hi"])]


def raw_call(url, name, data):
    """(the last event's name, its data) of one raw call."""
    posted = httpx.post(f"{url}gradio_api/call/{name}", json={"data": data}, timeout=30)
    posted.raise_for_status()
    event_id = posted.json()["event_id"]
    event, payload = None, None
    with httpx.stream("GET", f"{url}gradio_api/call/{name}/{event_id}", timeout=300) as stream:
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line[len("event: "):]
            elif line.startswith("data: "):
                payload = json.loads(line[len("data: "):])
    return event, payload


@pytest.mark.parametrize("name, data", REQUIRED_ONLY)
def test_a_raw_call_with_the_required_values_alone_runs_at_the_defaults(tiny_app_url, name, data, capfd):
    event, payload = raw_call(tiny_app_url, name, data)
    assert event == "complete", (event, payload)
    result = json.loads(payload[-1]) if isinstance(payload[-1], str) else payload[-1]
    if name == "run":  # the page's defaults: v3, alpha 0.5, gamma auto, T 0.7, 64 tokens
        settings = result["settings"]
        assert (settings["rule"], settings["alpha"], settings["gamma"], settings["temperature"],
                settings["max_new_tokens"]) == ("v3", 0.5, "auto", 0.7, 64)
    if name == "block":  # block 0 of /run's run at the same defaults
        run = json.loads(raw_call(tiny_app_url, "run", data)[1][-1])
        assert result["block"] == 0 and result["emitted"] == [pos["token"] for pos in run["positions"]
                                                               if pos["block"] == 0]
    assert "Traceback" not in capfd.readouterr().err


def test_a_block_out_of_range_gets_one_sentence(tiny_app_url, capfd):
    event, payload = raw_call(tiny_app_url, "block", ["Hi", "v3", 0.5, 3, 0.7, 20, 0, "", 19])
    assert event == "error" and payload["error"].startswith("block=19 is out of range: this run has")
    assert "Traceback" not in capfd.readouterr().err


def test_a_raw_call_missing_or_adding_values_gets_one_sentence(tiny_app_url, capfd):
    event, payload = raw_call(tiny_app_url, "run", [])
    assert event == "error" and payload["error"].startswith("/run needs a value for prompt (its values, in order: "
                                                            "prompt, rule, alpha, gamma")
    event, payload = raw_call(tiny_app_url, "sandbox", [[0.5, 0.5], [0.5, 0.5], "v3", 0.3, "extra"])
    assert event == "error" and payload["error"] == ("/sandbox takes at most 4 values (q, p, rule, alpha), got 5; "
                                                     "send fewer")
    event, payload = raw_call(tiny_app_url, "run", ["Hi", "nope"])
    assert event == "error" and payload["error"].startswith("unknown rule 'nope'")
    assert "Traceback" not in capfd.readouterr().err
