"""gamma "auto": each block's length is the one the cost model prices fastest at the acceptance seen so far, from
the pair's measured call prices. Randomness is keyed by position, so the tokens are any fixed gamma's."""
from dataclasses import replace

import pytest

from cascade_core import generate
from cascade_core.decoding.batch_block import PRIOR_ACCEPTANCE, PRIOR_WEIGHT, Batch
from cascade_core.decoding.row import start_row
from cascade_core.decoding.run_settings import AUTO_GAMMAS, RunSettings
from cascade_core.method.costs import best_gamma, priced_speedup
from cascade_core.speed.prices import block_prices, measured_prices, missing_prices


def priced(pair, target, draft, verify_per_token, scale=1000.0):
    """The pair with made-up prices (in units of ``scale`` seconds, beside which the engine's own milliseconds per
    block are nothing): a target call, a draft call, and verify(n) = target + (n - 1) * extra."""
    target, draft, verify_per_token = target * scale, draft * scale, verify_per_token * scale
    prices = {("target", 1): target, ("draft", 1): draft}
    prices.update({("target", g + 1): target + g * verify_per_token for g in AUTO_GAMMAS})
    return replace(pair, prices=prices)


def test_best_gamma_follows_acceptance_and_prices():
    cheap = lambda g: (1.0, 0.02, 1.0, 0.0)  # noqa: E731  a free draft, verification as dear as one token
    dear = lambda g: (1.0, 0.6, 1.0 + 0.2 * g, 0.0)  # noqa: E731
    assert best_gamma(0.9, cheap, AUTO_GAMMAS) == 6
    assert best_gamma(0.2, dear, AUTO_GAMMAS) == 1
    # a fixed cost per block (the engine's own work) favours longer blocks
    assert (best_gamma(0.6, lambda g: (1.0, 0.1, 1.0, 2.0), AUTO_GAMMAS)
            > best_gamma(0.6, lambda g: (1.0, 0.1, 1.0, 0.0), AUTO_GAMMAS))
    a = 0.6
    chosen = best_gamma(a, dear, AUTO_GAMMAS)
    assert all(priced_speedup(a, chosen, *dear(chosen)) >= priced_speedup(a, g, *dear(g)) for g in AUTO_GAMMAS)


@pytest.mark.parametrize("rule, alpha", [("v3", 0.6), ("lossless", 0.0), ("chow", 0.5), ("opt", 0.1)])
def test_auto_gamma_emits_the_fixed_gammas_tokens(tiny64, rule, alpha):
    pair = priced(tiny64, 1.0, 0.05, 0.05)
    kwargs = dict(prompt_ids=[5, 6, 7], rule=rule, alpha=alpha, temperature=1.0, seed=4, max_new_tokens=40)
    auto = generate(pair, gamma="auto", **kwargs)
    assert auto.tokens == generate(pair, gamma=3, **kwargs).tokens
    assert auto.settings["gamma"] == "auto"
    # each block's gamma is best_gamma at the acceptance its row had shown before it
    seen, count, expected = 0.0, 0, []
    blocks = {}
    for pos in auto.positions:
        blocks.setdefault(pos["block"], []).append(pos["accept_prob"])
    for probs in blocks.values():
        a = (PRIOR_ACCEPTANCE * PRIOR_WEIGHT + seen) / (PRIOR_WEIGHT + count)
        expected.append(best_gamma(a, block_prices(pair), AUTO_GAMMAS))
        seen, count = seen + sum(probs), count + len(probs)
    assert auto.counters["gammas"] == expected
    blocks_taken = [len(b) for b in blocks.values()]
    assert all(n <= g + 1 for n, g in zip(blocks_taken, expected))


def test_auto_gamma_shortens_blocks_when_the_draft_is_dear(tiny64):
    kwargs = dict(prompt_ids=[5, 6, 7], rule="v3", alpha=0.6, seed=4, max_new_tokens=30, gamma="auto")
    cheap = generate(priced(tiny64, 1.0, 0.01, 0.0), **kwargs).counters["gammas"]
    dear = generate(priced(tiny64, 1.0, 0.9, 0.3), **kwargs).counters["gammas"]
    assert set(dear) == {1} and max(cheap) > 1


def test_prices_are_measured_once_per_pair_and_length(tiny64):
    pair = replace(tiny64, prices={})
    first = measured_prices(pair, 4)
    assert set(pair.prices) == {("target", 1), ("draft", 1), ("target", 5)}
    assert measured_prices(pair, 4) == first and first.block == 5 and first.c > 0 and first.verify_ratio > 0


def test_auto_gamma_is_refused_where_it_cannot_run(tiny64):
    with pytest.raises(ValueError, match='gamma must be a whole number from 1 to 16 or "auto", got \'fast\''):
        generate(tiny64, prompt_ids=[5], gamma="fast", max_new_tokens=2)
    from cascade_core.speed.compiled import compile_pair

    with pytest.raises(ValueError, match='gamma "auto" changes the block length'):
        generate(compile_pair(tiny64), prompt_ids=[5], gamma="auto", max_new_tokens=2)


def test_the_block_loop_reads_prices_and_never_measures_them(tiny64):
    """A batch of a gamma "auto" row refuses a pair whose prices were not measured (nothing is measured inside the
    loop, where a row's clock would count it); its caller (engine.decode) measures them before the row decodes."""
    pair = replace(tiny64, prices={}, overhead=None)
    row = start_row(pair, RunSettings(gamma="auto", max_new_tokens=4), prompt_ids=[5, 6, 7])
    with pytest.raises(ValueError, match='gamma "auto" reads prices measured before its rows decode'):
        Batch(pair, [row])
    assert pair.prices == {} and pair.overhead is None
    generate(pair, prompt_ids=[5, 6, 7], gamma="auto", max_new_tokens=4)
    assert not missing_prices(pair, AUTO_GAMMAS) and pair.overhead > 0
