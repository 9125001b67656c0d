"""The CLI: coloured text and stats, JSON, and clear errors without tracebacks. Called in this process
(cascade_core.tools.cli.main, what `python -m cascade_core` runs): a subprocess's torch import cost each call ~25 s on a
loaded CI machine; test_hardening's invalid UTF-8 is the command's one run in a process of its own."""
import contextlib
import io
import json
from types import SimpleNamespace

import pytest

from cascade_core.tools.cli import main


def cli(*args):
    """(returncode, stdout, stderr) of the command with these arguments, as a subprocess's would be."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as exit_:  # argparse's own refusals
            status = exit_.code
    return SimpleNamespace(returncode=status, stdout=out.getvalue(), stderr=err.getvalue())


def test_run_prints_text_and_stats():
    r = cli("run", "--pair", "tiny", "--prompt", "Hello", "--max-new-tokens", "12", "--color")
    assert r.returncode == 0, r.stderr
    assert "\033[38;5;" in r.stdout and "tokens=12" in r.stdout and "acceptance_rate=" in r.stdout


def test_run_json():
    r = cli("run", "--pair", "tiny", "--prompt", "Hello", "--max-new-tokens", "6", "--rule", "opt", "--alpha", "0.1",
            "--json")
    data = json.loads(r.stdout)
    assert len(data["tokens"]) == 6 and set(data["sources"]) <= {"accepted", "deferred", "replaced"}
    assert data["settings"]["rule"] == "opt"
    m, sources = data["speculative_decoding"], data["sources"]  # the engines' acceptance metrics, from the trace
    assert m["num_spec_steps"] + sources.count("target") == data["stats"]["target_calls"]
    assert sum(m["per_step_accepted"]) == m["num_accepted_draft_tokens"] == sources.count("accepted") + \
        sources.count("deferred")


@pytest.mark.parametrize("args, message", [
    (["--rule", "v9"], "unknown rule 'v9'; the rules are: chow, diff, opt, v1, v2, v3"),
    (["--alpha", "1.5"], "outside rule 'v3'"),
    (["--gamma", "17"], "gamma must be a whole number from 1 to 16"),
    (["--gamma", "0"], "gamma must be a whole number from 1 to 16"),
    (["--max-new-tokens", "0"], "max_new_tokens must be a whole number from 1 to 2048"),
    (["--max-new-tokens", "5000"], "max_new_tokens must be a whole number from 1 to 2048"),
    (["--prompt", "   "], "the prompt is empty"),
    (["--prompt", "x" * 5000, "--max-new-tokens", "8"], "exceeds the models' context"),
])
def test_bad_input_is_a_clear_error(args, message):
    base = ["run", "--pair", "tiny", "--prompt", "Hello"]
    r = cli(*base, *args)
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr


def test_the_draft_is_chosen_beside_the_pair():
    r = cli("run", "--pair", "tiny", "--draft", "head", "--prompt", "Hello", "--max-new-tokens", "6", "--gamma", "3",
            "--json")
    from cascade_core import generate
    from cascade_core.formats.loading import tiny_pair
    assert json.loads(r.stdout)["tokens"] == generate(tiny_pair(draft_kind="head"), "Hello", gamma=3,
                                                      max_new_tokens=6).tokens
    r = cli("run", "--pair", "tiny", "--draft", "eagle", "--prompt", "Hi")
    assert r.returncode == 2 and r.stderr.strip() == ("error: draft 'eagle' is not one of the tiny pair's drafts: use "
                                                      "'model' (the independent draft) or 'head' (the EAGLE-3 head), "
                                                      "or give a target with it")
    r = cli("run", "--pair", "tiny", "--draft", "head", "--rule", "draft", "--prompt", "Hi")
    assert r.returncode == 2 and "needs a draft that runs alone" in r.stderr and "Traceback" not in r.stderr


def test_unknown_pair():
    r = cli("run", "--pair", "huge", "--prompt", "Hi")
    assert r.returncode == 2 and "unknown pair 'huge'" in r.stderr


def test_missing_hub_model_is_a_clear_error():
    r = cli("run", "--target", "no-such/model", "--draft", "no-such/draft", "--prompt", "Hi")  # offline: conftest
    assert r.returncode == 2
    assert "target model 'no-such/model' and the draft 'no-such/draft' are not downloaded" in r.stderr
