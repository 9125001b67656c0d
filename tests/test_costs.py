"""The cost of a fresh run, read back from its sources, equals what the engine counted: for every rule, with and
without an end-of-text token, at several gammas; and it stays the cost of a fresh run for a resumed trace."""
import pytest

from cascade_core import RULES, generate
from cascade_core.method.costs import break_even_cost_ratio, expected_speedup, fresh_run_calls, priced_speedup
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


# -- one speed-up over the target alone, every view's (issue 64, item 2) --

def priced(pair, trace):
    """The one function's number for this trace, priced as every view prices it."""
    from cascade_core.decoding.batch_block import run_prices
    from cascade_core.method.costs import speedup_over_target
    return speedup_over_target(trace.sources, trace.settings["rule"], trace.gamma, run_prices(pair, trace.gamma))


def test_the_speedup_over_the_target_alone_is_one_definition():
    from cascade_core.method.costs import speedup_at_c, speedup_over_target, with_target_alone
    from cascade_core.speed.prices import Prices
    prices = Prices(target=0.04, draft=0.01, verify=0.06, block=5, overhead=0.002)
    sources = ["accepted", "accepted", "replaced", "target", "deferred", "replaced"]
    acceptance = 3 / 5  # kept proposals over the positions the draft proposed at (the floor's token is not one)
    block = 5 * 0.01 + 0.06 + 0.002
    expected = with_target_alone((1 - acceptance ** 5) / (1 - acceptance) * 0.04 / block, 1 / 6)
    assert speedup_over_target(sources, "v3", 4, prices) == pytest.approx(expected)
    assert speedup_over_target(sources, "target", 4, prices) == 1.0
    assert speedup_over_target(["draft"] * 3, "draft", 4, prices) == pytest.approx(4.0)  # 1 / c
    assert speedup_over_target(sources, "v3", 4, None) is None  # nothing prices it (the compiled path)
    # the hypothetical figure, at a c the user sets: Leviathan et al.'s estimate with g + 1 draft calls per block
    assert speedup_at_c(sources, "v3", 4, 0.3) == pytest.approx(
        with_target_alone(expected_speedup(acceptance, 4, 0.3, 5), 1 / 6))


def test_every_view_shows_the_one_functions_number(tiny64):
    """Explore's sentence, Compare's row, the Trade-off's point (a sweep row's), Strategies' lane and the lessons'
    table (row_stats) all read costs.speedup_over_target for the same text, priced with the pair's measured calls."""
    from app.compare import row_stats
    from app.explore_views import Run, stats_view
    from cascade_core.decoding.batch_block import run_prices
    from cascade_core.decoding.strategies import lane
    from sweeps.chain import row
    from sweeps.figures import points
    from sweeps.report import summarise
    trace = generate(tiny64, "Once", rule="v3", alpha=0.5, gamma=4, seed=2, max_new_tokens=20)
    number = priced(tiny64, trace)
    assert number is not None and number != 1.0
    prices = run_prices(tiny64, trace.gamma)
    _, explore = stats_view(Run(trace, "tiny", prices), round(prices.c, 2))
    assert f"on this machine: {number:.2f}×" in explore and "set by you" not in explore  # c at the draft's own
    assert row_stats(tiny64, trace)["speedup"] == number  # Compare, and the lessons' tables
    assert row_stats(tiny64, trace)["c"] == prices.c  # each draft's own measured c, not a slider's
    item = dict(prompt_id="0", category=None, reference=None, answer=None)
    sweep_row = row(tiny64, item, trace, 0.5)
    assert sweep_row["projected_speedup"] == number
    assert points(summarise([sweep_row]), "speedup", "tv_to_target", 0.25)[0]["x"] == pytest.approx(number)
    assert lane("speculative cascade", [trace], pair=tiny64)["totals"]["speedup"] == number  # Strategies


def test_a_hypothetical_c_is_shown_only_where_the_user_sets_it(tiny64):
    from app.explore_views import Run, stats_view
    from cascade_core.decoding.batch_block import run_prices
    trace = generate(tiny64, "Once", rule="v3", alpha=0.5, gamma=4, seed=2, max_new_tokens=20)
    prices = run_prices(tiny64, trace.gamma)
    moved = prices.c + (0.1 if prices.c < 0.8 else -0.1)  # off the draft's own c, on the slider (0.01 to 1)
    _, text = stats_view(Run(trace, "tiny", prices), moved)
    assert f"At c = {moved:.2f}, set by you" in text and f"on this machine: {priced(tiny64, trace):.2f}×" in text
    _, untouched = stats_view(Run(trace, "tiny", prices), moved, unset={moved})  # where the slider started
    assert "set by you" not in untouched


def test_cs_slider_starts_at_the_default_drafts_measured_c():
    from app.explore import DEFAULT_COST_RATIO, ExploreHandlers
    from app.pairs import PairCache
    from cascade_core.decoding.batch_block import run_prices
    from cascade_core.formats.loading import with_draft
    from cascade_core.speed.prices import measured_c
    handlers = ExploreHandlers(PairCache(), "tiny")
    assert handlers.default_cost_ratio() == DEFAULT_COST_RATIO  # nothing loaded or measured yet
    pair = handlers.pairs.get(with_draft("tiny", handlers.default_draft))
    run_prices(pair, 4)
    c = measured_c(pair)
    assert c == pytest.approx(pair.prices[("draft", 1)] / pair.prices[("target", 1)])
    assert handlers.default_cost_ratio() == max(round(c, 2), 0.01)  # above 1 too: the slider reaches it


def test_cs_slider_follows_the_chosen_drafts_measured_c_until_the_user_sets_c():
    """After a run the slider moves to its own draft's measured c where it holds no c the user set (where it started,
    or another draft's measured c it followed): choosing the head after the draft model moves it to the head's c, and
    Leviathan's estimate never appears at a c the slider was put at. A c the user set stays, with the estimate."""
    import gradio as gr
    from test_app import SETTINGS, run_to_end
    from app.explore import ExploreHandlers
    from app.pairs import PairCache
    from cascade_core.speed.prices import measured_c
    handlers = ExploreHandlers(PairCache(), "tiny")
    start = handlers.default_cost_ratio()
    settings = dict(SETTINGS, max_new_tokens=12, cost_ratio=start)
    cs = {}
    for draft in ("model", "head"):
        view = run_to_end(handlers, **dict(settings, draft=draft))
        cs[draft] = round(measured_c(handlers.pairs.peek(view.run.pair_spec)), 2)
        assert "set by you" not in view.speedup  # at where the slider was put, no hypothetical figure
        slider, speedup = handlers.follow_c(view.run, settings["cost_ratio"])
        assert slider["value"] == max(cs[draft], 0.01) and "set by you" not in speedup
        assert slider["maximum"] == max(slider["value"], 1.0)  # the slider reaches a draft costlier than its target
        settings["cost_ratio"] = slider["value"]
    assert cs["model"] != cs["head"]  # the slider moved from one draft's c to the other's
    view = run_to_end(handlers, **dict(settings, draft="model", cost_ratio=0.5))
    assert handlers.follow_c(view.run, 0.5) == (gr.skip(), gr.skip())  # the user's c stays
    assert "At c = 0.50, set by you" in view.speedup
    assert handlers.follow_c(None, start) == (gr.skip(), gr.skip())  # no run, no measured c: where it is


def test_cs_slider_reaches_a_draft_costlier_than_its_target(tiny64):
    """A draft call can cost more than a target call (the tiny pair's draft measured 1.14 and 1.57 on a 2-core
    CPU): the slider's right end moves to that c, so that it stands where the speed-up sentence says, not at 1 beside
    a c of 1.14; the next draft's c below 1 brings the right end back to 1."""
    from app.explore import ExploreHandlers
    from app.explore_views import Run
    from app.pairs import PairCache
    from cascade_core.speed.prices import Prices
    trace = generate(tiny64, "Once", rule="v3", alpha=0.5, gamma=4, seed=2, max_new_tokens=20)
    handlers = ExploreHandlers(PairCache(), "tiny")
    cost_ratio = handlers.start_c
    for c, right_end in ((1.14, 1.14), (0.6, 1.0)):
        prices = Prices(target=0.002, draft=0.002 * c, verify=0.003, block=5)
        slider, speedup = handlers.follow_c(Run(trace, "tiny", prices), cost_ratio)
        assert (slider["value"], slider["maximum"]) == (c, right_end)
        assert f"measured c = {c:.2f}" in speedup and "set by you" not in speedup
        handlers.start_c = cost_ratio = slider["value"]  # the slider put there, as unset_cs finds the loaded pairs' c


def test_the_engines_clock_leaves_out_a_readers_time(tiny64):
    """Timed views compare the engine's own seconds (its calls and work), not the wall, which counts the time the
    page holds the stream between blocks."""
    import time
    from cascade_core import stream
    blocks = 0
    for trace in stream(tiny64, "Once", rule="v3", alpha=0.5, gamma=2, seed=1, max_new_tokens=12):
        blocks += 1
        time.sleep(0.1)  # a reader (the page's streaming and redraw) holding the stream
    stats = trace.stats
    assert 0 < stats["engine_seconds"] <= stats["wall_seconds"] - 0.1 * (blocks - 2)


def timed(rates):
    """Fake timed runs: per repeat, traces whose engine wrote 48 tokens at these rates."""
    from types import SimpleNamespace
    return [[SimpleNamespace(stats=dict(new_tokens=48, engine_seconds=48 / r)) for r in repeat] for repeat in rates]


def test_a_timed_verdict_says_when_its_repeats_disagree():
    from types import SimpleNamespace
    from app.lessons import LESSONS
    why = next(lesson for lesson in LESSONS if lesson.doubt and lesson.look.__name__ == "look_for_why")
    agree, split = timed([[10, 12, 14]] * 3), timed([[10, 12, 14], [10, 15, 14], [10, 12, 14]])
    cascade = why.answers[0].text  # the cascade (run 2) fastest by the median in both
    assert why.held(None, agree) == why.held(None, split) == 0
    assert "disagree" not in why.reveal(cascade, None, agree)
    assert "The 3 repeats disagree on which finished first" in why.reveal(cascade, None, split)
    paid = next(lesson for lesson in LESSONS if lesson.doubt and lesson.look.__name__ == "look_for_timed")
    pairs = [SimpleNamespace(draft_kind=kind, drafting=SimpleNamespace(label=label))
             for kind, label in (("model", "draft model"), ("model", "draft model"), ("head", "EAGLE-3 head"))]
    split = timed([[10, 9, 12], [10, 11, 12], [10, 9, 12]])  # the head always faster, the model once
    assert paid.held(pairs, split) == 1  # the head only, by the median
    assert "disagree on whether the cascade with the draft model beat the target alone" in paid.reveal(
        paid.answers[1].text, pairs, split)
