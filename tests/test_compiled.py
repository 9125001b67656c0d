"""The static-cache decode path (compiled forwards, preallocated caches that rewind) emits exactly the tokens of
the dynamic path: every rule, gamma 1 and 4, float32 on the CPU."""
import pytest

from cascade_core import RULES, generate
from cascade_core.formats.loading import tiny_pair
from cascade_core.speed.compiled import compile_pair
from test_exactness import ALPHA


@pytest.fixture(scope="module")
def pairs():
    return tiny_pair(), compile_pair(tiny_pair())


@pytest.mark.parametrize("gamma", [1, 4])
@pytest.mark.parametrize("rule", RULES)
def test_compiled_path_emits_the_dynamic_paths_tokens(pairs, rule, gamma):
    dynamic, compiled = pairs
    prompt_ids = dynamic.tokenizer("The cascade", add_special_tokens=False)["input_ids"]
    kwargs = dict(prompt_ids=prompt_ids, rule=rule, alpha=ALPHA[rule], gamma=gamma, seed=7, max_new_tokens=41)
    expected = generate(dynamic, **kwargs)
    got = generate(compiled, **kwargs)
    assert got.tokens == expected.tokens and got.sources == expected.sources
    assert got.stats["target_calls"] == expected.stats["target_calls"]


def test_greedy_lossless_is_target_greedy_when_compiled(pairs):
    _, compiled = pairs
    prompt_ids = compiled.tokenizer("Hello", add_special_tokens=False)["input_ids"]
    target = generate(compiled, prompt_ids=prompt_ids, rule="target", temperature=0, max_new_tokens=30)
    lossless = generate(compiled, prompt_ids=prompt_ids, rule="lossless", temperature=0, gamma=4, max_new_tokens=30)
    assert lossless.tokens == target.tokens


def test_the_cli_and_the_app_offer_the_compiled_path(monkeypatch, capsys):
    from cascade_core import load_pair
    from cascade_core.tools import cli
    from test_app import load_script

    assert load_script().parse_args(["--compile"]).compile
    compiled = load_pair("tiny", compiled=True)
    assert set(compiled.compiled) == {"target", "draft"} and load_pair("tiny").compiled is None
    loaded = []
    monkeypatch.setattr(cli, "load_pair", lambda *a, **kw: loaded.append(kw) or load_pair("tiny"))
    assert cli.main(["run", "--pair", "tiny", "--prompt", "Hi", "--max-new-tokens", "2", "--compile"]) == 0
    assert loaded == [{"draft": None, "compiled": True, "precision": "auto"}]


def test_the_app_runs_its_default_gamma_auto_on_the_compiled_path_as_a_fixed_gamma(pairs):
    """Explore's and Strategies' default gamma (0: auto) on `python app.py --compile`: the compiled path decodes
    fixed-length blocks, so the app runs COMPILED_GAMMA and measures no prices (each would be a graph to compile)."""
    from app.explore import ExploreHandlers
    from app.settings import COMPILED_GAMMA
    from app.pairs import PairCache
    from app.strategies import StrategiesHandlers
    from test_app import SETTINGS

    _, compiled = pairs
    cache = PairCache(loader=lambda **spec: compiled)  # as `python app.py --compile` loads it, compiled once here
    *_, last = ExploreHandlers(cache, "tiny").run(*{**SETTINGS, "gamma": 0, "max_new_tokens": 12}.values())
    trace = last.run.trace
    assert last.status.startswith("Done") and trace.settings["gamma"] == COMPILED_GAMMA and len(trace.tokens) == 12
    assert last.run.prices is None and compiled.prices == {}
    *_, (_, _, status) = StrategiesHandlers(cache, "tiny").run("Hello", "model", "v3", 0.5, 0.6, 0, 1.0, 0, 6)
    assert status.startswith("Done") and compiled.prices == {}


def test_sweep_rows_on_the_compiled_path_project_nothing_and_measure_no_prices(pairs):
    from sweeps.chain import run_chain

    _, compiled = pairs
    item = dict(prompt_id="a", category="fact", prompt="The cascade", reference=None, answer=None)
    rows = run_chain(compiled, item, "v3", [0.5], 0, gamma=4, temperature=1.0, max_new_tokens=12)
    assert rows[0]["tokens"] == 12 and rows[0]["projected_speedup"] is None and compiled.prices == {}
