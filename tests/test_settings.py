"""One RunSettings, checked once; the app's settings round-trip through every shape they take (keywords, an API call,
the controls, a link's query) unchanged."""
import random
from dataclasses import fields

import pytest

from app.controls import alpha_slider_range
from app.links import Linked, read_link
from app.settings import APP_MAX_NEW_TOKENS, MAX_TEMPERATURE, AppSettings
from cascade_core import RULES, generate
from cascade_core.decoding.run_settings import MAX_NEW_TOKENS, RunSettings

PAIR = "tiny"
PROMPTS = ("Hello", "Once upon a time, é ü 漢字", "a, b & c = d?")


def random_settings(rng):
    """Settings a user could make on Explore: every rule, alpha in its slider's range, gamma 0 (auto) to 16."""
    rule = rng.choice(sorted(RULES))
    lo, hi = alpha_slider_range(rule)
    alpha = round(rng.uniform(lo, hi), 2) if RULES[rule].alpha_used else 0.0
    return AppSettings.from_inputs(rng.choice(PROMPTS), PAIR, True, rule, alpha, rng.randint(0, 16),
                                   rng.choice([0, round(rng.uniform(0.05, MAX_TEMPERATURE), 2)]),
                                   rng.randint(1, APP_MAX_NEW_TOKENS), rng.randint(0, 2**40), auto_gamma=True)


def test_every_shape_round_trips():
    rng = random.Random(0)
    defaults = dict(prompt="x", draft="model", rule="v3", alpha=0.5, gamma=0, temperature=0.7, seed=0,
                    max_new_tokens=64)
    explore = Linked("explore", defaults, "run", tuple(RULES), auto_gamma=True)
    for _ in range(200):
        s = random_settings(rng)
        assert AppSettings.from_query(s.to_query(), defaults, PAIR) == s  # a link and back
        controls = s.to_controls()
        assert AppSettings.from_inputs(controls["prompt"], PAIR, True, controls["rule"], controls["alpha"],
                                       controls["gamma"], controls["temperature"], controls["max_new_tokens"],
                                       controls["seed"], auto_gamma=True, draft=controls["draft"]) == s
        api_gamma = "auto" if s.gamma == "auto" else s.gamma  # the API takes "auto" as its own value
        assert AppSettings.from_inputs(s.prompt, PAIR, True, s.rule, s.alpha, api_gamma, s.temperature,
                                       s.max_new_tokens, s.seed, auto_gamma=True) == s
        linked, values, _, errors = read_link(s.to_query(), {"explore": explore})
        assert not errors and values == controls  # what a page load sets the controls to


def test_keywords_are_checked_once_in_the_constructor():
    s = RunSettings.of(rule="chow", alpha=0.4, gamma="auto", temperature=1, seed=4.0, max_new_tokens=8.0)
    assert (s.gamma, s.temperature, s.seed, s.max_new_tokens) == ("auto", 1.0, 4, 8)
    assert type(s.seed) is int and type(s.temperature) is float
    assert RunSettings.of(s, alpha=0.6) == RunSettings(rule="chow", alpha=0.6, gamma="auto", temperature=1.0,
                                                       seed=4, max_new_tokens=8)
    assert RunSettings(eos_token_ids=[3, 3, 5]).eos_token_ids == frozenset({3, 5})
    for keywords, message in ((dict(gama=3), "'gama' is not a setting; the settings are rule, alpha, gamma"),
                              (dict(gamma=0), "gamma must be a whole number from 1 to 16"),
                              (dict(rule="lossy", alpha=1.0), "alpha=1.0 is outside rule 'lossy'"),
                              (dict(max_new_tokens=MAX_NEW_TOKENS + 1), "max_new_tokens must be a whole number"),
                              (dict(min_new_tokens=9, max_new_tokens=8),
                               "min_new_tokens must be a whole number from 0 to 8"),
                              (dict(chat="yes"), "chat must be true or false, got 'yes'"),
                              (dict(stop=3), "stop must be a function"),
                              (dict(eos_token_ids=[-1]), "eos_token_ids must be a token id")):
        with pytest.raises(ValueError, match=message.replace("(", r"\(")):
            RunSettings.of(**keywords)
    with pytest.raises(ValueError, match="max_new_tokens must be a whole number from 1 to 1024"):
        AppSettings(prompt="Hi", max_new_tokens=APP_MAX_NEW_TOKENS + 1)
    with pytest.raises(ValueError, match="the prompt is empty"):
        AppSettings(prompt="  ")


def test_a_link_query_reads_its_first_bad_value_in_one_sentence():
    defaults = dict(prompt="x", draft="model", rule="v3", alpha=0.5, gamma=0, temperature=0.7, seed=0,
                    max_new_tokens=64)
    with pytest.raises(ValueError, match="seed must be a number written with the digits 0-9, got '１'"):
        AppSettings.from_query(dict(prompt="Hi", seed="１"), defaults, PAIR)
    with pytest.raises(ValueError, match="temperature must be 0 \\(greedy\\) or a number up to 2"):
        AppSettings.from_query(dict(prompt="Hi", temperature="3"), defaults, PAIR)
    assert AppSettings.from_query(dict(prompt="Hi", gamma="auto"), defaults, PAIR).gamma == "auto"


def test_the_engine_runs_the_settings_object_as_it_runs_keywords(tiny64):
    keywords = dict(rule="diff", alpha=0.2, gamma=3, temperature=0.9, seed=5, max_new_tokens=12)
    by_object = generate(tiny64, "Hello", settings=RunSettings(**keywords))
    by_keywords = generate(tiny64, "Hello", **keywords)
    assert by_object.tokens == by_keywords.tokens and by_object.sources == by_keywords.sources
    assert by_object.settings == by_keywords.settings
    app = AppSettings(prompt="Hello", **keywords)
    assert generate(tiny64, app.prompt, settings=app).tokens == by_keywords.tokens
    assert {f.name for f in fields(AppSettings)} - {f.name for f in fields(RunSettings)} == {"prompt", "pair_spec"}
