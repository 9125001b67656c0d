"""The teaching tabs on the tiny pair: each API through gradio_client, the handlers behind the page, and bad input."""
import html
import json

import gradio as gr
import pytest
from gradio_client import Client

from app.explore import Run
from app.compare import CompareHandlers
from app.pairs import PairCache
from app.sandbox import REST, SIZE, START, SandboxHandlers, loaded_position, top_tokens
from app.strategies import StrategiesHandlers
from cascade_core import RULES, Trace, generate, load_pair
from cascade_core.method.explain import dissect
from same_results import assert_same
from test_app import TIMING, run_to_end, untimed


@pytest.fixture(scope="module")
def client(tiny_app_url):
    return Client(tiny_app_url, verbose=False)


@pytest.fixture(scope="module")
def tiny():
    return load_pair("tiny")


def strict(text):
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))


def test_compare_api_rows_equal_run_api(client):
    settings = dict(gamma=3, temperature=0.8, seed=5, max_new_tokens=24)
    rows = [{"rule": "v3", "alpha": 0.5}, {"rule": "chow", "alpha": 0.4}, {"rule": "lossless"}]
    traces = strict(client.predict(prompt="The cat", rows=rows, **settings, api_name="/compare"))
    assert len(traces) == 3
    for row, trace in zip(rows, traces):
        alone = Trace.from_json(client.predict(prompt="The cat", rule=row["rule"], alpha=row.get("alpha", 0.0),
                                               **settings, api_name="/run"))
        assert trace["tokens"] == alone.tokens and trace["sources"] == alone.sources
        # the mean TV to the target is a float of the row's float32 distributions: a batched row's last bits differ
        assert_same({k: v for k, v in trace["stats"].items() if k not in TIMING}, untimed(alone.stats), "stats")
        # the engines' acceptance metrics, counts all: the batched row's verify steps are its solo run's
        assert trace["speculative_decoding"] == alone.speculative_decoding is not None


def test_frontier_api_rows(client):
    rows = strict(client.predict(prompt="The cat", rules=["v3", "lossless"], alphas="0.3,0.7", max_new_tokens=16,
                                 api_name="/frontier"))
    assert [(r["rule"], r["alpha"]) for r in rows] == [("v3", 0.3), ("v3", 0.7), ("lossless", None)]
    assert all(r["tokens"] == 16 and r["target_nll"] > 0 for r in rows)


@pytest.mark.parametrize("rule", RULES)
def test_sandbox_api_output_is_pi(client, rule):
    alpha = 1.0 if rule == "bild" else 0.4
    numbers = strict(client.predict(q=[4, 2, 1, 1], p=[1, 4, 1, 2], rule=rule, alpha=alpha, api_name="/sandbox"))
    assert set(numbers) == {"pi", "accept_prob", "residual", "a_star", "defers", "tv", "rejection_prob", "output"}
    assert len(numbers["defers"]) == 4 and abs(sum(numbers["output"]) - 1) < 1e-12
    # an engine's keep-set rule has no pi and no residual (cascade_core/method/keep_sets.py)
    if RULES[rule].keep is not None:
        assert numbers["pi"] is None and numbers["residual"] is None and len(numbers["accept_prob"]) == 4
    elif rule != "lossy":
        assert max(abs(a - b) for a, b in zip(numbers["output"], numbers["pi"])) < 1e-12


def test_compare_with_a_head_runs_every_row_but_draft_only_and_says_why(client, tiny):
    rows = [{"rule": "v3", "alpha": 0.5}, {"rule": "draft"}, {"rule": "lossless"}]
    traces = strict(client.predict(prompt="The cat", rows=rows, draft="head", gamma=3, max_new_tokens=8,
                                   api_name="/compare"))
    assert [t.get("skipped", "")[:20] for t in traces] == ["", "row 2 (draft) needs ", ""]
    head_pair = load_pair("tiny", draft="head")
    assert traces[2]["tokens"] == generate(head_pair, "The cat", rule="lossless", gamma=3, temperature=0.7,
                                           max_new_tokens=8).tokens
    cells = ["v3", 0.5, "draft", 0.0, "", 0.0, "", 0.0, "", 0.0, "", 0.0]
    *_, (kept, _, _, status) = CompareHandlers(PairCache(), "tiny").run("Hello", "head", 3, 1.0, 0, 8, *cells)
    assert len(kept) == 1 and status.startswith("Done: 1 row. Not run: row 2 (draft) needs a draft that runs alone")
    with pytest.warns(UserWarning, match="row 1 \\(draft\\) needs a draft that runs alone"):
        list(CompareHandlers(PairCache(), "tiny").run("Hello", "head", 3, 1.0, 0, 8, "draft", 0.0))


def test_compare_with_each_draft_runs_every_row_with_both_side_by_side(client):
    rows = [{"rule": "v3", "alpha": 0.5}, {"rule": "draft"}]
    traces = strict(client.predict(prompt="The cat", rows=rows, draft="each", gamma=3, max_new_tokens=8,
                                   api_name="/compare"))
    assert [(t["settings"]["rule"] if "settings" in t else t["rule"], t["draft"]) for t in traces] == [
        ("v3", "model"), ("v3", "head"), ("draft", "model"), ("draft", "head")]
    assert "skipped" in traces[3] and "skipped" not in traces[2]
    for t in traces[:3]:  # each row is its solo run on its own draft
        solo = generate(load_pair("tiny", draft=t["draft"]), "The cat", rule=t["settings"]["rule"],
                        alpha=t["settings"]["alpha"], gamma=3, temperature=0.7, max_new_tokens=8)
        assert t["tokens"] == solo.tokens and t["sources"] == solo.sources
    cells = ["v3", 0.5, "lossless", 0.0, "", 0.0, "", 0.0, "", 0.0, "", 0.0]
    *_, (runs, html, stats, status) = CompareHandlers(PairCache(), "tiny").run("Hello", "each", 3, 1.0, 0, 8, *cells)
    assert status == "Done: 4 rows." and "| v3 alpha 0.5, head draft |" in stats
    assert [row.name for row, _ in runs] == ["v3 alpha 0.5, model draft", "v3 alpha 0.5, head draft",
                                             "lossless, model draft", "lossless, head draft"]
    assert CompareHandlers.open_row(runs, gr.EventData(None, {"row": 1}))[:3] == ["Hello", "head", "v3"]
    with pytest.raises(ValueError, match="rows and max_new_tokens ask for 8 runs x 1000"):
        CompareHandlers(PairCache(), "tiny").rows("Hi", "each", [("v3", 0.1), ("v3", 0.2), ("v3", 0.3), ("v3", 0.4)],
                                                  3, 1.0, 0, 1000)


def test_strategies_with_a_head_say_which_need_the_draft_alone_and_run_the_rest(client):
    lanes = strict(client.predict(prompt="The cat", draft="head", gamma=3, max_new_tokens=12, api_name="/strategies"))
    assert [lane["name"] for lane in lanes] == ["target alone", "cascade", "speculative decoding",
                                                "speculative cascade", "sequential cascade"]
    assert [lane["totals"] is None for lane in lanes] == [False, True, False, False, True]
    assert "the cascade lets the draft answer alone" in lanes[1]["skipped"]
    assert "calls the target only where the rule defers" in lanes[4]["skipped"]
    assert lanes[3]["totals"]["tokens"] == 12
    assert lanes[0]["totals"]["speedup"] == 1.0 and lanes[3]["totals"]["speedup"] > 0  # every tab's number
    *_, (figure, texts, status) = StrategiesHandlers(PairCache(), "tiny").run("Hello", "head", "v3", 0.5, 0.6, 3,
                                                                             0.7, 0, 8)
    assert "Not run with an EAGLE-3 head" in status and texts.count("Not run:") == 2
    assert len(figure.layout.annotations) == 5


def test_strategies_api_lanes(client):
    lanes = strict(client.predict(prompt="The cat", rule="chow", alpha=0.5, threshold=1.0, max_new_tokens=20,
                                  api_name="/strategies"))
    assert [lane["name"] for lane in lanes] == ["target alone", "cascade", "speculative decoding",
                                                "speculative cascade", "sequential cascade"]
    assert lanes[3]["text"] == lanes[4]["text"]  # the same tokens, another cost
    assert lanes[1]["totals"]["deferred"]  # no draft is that sure: the target answered again
    assert all(0 <= start <= end <= lane["totals"]["seconds"] + 1e-6
               for lane in lanes for _, start, end in lane["calls"])
    assert all(0 < lane["totals"]["engine_seconds"] <= lane["totals"]["seconds"] for lane in lanes)
    assert lanes[4]["totals"]["target_calls"] < lanes[4]["totals"]["tokens"]  # chow calls p only where it defers


@pytest.mark.parametrize("api, args, message", [
    ("/compare", dict(prompt="Hi", rows=[]), "rows: give 1 to 6"),
    ("/compare", dict(prompt="Hi", rows="v3"), "rows must be a list"),
    ("/compare", dict(prompt="Hi", rows=[{"rule": "v9"}]), "unknown rule 'v9'"),
    ("/frontier", dict(prompt="Hi", rules=["v9"]), "unknown rule 'v9'"),
    ("/frontier", dict(prompt="Hi", rules=["v3"], alphas="0.5,2"), "alpha=2.0 is outside rule 'v3'"),
    ("/sandbox", dict(q=[1, 2], p=[1, 2, 3]), "q and p must have the same length"),
    ("/sandbox", dict(q=[0, 0], p=[1, 2]), "q must have some positive weight"),
    ("/sandbox", dict(q=[1, -2], p=[1, 2]), "q must be a list of 2 to 64 non-negative numbers"),
    ("/strategies", dict(prompt="Hi", threshold=2), "threshold must be a number from 0 to 1"),
])
def test_bad_input_in_every_tab_names_its_field(client, api, args, message):
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        client.predict(**args, api_name=api)
    assert strict(client.predict(q=[1, 1], p=[1, 3], rule="lossless", api_name="/sandbox"))["output"] == [0.25, 0.75]


def test_compare_streams_rows_and_opens_one_in_explore(tiny):
    handlers = CompareHandlers(PairCache(), "tiny")
    cells = ["v3", 0.5, "chow", 0.3, "", 0.0, "", 0.0, "", 0.0, "", 0.0]
    views = list(handlers.run("Hello", "model", 4, 1.0, 0, 20, *cells))
    runs, rows_html, stats, status = views[-1]
    traces = [trace for _, trace in runs]
    assert status == "Done: 2 rows."
    assert [t.tokens for t in traces] == [generate(tiny, "Hello", rule=r, alpha=a, seed=0, max_new_tokens=20).tokens
                                          for r, a in (("v3", 0.5), ("chow", 0.3))]
    assert "| chow alpha 0.3 |" in stats
    opened = CompareHandlers.open_row(runs, gr.EventData(None, {"row": 1}))
    assert opened[:3] == ["Hello", "model", "chow"] and opened[3]["value"] == 0.3
    assert opened[-1].selected == "explore"
    html = [v[1] for v in views if isinstance(v[1], str)][-1]
    assert html.count('class="compare-row"') == 2


def test_sandbox_loads_a_position_of_the_explore_run():
    from app.explore import ExploreHandlers

    explore = ExploreHandlers(PairCache(), "tiny")
    run = run_to_end(explore, alpha=0.7).run
    values = SandboxHandlers.load(run, 3)
    labels, q, p, loaded = values[:SIZE], values[SIZE:2 * SIZE], values[2 * SIZE:3 * SIZE], values[3 * SIZE]
    rule, alpha, rule_text = values[3 * SIZE + 1:]
    assert (rule, alpha["value"]) == ("v3", 0.7) and "Eq. (15)" in rule_text  # the run's rule and alpha, not 0.5
    assert labels[-1] == REST and abs(sum(q) - 1) < 1e-6 and abs(sum(p) - 1) < 1e-6
    assert labels[0] == run.trace.positions[3]["proposal_text"]
    assert (labels, q, p) == tuple(map(list, top_tokens(run.trace.positions[3])[:3]))
    assert SandboxHandlers.stale(run, loaded) == "" and SandboxHandlers.stale(run, None) == ""
    # Explore runs again: the position loaded is marked as the run before's
    assert "run before" in SandboxHandlers.stale(run_to_end(explore, prompt="Another prompt").run, loaded)
    values = values[:3 * SIZE]
    figure, text, timing = SandboxHandlers.update_loaded(loaded, rule, alpha["value"], *values)
    assert figure.data and "accepted set A" in text and "ms on the server" in timing
    words = html.unescape(text)
    assert "Loaded from Explore's run, token #3" in words and "T = 1;" in words and "not the run's" not in words
    assert "The engine kept the proposal with probability" in words  # the run's own rule and alpha
    assert REST not in text.split("accepted set A")[1].split(")")[0]  # the rest is never in the accepted set
    moved = SandboxHandlers.update_loaded(loaded, rule, alpha["value"], *labels, *[q[0] + 0.1] + q[1:], *p)[1]
    assert "Loaded from" not in moved  # the user's own numbers now: the rest is one token like the others


@pytest.mark.parametrize("rule, alpha", [("v3", 0.5), ("v3", 0.9), ("v1", 0.2), ("v2", 0.1), ("chow", 0.5),
                                         ("diff", 0.1), ("opt", 0.3), ("bild", 2.0), ("fuzzy", 0.3), ("judge", 2.0),
                                         ("lossless", 0.0), ("lossy", 0.5)])
def test_a_loaded_position_gives_the_numbers_the_engine_used(tiny, rule, alpha):
    """At T = 1, every position of a run loaded into the Sandbox: the proposal's a*, its deferral and its keep
    probability under the run's rule are the engine's. The rest of the vocabulary is many tokens, not one: never
    the rule's max, never in the accepted set (as one "other" token it became max p and changed the decision);
    where its tokens fall on both sides of the threshold the numbers say so instead (rest_split)."""
    trace = generate(tiny, "Hello there", rule=rule, alpha=alpha, gamma=4, temperature=1.0, seed=3,
                     max_new_tokens=48)
    exact = 0
    for i, pos in enumerate(trace.positions):
        loaded = loaded_position(Run(trace, "tiny"), i)
        numbers = dissect(rule, loaded["q"], loaded["p"], alpha, rest=loaded["rest"])
        engine = pos["a_star"][rule]
        assert numbers["a_star"][0] == pytest.approx(engine, rel=1e-5, abs=1e-6), i
        assert numbers["defers"][0] == (alpha < engine), i
        assert numbers["a_star"][-1] is None and numbers["tv"] == pos["tv"]
        if not numbers["rest_split"]:
            assert numbers["accept_prob"][0] == pytest.approx(pos["accept_prob"], abs=1e-5), i
            exact += 1
    assert exact >= len(trace.positions) // 2


@pytest.mark.parametrize("rule, alpha", [("chow", 0.88),  # max q = 0.4 >= 1 - 0.88: the draft stands, pi = q
                                         ("v1", 0.5)])  # every token accepted: pi is q renormalised (rounding)
def test_sandbox_residual_is_zero_where_no_rejection_can_happen(rule, alpha):
    labels, q, p = START
    numbers = dissect(rule, q, p, alpha)
    assert numbers["pi"] == pytest.approx(numbers["q"]) and numbers["residual"] == [0.0] * SIZE
    assert numbers["rejection_prob"] == pytest.approx(0, abs=1e-12)
    _, text, _ = SandboxHandlers.update(rule, alpha, *labels, *q, *p)
    assert "no rejection can happen" in text


def test_sandbox_residual_where_a_rejection_can_happen():
    labels, q, p = START
    numbers = dissect("v3", q, p, 0.2)
    assert sum(numbers["residual"]) == pytest.approx(1)
    assert numbers["rejection_prob"] == pytest.approx(sum(max(0, a - b) for a, b in zip(numbers["q"], numbers["pi"])))
    assert "rejected with probability" in SandboxHandlers.update("v3", 0.2, *labels, *q, *p)[1]


def test_the_page_carries_explore_only_and_the_other_tabs_come_when_drawn():
    """A page load sets up Explore's components and events alone (each costs load time even in a tab not on
    screen: docs/lab/2026-11-30-explorer-page.md); the other tabs are empty until a render draws them."""
    from app import build_app

    config = build_app("tiny", pairs=PairCache()).get_config_file()
    ids = {c["props"].get("elem_id") for c in config["components"]}
    assert {"run", "prompt", "alpha", "copy-link-explore"} <= ids
    assert {f"tab-{tab}" for tab in ("compare", "tradeoff", "sandbox", "strategies", "learn")} <= ids
    assert not ids & {"compare-run", "tradeoff-run", "sandbox-plot", "strategies-run", "lessons", "lesson-1-run"}


def test_the_frontier_and_the_lanes_are_drawn_as_they_finish():
    """The Trade-off's chart and the Strategies' lanes grow while the call runs (they stayed empty to the end)."""
    import plotly.graph_objects as go

    from app.tradeoff import TradeoffHandlers

    views = list(TradeoffHandlers(PairCache(), "tiny").run("Hello", "model", ["lossless", "chow", "v3"], "0.3,0.7", 4,
                                                            1.0, 0, 12, True, "calls", 0.25))
    drawn = [len(v[1].data) for v in views[:-1] if isinstance(v[1], go.Figure)]
    assert len(drawn) >= 2 and drawn == sorted(drawn) and not views[-1][3].startswith("Placing")
    views = list(StrategiesHandlers(PairCache(), "tiny").run("Hello", "model", "v3", 0.5, 0.6, 2, 1.0, 0, 12))
    lanes = [v[1].count('class="lane"') for v in views[:-1] if isinstance(v[1], str)]
    assert lanes == [1, 2, 3, 4] and views[-1][1].count('class="lane"') == 5


def test_every_tab_starts_from_one_set_of_run_defaults():
    """Explore's temperature, seed and length in every tab (a Compare row at Explore's rule and alpha is Explore's
    text); gamma "auto" where a tab's runs choose each block's length, 4 where a tab prices its rows at one."""
    from app.explore import DEFAULT_GAMMA, DEFAULT_MAX_NEW_TOKENS, DEFAULT_SEED, DEFAULT_TEMPERATURE
    from app.compare import DEFAULTS as compare
    from app.strategies import DEFAULTS as strategies
    from app.tradeoff import DEFAULTS as tradeoff

    page = dict(temperature=DEFAULT_TEMPERATURE, seed=DEFAULT_SEED, max_new_tokens=DEFAULT_MAX_NEW_TOKENS)
    for tab in (compare, tradeoff, strategies):
        assert {name: tab[name] for name in page} == page
    assert DEFAULT_GAMMA == strategies["gamma"] == 0 and compare["gamma"] == tradeoff["gamma"] == 4


def test_compare_and_strategies_show_a_special_token_as_a_mark_not_its_text(tiny):
    """"Hello" at T 1, seed 7: v3 alpha 0.5's token #19 is the tiny tokenizer's <unk>. Compare's row and the
    strategies' lanes show it as Explore does (a mark, its card kept), never as the text '<unk>'."""
    assert generate(tiny, "Hello", rule="v3", alpha=0.5, seed=7, temperature=1.0, max_new_tokens=20).tokens[19] in \
        tiny.tokenizer.all_special_ids
    cells = ["v3", 0.5, "", 0.0, "", 0.0, "", 0.0, "", 0.0, "", 0.0]
    views = list(CompareHandlers(PairCache(), "tiny").run("Hello", "model", 4, 1.0, 7, 20, *cells))
    rows_html = [v[1] for v in views if isinstance(v[1], str)][-1]  # the last view keeps the rows drawn
    assert 'special" style="min-width:1ch" data-pos="19"' in rows_html
    *_, (_, texts, _) = StrategiesHandlers(PairCache(), "tiny").run("Hello", "model", "v3", 0.5, 0.6, 4, 1.0, 7, 20)
    for html_text in (rows_html, texts):
        assert "&lt;unk&gt;</span>" not in html_text and "&lt;unk&gt;&#x27;" in html_text  # in its card only
    assert 'special" data-pos="19"' in texts
