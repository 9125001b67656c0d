"""The cost of a fresh run, read back from its sources, equals what the engine counted: for every rule, with and
without an end-of-text token, at several gammas; and it stays the cost of a fresh run for a resumed trace."""
import pytest

from cascade_core import RULES, generate
from cascade_core.costs import break_even_cost_ratio, expected_speedup, fresh_run_calls, priced_speedup
from test_exactness import ALPHA


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("gamma", [1, 3, 5])
def test_fresh_run_calls_are_the_engines(tiny64, rule, gamma):
    for seed, stop_at_eos in ((1, False), (2, True), (3, True)):
        trace = generate(tiny64, "Once", rule=rule, alpha=ALPHA[rule], gamma=gamma, seed=seed, max_new_tokens=37,
                         stop_at_eos=stop_at_eos)
        stats = trace.stats
        assert fresh_run_calls(trace.sources, rule, gamma, 37) == (stats["target_calls"], stats["draft_calls"])


def test_a_resumed_trace_costs_what_a_fresh_run_costs(tiny64):
    for seed in range(20):  # a seed whose first flip under the new alpha is neither at the start nor absent
        kwargs = dict(gamma=4, seed=seed, max_new_tokens=40)
        old = generate(tiny64, "Once", rule="v3", alpha=0.6, **kwargs)
        _, k = old.recolour("v3", 0.8)
        if k not in (None, 0):
            break
    assert k not in (None, 0)
    resumed = generate(tiny64, rule="v3", alpha=0.8, resume=(old, k), **kwargs)
    fresh = generate(tiny64, "Once", rule="v3", alpha=0.8, **kwargs)
    assert resumed.tokens == fresh.tokens and resumed.stats["new_tokens"] == len(fresh.tokens) - k  # counted: the rest
    assert fresh_run_calls(resumed.sources, "v3", 4, 40) == (fresh.stats["target_calls"], fresh.stats["draft_calls"])


@pytest.mark.parametrize("a, gamma, verify", [(0.4, 4, 1.0), (0.7, 4, 1.5), (0.9, 2, 1.2)])
def test_at_the_break_even_cost_ratio_a_block_just_pays(a, gamma, verify):
    c = break_even_cost_ratio(a, gamma, gamma + 1, verify)
    assert priced_speedup(a, gamma, 1.0, c, verify) == pytest.approx(1.0)
    assert priced_speedup(a, gamma, 1.0, 0.9 * c, verify) > 1 > priced_speedup(a, gamma, 1.0, 1.1 * c, verify)
    assert break_even_cost_ratio(a, gamma, gamma + 1) == pytest.approx(
        (expected_speedup(a, gamma, 0.0, gamma + 1) - 1) / (gamma + 1))


def test_no_cost_ratio_pays_when_the_verification_costs_more_than_a_block_yields():
    assert break_even_cost_ratio(0.38, 4, 5, verify_ratio=2.32) == 0.0
